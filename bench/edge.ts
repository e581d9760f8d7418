/**
 * usersvc at the edge (issue 41's figures; docs/edge.md): one sqld primary (test/support/sqld.ts)
 * behind the test kit's proxy holding each direction half of EDGE_RTT_MS (default 50 ms round
 * trip), two embedded-replica edges (DATABASE_URL=file:… DATABASE_SYNC_URL=<primary>, the default
 * DATABASE_SYNC_INTERVAL of 1 s) and one remote edge (DATABASE_URL=http://<primary>), each
 * `bun src/main.ts serve` as its own process. One client, one request at a time (latency, not
 * throughput), reports:
 *
 * - GET /api/users/{id} at a replica edge and at the remote edge: p50 each and their ratio
 *   (goal: replica p50 ≤ 1 ms and ≥ 40× faster);
 * - POST /api/auth/login at both: p50 each; the requests a login costs the replica edge, counted
 *   by the proxy (Hrana requests, and pulls at two requests each; goal: one unit and its pull) and
 *   the round trips inferred from timing (the login's p50 with the primary 50 ms away, less its
 *   p50 at 0 ms, over the round trip);
 * - a write at one replica edge (PATCH of a user's name) until another replica edge answers the new
 *   name from its copy: p50 and p99 over EDGE_WRITES writes, from the writer's answer (goal: p99 ≤
 *   sync interval + 2 round trips) and from the write's send (the other edge may pull while the
 *   writer still waits for its own pull);
 * - the RSS of each edge after EDGE_IDLE_S seconds without requests.
 *
 * Every answer is checked against the status it must have; any other is counted and reported.
 *
 *   bun bench/run.ts --edge      (or bun bench/edge.ts; not part of a plain `npm run bench`)
 *
 * Environment: EDGE_RTT_MS (default 50), EDGE_WRITES (default 50), EDGE_IDLE_S (default 5).
 * Writes bench/results/edge.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startServer, type ServerProcess } from "../test/server-process";
import { startSqld } from "../test/support/sqld";

const ROOT = resolve(import.meta.dir, "..");
const RTT_MS = Number(process.env.EDGE_RTT_MS ?? 50);
const WRITES = Number(process.env.EDGE_WRITES ?? 50);
const IDLE_S = Number(process.env.EDGE_IDLE_S ?? 5);
const SYNC_INTERVAL_MS = 1_000;
const READS_REPLICA = 500;
const READS_REMOTE = 60;
const LOGINS = 15;
const PASSWORD = "Bench!Edge1";
const log = (message: string) => process.stderr.write(`[edge] ${message}\n`);

const p = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const quantiles = (samples: number[]) => {
  const sorted = [...samples].sort((x, y) => x - y);
  return { n: sorted.length, p50Ms: round(p(sorted, 0.5)), p99Ms: round(p(sorted, 0.99)), maxMs: round(sorted.at(-1) ?? Number.NaN) };
};
const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** Answers other than the expected status, per request kind. */
const unexpected: Record<string, Record<number, number>> = {};
function check(kind: string, status: number, expected: number) {
  if (status === expected) return true;
  unexpected[kind] ??= {};
  unexpected[kind][status] = (unexpected[kind][status] ?? 0) + 1;
  return false;
}

/** One request, timed from send to the whole body read; counted against `expected`. */
async function timed(kind: string, expected: number, url: string, init?: RequestInit) {
  const started = performance.now();
  const res = await fetch(url, init);
  const body = await res.text();
  const ms = performance.now() - started;
  return { ok: check(kind, res.status, expected), ms, body };
}

async function series(kind: string, n: number, expected: number, url: string, init?: RequestInit) {
  for (let i = 0; i < Math.min(20, n); i++) await timed(`${kind} (warm-up)`, expected, url, init);
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const { ok, ms } = await timed(kind, expected, url, init);
    if (ok) samples.push(ms);
  }
  return quantiles(samples);
}

const sqld = await startSqld();
const dirs: string[] = [];
const edges: ServerProcess[] = [];
const replicaEnv = () => {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-bench-edge-"));
  dirs.push(dir);
  return { DATABASE_URL: `file:${dir}/usersvc.db`, DATABASE_SYNC_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken, DATABASE_SYNC_INTERVAL: `${SYNC_INTERVAL_MS}ms` };
};
const results: Record<string, unknown> = { at: new Date().toISOString(), rttMs: RTT_MS, syncIntervalMs: SYNC_INTERVAL_MS };
try {
  // One after another, the primary near: the first migrates it and makes the ADMIN, the others find both.
  log("starting two replica edges and one remote edge");
  const replica = await startServer({ LOG_LEVEL: "warn", ...replicaEnv() });
  edges.push(replica);
  const other = await startServer({ LOG_LEVEL: "warn", ...replicaEnv() });
  edges.push(other);
  const remote = await startServer({ LOG_LEVEL: "warn", DATABASE_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken });
  edges.push(remote);

  const admin = { authorization: `Bearer ${replica.token}`, "content-type": "application/json" };
  const newUser = async (email: string) => {
    const created = await fetch(`${replica.url}/api/users`, { method: "POST", headers: admin, body: JSON.stringify({ name: "Edge User", email, password: PASSWORD }) });
    if (created.status !== 201) throw new Error(`the bench user: ${created.status} ${await created.text()}`);
    return ((await created.json()) as { id: number }).id;
  };
  const loginAs = (email: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email, password: PASSWORD }) });
  // Two users: the logins open sessions of their own, and past the cap the oldest of them end.
  const id = await newUser("reader@edge.bench");
  await newUser("login@edge.bench");
  const loginInit = loginAs("login@edge.bench");
  const signedIn = await fetch(`${replica.url}/api/auth/login`, loginAs("reader@edge.bench"));
  const token = ((await signedIn.json()) as { data: { token: string } }).data.token;
  const bearer = { headers: { authorization: `Bearer ${token}` } };
  // Every edge's copy holds the user and the session before anything is measured (no miss re-read).
  await Bun.sleep(3 * SYNC_INTERVAL_MS);

  log("login with the primary near (the password hash and the edge's own work)");
  const loginNear = await series("login at the replica edge, 0 ms", LOGINS, 200, `${replica.url}/api/auth/login`, loginInit);

  // Round trips through the proxy: Hrana requests, and pulls (two requests each, Hello then
  // BatchLogEntries). The least of a few tries: each replica edge pulls and probes its primary once
  // a second, the outbox sender now and then.
  const tripsOf = async (request: () => Promise<Response>, expected: number) => {
    let least = { hrana: 0, pulls: 0, trips: Number.POSITIVE_INFINITY };
    for (let i = 0; i < 7; i++) {
      await sqld.reset();
      const res = await request();
      await res.arrayBuffer();
      check("counted request", res.status, expected);
      const hrana = await sqld.roundTrips();
      const pulls = await sqld.pulls();
      if (hrana + 2 * pulls < least.trips) least = { hrana, pulls, trips: hrana + 2 * pulls };
    }
    return least;
  };
  const tripsText = ({ hrana, pulls, trips }: { hrana: number; pulls: number; trips: number }) => `${trips} (${hrana} Hrana, ${pulls} pull${pulls === 1 ? "" : "s"})`;
  const counted = {
    getUserReplica: await tripsOf(() => fetch(`${replica.url}/api/users/${id}`, bearer), 200),
    getUserRemote: await tripsOf(() => fetch(`${remote.url}/api/users/${id}`, bearer), 200),
    loginReplica: await tripsOf(() => fetch(`${replica.url}/api/auth/login`, loginInit), 200),
    loginRemote: await tripsOf(() => fetch(`${remote.url}/api/auth/login`, loginInit), 200),
  };

  await sqld.setDelay(RTT_MS / 2);
  log(`the primary ${RTT_MS} ms away: GET /api/users/{id}`);
  const getReplica = await series("GET user at the replica edge", READS_REPLICA, 200, `${replica.url}/api/users/${id}`, bearer);
  const getRemote = await series("GET user at the remote edge", READS_REMOTE, 200, `${remote.url}/api/users/${id}`, bearer);
  log("login");
  const loginReplica = await series("login at the replica edge", LOGINS, 200, `${replica.url}/api/auth/login`, loginInit);
  const loginRemote = await series("login at the remote edge", LOGINS, 200, `${remote.url}/api/auth/login`, loginInit);

  log(`${WRITES} writes at one replica edge, each until the other answers it`);
  const visible: number[] = [];
  const sinceSent: number[] = [];
  const writes: number[] = [];
  for (let i = 0; i < WRITES; i++) {
    const name = `Edge Write ${i}`;
    const wrote = await timed("PATCH user at the replica edge", 200, `${replica.url}/api/users/${id}`, { method: "PATCH", headers: admin, body: JSON.stringify({ name }) });
    if (!wrote.ok) continue;
    const answered = performance.now();
    writes.push(wrote.ms);
    for (;;) {
      const read = await timed("GET user at the other replica edge", 200, `${other.url}/api/users/${id}`, bearer);
      if (read.ok && (JSON.parse(read.body) as { name: string }).name === name) break;
      if (performance.now() - answered > 10_000)
        throw new Error(`write ${i} not visible at the other edge after 10 s (answers other than expected: ${JSON.stringify(unexpected)})`);
      await Bun.sleep(2);
    }
    visible.push(performance.now() - answered);
    sinceSent.push(performance.now() - answered + wrote.ms);
    // A pause of a random part of the interval, so the writes land at every phase of the other edge's pull.
    await Bun.sleep(Math.random() * SYNC_INTERVAL_MS);
  }
  const writeVisible = quantiles(visible);
  const writeVisibleSinceSent = quantiles(sinceSent);
  const write = quantiles(writes);

  log(`${IDLE_S} s idle`);
  await Bun.sleep(IDLE_S * 1000);
  const rssMiB = (server: ServerProcess) => Math.round((server.rss() / 1048576) * 10) / 10;
  const idleRss = { replica: rssMiB(replica), otherReplica: rssMiB(other), remote: rssMiB(remote) };

  const loginTrips = (loginReplica.p50Ms - loginNear.p50Ms) / RTT_MS;
  const ratio = getRemote.p50Ms / getReplica.p50Ms;
  const writeGoalMs = SYNC_INTERVAL_MS + 2 * RTT_MS;
  Object.assign(results, {
    getReplica,
    getRemote,
    ratio,
    loginNear,
    loginReplica,
    loginRemote,
    loginTripsInferred: loginTrips,
    counted,
    write,
    writeVisible,
    writeVisibleSinceSent,
    idleRss,
    unexpected,
  });

  const ms = (v: number) => `${v.toFixed(v < 10 ? 2 : 0)} ms`;
  const verdict = (met: boolean) => (met ? "MET" : "NOT MET");
  console.log(
    [
      "",
      `at the edge: sqld primary ${RTT_MS} ms per round trip (test kit proxy), DATABASE_SYNC_INTERVAL ${SYNC_INTERVAL_MS} ms; one client, one request at a time`,
      `GET /api/users/{id}        replica edge p50 ${ms(getReplica.p50Ms)} (p99 ${ms(getReplica.p99Ms)}, max ${ms(getReplica.maxMs)}, n ${getReplica.n})   remote edge p50 ${ms(getRemote.p50Ms)} (n ${getRemote.n})   ${ratio.toFixed(0)}×   goal p50 ≤ 1 ms and ≥ 40×: ${verdict(getReplica.p50Ms <= 1 && ratio >= 40)}`,
      `POST /api/auth/login       replica edge p50 ${ms(loginReplica.p50Ms)}   remote edge p50 ${ms(loginRemote.p50Ms)}   replica with the primary at 0 ms ${ms(loginNear.p50Ms)}`,
      `requests per login         replica edge ${tripsText(counted.loginReplica)} counted, ${loginTrips.toFixed(1)} round trips inferred from timing; remote edge ${tripsText(counted.loginRemote)}   goal ≤ 2 round trips (a unit and its pull): ${verdict(counted.loginReplica.hrana <= 1 && counted.loginReplica.hrana + counted.loginReplica.pulls <= 2)}`,
      `round trips per GET user   replica edge ${tripsText(counted.getUserReplica)}, remote edge ${tripsText(counted.getUserRemote)}`,
      `write seen at another edge p50 ${ms(writeVisible.p50Ms)}  p99 ${ms(writeVisible.p99Ms)}  max ${ms(writeVisible.maxMs)} (n ${writeVisible.n}, from the writer's answer)   goal p99 ≤ ${writeGoalMs} ms: ${verdict(writeVisible.p99Ms <= writeGoalMs)}`,
      `  from the write's send      p50 ${ms(writeVisibleSinceSent.p50Ms)}  p99 ${ms(writeVisibleSinceSent.p99Ms)} (the PATCH itself at the replica edge: p50 ${ms(write.p50Ms)}, p99 ${ms(write.p99Ms)})`,
      `RSS after ${IDLE_S} s idle       replica edge ${idleRss.replica} MiB (the other replica ${idleRss.otherReplica} MiB), remote edge ${idleRss.remote} MiB`,
      `answers other than expected: ${Object.keys(unexpected).length === 0 ? "none" : JSON.stringify(unexpected)}`,
    ].join("\n"),
  );
} finally {
  await Promise.all(edges.map((edge) => edge.stop()));
  await sqld.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(join(ROOT, "bench/results/edge.json"), `${JSON.stringify(results, null, 2)}\n`);
