/**
 * Does name search stay fast as users grow? Seeds 1,000 and 100,000 generated users (the
 * deterministic test data set) into fresh databases, serves each with the real program on
 * a real port, and measures `GET /api/search/users?name=<3 letters>` at both sizes.
 *
 *   bun bench/search-scale.ts            (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (serve with that compiled binary instead of `bun src/main.ts`),
 * SEARCH_TERM (default "Ann"), BENCH_DURATION seconds per size (default 8),
 * BENCH_SEARCH_CONNECTIONS (default 4: latency near service time, not queueing on 2 cores).
 * Load generator: Debian's wrk; autocannon (devDependency) when wrk is missing.
 * Target: p99 < 10 ms at 100k users and within 3x of the 1k figure. Writes bench/results/search-scale.json.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Reader } from "../src/db/database";
import { openDatabase } from "../src/db/open";
import { migrate } from "../src/db/migrate";
import { createTokens } from "../src/security/bearer-tokens";
import { searchUsers } from "../src/store/user-search";
import { seedUsers } from "../test/fixtures/users-dataset";

const ROOT = resolve(import.meta.dir, "..");
const SIZES = [1_000, 100_000];
const TERM = process.env.SEARCH_TERM ?? "Ann";
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP_S = 2;
const CONNECTIONS = Number(process.env.BENCH_SEARCH_CONNECTIONS ?? 4);
const SECRET = "search-scale-bench-secret-".padEnd(80, "s");
const TARGET_P99_MS = 10;
const TARGET_RATIO = 3;

interface Figures {
  users: number;
  matches: number;
  seedSeconds: number;
  /** The search function alone on the seeded database, in this process: scaling without HTTP or load noise. */
  queryOnly: { p50Ms: number; p99Ms: number };
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

const log = (message: string) => process.stderr.write(`[search-scale] ${message}\n`);

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

async function waitForHealth(url: string, timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      if ((await fetch(`${url}/actuator/health/liveness`)).ok) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(100);
  }
  throw new Error(`the service did not answer at ${url} within ${timeoutMs} ms`);
}

/** wrk --latency: "Latency Distribution" lines such as "99%    1.23ms". */
function wrkMs(output: string, percentile: string): number {
  const match = output.match(new RegExp(`^\\s*${percentile}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m"));
  if (!match) throw new Error(`wrk printed no ${percentile}% latency:\n${output}`);
  return Number(match[1]) * { us: 0.001, ms: 1, s: 1000 }[match[2] as "us" | "ms" | "s"];
}

async function load(url: string, token: string, seconds: number): Promise<Omit<Figures, "users" | "matches" | "seedSeconds" | "queryOnly">> {
  if (Bun.which("wrk")) {
    const proc = Bun.spawn(["wrk", "-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-H", `Authorization: Bearer ${token}`, url], { stdout: "pipe", stderr: "pipe" });
    const output = await new Response(proc.stdout).text();
    if ((await proc.exited) !== 0) throw new Error(`wrk failed: ${await new Response(proc.stderr).text()}`);
    return {
      rps: Math.round(Number(output.match(/Requests\/sec:\s+([\d.]+)/)?.[1] ?? 0)),
      p50Ms: wrkMs(output, "50"),
      p99Ms: wrkMs(output, "99"),
      errors: Number(output.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0) + Number(output.match(/Socket errors:.*?(\d+)/)?.[1] ?? 0),
    };
  }
  // autocannon ships no types; only what is read here is declared.
  type Result = { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number };
  const { default: autocannon } = (await import("autocannon" as string)) as { default: (options: object) => Promise<Result> };
  const result = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers: { authorization: `Bearer ${token}` } });
  return { rps: Math.round(result.requests.average), p50Ms: result.latency.p50, p99Ms: result.latency.p99, errors: result.non2xx + result.errors };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];

async function queryOnly(db: Reader, runs = 2000) {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await searchUsers(db, { name: TERM, active: true }, { page: 0, size: 10 });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  return { p50Ms: round(percentile(times, 0.5)), p99Ms: round(percentile(times, 0.99)) };
}

async function measure(users: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-search-scale-"));
  try {
    const database = await openDatabase({ url: `file:${join(dir, "usersvc.db")}` });
    await migrate(database);
    const t0 = performance.now();
    const seeded = await seedUsers(database, { count: users, seed: 1 });
    const seedSeconds = Math.round((performance.now() - t0) / 100) / 10;
    const direct = await queryOnly(database);
    database.close();
    const caller = seeded.find((u) => u.active)!;
    const matches = seeded.filter((u) => u.active && u.name.toLowerCase().includes(TERM.toLowerCase())).length;
    log(`${users} users seeded in ${seedSeconds} s (${matches} active users match "${TERM}")`);

    const port = await freePort();
    const binary = process.env.USERSVC_BINARY;
    const command = binary && existsSync(binary) ? [binary, "serve"] : [process.execPath, join(ROOT, "src/main.ts"), "serve"];
    const server = Bun.spawn(command, {
      cwd: dir,
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dir, JWT_SECRET: SECRET, LOG_LEVEL: "warn", WORKERS: "1" },
      stdout: "ignore",
      stderr: "inherit",
    });
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitForHealth(base, 30_000);
      const token = await createTokens(SECRET, Date.now).issue(caller.email, 0);
      const url = `${base}/api/search/users?name=${encodeURIComponent(TERM)}`;
      const probe = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      const body = await probe.json();
      if (probe.status !== 200 || !Array.isArray(body) || body.length !== Math.min(10, matches)) {
        throw new Error(`the search answered ${probe.status} ${JSON.stringify(body).slice(0, 200)}`);
      }
      await load(url, token, WARMUP_S);
      const figures = await load(url, token, DURATION_S);
      log(`${users} users: ${figures.rps} req/s, p50 ${figures.p50Ms.toFixed(2)} ms, p99 ${figures.p99Ms.toFixed(2)} ms, ${figures.errors} errors`);
      return { users, matches, seedSeconds, queryOnly: direct, ...figures };
    } finally {
      server.kill("SIGTERM");
      await server.exited;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const results: Figures[] = [];
for (const users of SIZES) results.push(await measure(users));
const [small, large] = results;
const p99Ratio = large.p99Ms / small.p99Ms;
const p50Ratio = large.p50Ms / small.p50Ms;
const targets = {
  [`p99 < ${TARGET_P99_MS} ms at ${large.users} users`]: large.p99Ms < TARGET_P99_MS,
  [`p99 at ${large.users} within ${TARGET_RATIO}x of ${small.users}`]: p99Ratio <= TARGET_RATIO,
  "no errors": results.every((r) => r.errors === 0),
};

const lines = [
  "",
  `GET /api/search/users?name=${TERM}  (${Bun.which("wrk") ? "wrk" : "autocannon"}, ${CONNECTIONS} connections, ${DURATION_S} s per size)`,
  `${"users".padStart(8)} ${"matches".padStart(8)} ${"req/s".padStart(8)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)}   query alone: p50 / p99 ms`,
  ...results.map(
    (r) =>
      `${String(r.users).padStart(8)} ${String(r.matches).padStart(8)} ${String(r.rps).padStart(8)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)}   ${r.queryOnly.p50Ms.toFixed(3)} / ${r.queryOnly.p99Ms.toFixed(3)}`,
  ),
  `ratio ${large.users}/${small.users}: p50 ${p50Ratio.toFixed(2)}x, p99 ${p99Ratio.toFixed(2)}x   (load average ${loadavg()[0].toFixed(2)} on ${navigator.hardwareConcurrency} cores)`,
  ...Object.entries(targets).map(([target, met]) => `${met ? "MET    " : "NOT MET"}  ${target}`),
];
console.log(lines.join("\n"));

mkdirSync(join(import.meta.dir, "results"), { recursive: true });
writeFileSync(
  join(import.meta.dir, "results", "search-scale.json"),
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      query: `/api/search/users?name=${TERM}`,
      generator: Bun.which("wrk") ? "wrk" : "autocannon",
      connections: CONNECTIONS,
      durationSeconds: DURATION_S,
      // The machine is shared: a high load average explains a noisy p99.
      loadAverage1m: Number(loadavg()[0].toFixed(2)),
      results,
      ratio: { p50: Number(p50Ratio.toFixed(3)), p99: Number(p99Ratio.toFixed(3)) },
      targets,
    },
    null,
    2,
  )}\n`,
);
process.exit(Object.values(targets).every(Boolean) ? 0 : 1);
