/**
 * usersvc on a remote primary: GET /api/users/{id} and POST /api/users against the embedded
 * database and against sqld (test/support/sqld.ts) over http://, behind the test kit's proxy,
 * which holds each direction half a round trip like a primary that far away. Also prints the
 * round trips each request cost, counted by that proxy.
 *
 *   bun bench/remote.ts            (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (serve with that compiled binary instead of `bun src/main.ts`),
 * BENCH_DURATION seconds (default 8), BENCH_CONNECTIONS (default 32), BENCH_RTT_MS (default 20).
 * Load generator: autocannon (devDependency; `[<id>]` in a body makes every e-mail unique).
 * Writes bench/results/remote.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { CONNECTIONS, DURATION_S, type Figure, load, RTT_MS } from "./autocannon-load";
import { startSqld } from "../test/support/sqld";
import { startServer, type ServerProcess } from "../test/server-process";

const ROOT = resolve(import.meta.dir, "..");
const log = (message: string) => process.stderr.write(`[remote] ${message}\n`);

async function scenarios(server: ServerProcess) {
  const headers = { authorization: `Bearer ${server.token}`, "content-type": "application/json" };
  const created = await fetch(`${server.url}/api/users`, { method: "POST", headers, body: JSON.stringify({ name: "Bench Target", email: "target@remote.bench" }) });
  const { id } = (await created.json()) as { id: number };
  const getUser = await load({ url: `${server.url}/api/users/${id}`, headers });
  const postUser = await load({
    url: `${server.url}/api/users`,
    method: "POST",
    headers,
    body: JSON.stringify({ name: "Bench Create", email: "c-[<id>]@remote.bench" }),
    idReplacement: true,
  });
  return { id, getUser, postUser };
}

const command = process.env.USERSVC_BINARY;
type Figures = Awaited<ReturnType<typeof scenarios>>;
/** The settings, then each database's figures as they are measured. */
const results: {
  connections: number;
  durationS: number;
  rttMs: number;
  generator: string;
  embedded?: Figures;
  remote?: Omit<Figures, "id"> & { roundTrips: { getUser: number; postUser: number } };
} = { connections: CONNECTIONS, durationS: DURATION_S, rttMs: RTT_MS, generator: "autocannon" };

log("embedded database");
const embedded = await startServer({ LOG_LEVEL: "warn" }, command);
try {
  results.embedded = await scenarios(embedded);
} finally {
  await embedded.stop();
}

log(`remote primary: sqld over http://, ${RTT_MS} ms per round trip`);
const sqld = await startSqld();
const remote = await startServer({ LOG_LEVEL: "warn", DATABASE_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken }, command);
try {
  // Round trips of one request each, counted before the load: afterwards the outbox sender
  // works through the load's WELCOME rows in the background. The least of a few tries is the
  // request's own count (the sender polls now and then).
  const headers = { authorization: `Bearer ${remote.token}`, "content-type": "application/json" };
  const created = await fetch(`${remote.url}/api/users`, { method: "POST", headers, body: JSON.stringify({ name: "Counted Target", email: "counted-target@remote.bench" }) });
  const { id: target } = (await created.json()) as { id: number };
  const tripsOf = async (request: () => Promise<Response>) => {
    let least = Infinity;
    for (let i = 0; i < 5; i++) {
      await sqld.reset();
      await request();
      least = Math.min(least, await sqld.roundTrips());
    }
    return least;
  };
  const trips = {
    getUser: await tripsOf(() => fetch(`${remote.url}/api/users/${target}`, { headers })),
    postUser: await tripsOf(() =>
      fetch(`${remote.url}/api/users`, { method: "POST", headers, body: JSON.stringify({ name: "Counted", email: `counted-${crypto.randomUUID()}@remote.bench` }) }),
    ),
  };
  await sqld.setDelay(RTT_MS / 2);
  const { id: _, ...figures } = await scenarios(remote);
  results.remote = { ...figures, roundTrips: trips };
} finally {
  await remote.stop();
  await sqld.stop();
}

const row = (name: string, e: Figure, r: Figure, trips: number) =>
  `${name.padEnd(24)} ${String(e.rps).padStart(8)} ${String(e.p99Ms).padStart(8)} ${String(r.rps).padStart(8)} ${String(r.p99Ms).padStart(8)} ${String(trips).padStart(6)}   ${e.non2xx + r.non2xx ? `non-2xx ${e.non2xx}/${r.non2xx}` : ""}`;
console.log(`\nremote primary (${RTT_MS} ms per round trip) beside embedded; autocannon, ${CONNECTIONS} connections, ${DURATION_S} s`);
console.log(`${"request".padEnd(24)} ${"emb r/s".padStart(8)} ${"emb p99".padStart(8)} ${"rem r/s".padStart(8)} ${"rem p99".padStart(8)} ${"trips".padStart(6)}`);
console.log(row("GET /api/users/{id}", results.embedded.getUser, results.remote.getUser, results.remote.roundTrips.getUser));
console.log(row("POST /api/users", results.embedded.postUser, results.remote.postUser, results.remote.roundTrips.postUser));
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(join(ROOT, "bench/results/remote.json"), JSON.stringify(results, null, 2));
