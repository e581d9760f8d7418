/**
 * usersvc behind nginx on one remote primary, with one instance and then three (issue 30's
 * figures): sqld (test/support/sqld.ts) over http://, behind the test kit's proxy holding each
 * direction half of BENCH_RTT_MS, like a primary that far away; nginx is the multi-instance suite's
 * round-robin balancer (test/multi/cluster.ts). For each size it prints the round trips one
 * request costs, counted at that server through nginx (the guard alone: a USER refused an ADMIN
 * route; GET /api/users/{id}; login), and p50/p99 of GET /api/users/{id} and of login under load.
 * The latencies are reported, not judged: the 2 cores are shared with everything else.
 *
 *   bun bench/run.ts --multi       (or bun bench/multi.ts; not part of a plain `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc), BENCH_DURATION seconds (default 8),
 * BENCH_CONNECTIONS (default 32), BENCH_RTT_MS (default 20). Load generator: autocannon.
 * Writes bench/results/multi.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CONNECTIONS, DURATION_S, type Figure, load, RTT_MS } from "./autocannon-load";
import { clusterUnavailable, startNginx } from "../test/multi/cluster";
import { startServer, type ServerProcess } from "../test/server-process";
import { startSqld } from "../test/support/sqld";

const ROOT = resolve(import.meta.dir, "..");
const BINARY = resolve(process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc"));
const PASSWORD = "Bench!Multi1";
const log = (message: string) => process.stderr.write(`[multi] ${message}\n`);

const missing = clusterUnavailable();
if (missing) {
  console.log(`\nmulti-instance figures: skipped: ${missing}`);
  process.exit(0);
}

const sqld = await startSqld();
const instances: ServerProcess[] = [];
const dir = mkdtempSync(join(tmpdir(), "usersvc-bench-multi-"));
type Size = { instances: number; roundTrips: Record<string, { trips: number; status: number }>; getUser: Figure; login: Figure };
const sizes: Size[] = [];
try {
  // One after another: the first migrates the primary and creates the ADMIN, the others find both.
  for (let n = 0; n < 3; n++) instances.push(await startServer({ LOG_LEVEL: "warn", DATABASE_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken }, BINARY));
  const admin = { authorization: `Bearer ${instances[0].token}`, "content-type": "application/json" };
  const newUser = async (email: string) => {
    const created = await fetch(`${instances[0].url}/api/users`, { method: "POST", headers: admin, body: JSON.stringify({ name: "Bench User", email, password: PASSWORD }) });
    if (created.status !== 201) throw new Error(`the bench user: ${created.status} ${await created.text()}`);
    return ((await created.json()) as { id: number }).id;
  };
  // Two users: the login load opens thousands of sessions for its own, and the oldest of them end.
  const id = await newUser("reader@multi.bench");
  await newUser("login@multi.bench");
  const login = JSON.stringify({ email: "login@multi.bench", password: PASSWORD });
  const signedIn = await fetch(`${instances[0].url}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: "reader@multi.bench", password: PASSWORD }),
  });
  const userToken = ((await signedIn.json()) as { data: { token: string } }).data.token;

  for (const size of [1, 3]) {
    const nginx = await startNginx(
      join(dir, `nginx-${size}`),
      instances.slice(0, size).map((i) => Number(new URL(i.url).port)),
    );
    try {
      log(`${size} instance(s) behind nginx`);
      await sqld.setDelay(0);
      // The least of a few tries is the request's own count: the instances' outbox senders and
      // index upkeep poll the primary now and then.
      const tripsOf = async (request: () => Promise<Response>) => {
        let least = { trips: Infinity, status: 0 };
        for (let i = 0; i < 3 * size + 3; i++) {
          await sqld.reset();
          const res = await request();
          await res.arrayBuffer();
          const trips = await sqld.roundTrips();
          if (trips < least.trips) least = { trips, status: res.status };
        }
        return least;
      };
      const roundTrips = {
        // A USER deleting a user: refused by the access rule right after the guard's one read.
        guard: await tripsOf(() => fetch(`${nginx.url}/api/users/1`, { method: "DELETE", headers: { authorization: `Bearer ${userToken}` } })),
        getUser: await tripsOf(() => fetch(`${nginx.url}/api/users/${id}`, { headers: admin })),
        login: await tripsOf(() => fetch(`${nginx.url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: login })),
      };
      await sqld.setDelay(RTT_MS / 2);
      const getUser = await load({ url: `${nginx.url}/api/users/${id}`, headers: admin });
      const loginFigure = await load({ url: `${nginx.url}/api/auth/login`, method: "POST", headers: { "content-type": "application/json" }, body: login });
      sizes.push({ instances: size, roundTrips, getUser, login: loginFigure });
    } finally {
      await nginx.stop();
    }
  }
} finally {
  await Promise.all(instances.map((i) => i.stop()));
  await sqld.stop();
  rmSync(dir, { recursive: true, force: true });
}

const lines = [
  "",
  `behind nginx on a remote primary (sqld, ${RTT_MS} ms per round trip); autocannon, ${CONNECTIONS} connections, ${DURATION_S} s; latencies reported, not judged`,
  `${"instances".padEnd(10)} ${"request".padEnd(26)} ${"trips".padStart(6)} ${"req/s".padStart(7)} ${"p50 ms".padStart(7)} ${"p99 ms".padStart(7)}`,
];
for (const s of sizes) {
  const row = (name: string, trips: { trips: number; status: number }, f?: Figure) =>
    `${String(s.instances).padEnd(10)} ${name.padEnd(26)} ${String(trips.trips).padStart(6)} ${String(f?.rps ?? "").padStart(7)} ${String(f?.p50Ms ?? "").padStart(7)} ${String(f?.p99Ms ?? "").padStart(7)}  status ${trips.status}${f?.non2xx ? `; non-2xx ${f.non2xx}` : ""}`;
  lines.push(
    row("guard (USER refused)", s.roundTrips.guard),
    row("GET /api/users/{id}", s.roundTrips.getUser, s.getUser),
    row("POST /api/auth/login", s.roundTrips.login, s.login),
  );
}
console.log(lines.join("\n"));
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(
  join(ROOT, "bench/results/multi.json"),
  `${JSON.stringify({ at: new Date().toISOString(), rttMs: RTT_MS, connections: CONNECTIONS, durationS: DURATION_S, generator: "autocannon", sizes }, null, 2)}\n`,
);
