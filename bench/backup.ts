/**
 * A backup of a 1,000,000-user database while writers write: how long it takes, how large the
 * archive is, and the writers' p99 during the backup against their p99 without one, in the same
 * run on the same server (the machine is shared and noisy: the ratio is the figure to read).
 *
 *   bun bench/backup.ts            (also run by `npm run bench` when its budget allows)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc, built when missing), BENCH_BACKUP_USERS
 * (default 1000000), BENCH_BACKUP_WRITERS (default 8 concurrent creates).
 * Target: writers' p99 during a backup ≤ 2× without one. The duration is reported, not asserted.
 * Writes bench/results/backup.json.
 */
import { Database } from "bun:sqlite";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TokenResponse } from "../src/features/auth/model";
import type { CreatedBackup } from "../src/features/backups/service";
import { jsonOf } from "../test/answers";

const ROOT = resolve(import.meta.dir, "..");
const BINARY = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const USERS = Number(process.env.BENCH_BACKUP_USERS ?? 1_000_000);
const WRITERS = Number(process.env.BENCH_BACKUP_WRITERS ?? 8);
const BASELINE_S = 8;
const TARGET_RATIO = 2;
const ADMIN = { email: "admin@backup-bench.example.com", password: "Backup-Bench-1!" };
const log = (message: string) => process.stderr.write(`[backup-bench] ${message}\n`);

function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

const p = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(sorted.length * q) - 1)] ?? 0;
};

if (!existsSync(BINARY)) {
  log("building dist/usersvc");
  if (Bun.spawnSync([process.execPath, "scripts/build.ts"], { cwd: ROOT, stdout: "inherit", stderr: "inherit" }).exitCode !== 0) throw new Error("build failed");
}

const dir = mkdtempSync(join(tmpdir(), "usersvc-backup-bench-"));
const env = {
  ...process.env,
  DATA_DIR: dir,
  JWT_SECRET: "backup-bench-secret-".padEnd(80, "b"),
  LOG_LEVEL: "warn",
  HOST: "127.0.0.1",
  ADMIN_EMAIL: ADMIN.email,
  ADMIN_PASSWORD: ADMIN.password,
};
let server: Bun.Subprocess | undefined;
// npm run bench stops a sub-bench at the end of its budget with SIGTERM: leave no server or folder behind.
process.on("SIGTERM", () => {
  server?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
  log("stopped: the bench budget is spent");
  process.exit(143);
});
try {
  if (Bun.spawnSync([BINARY, "migrate"], { cwd: dir, env }).exitCode !== 0) throw new Error("usersvc migrate failed");
  const seedStarted = performance.now();
  const db = new Database(join(dir, "usersvc.db"));
  db.run("PRAGMA journal_mode = WAL");
  // Written straight into the file (the API would take an hour): names go through the search index's triggers as usual.
  db.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO users (name, email, phone, age, salary_cents, created_at, updated_at)
     SELECT 'User ' || hex(randomblob(5)), 'user' || i || '@bench.example.com', '+886 2 ' || abs(random() % 100000000),
            18 + i % 80, 3000000 + abs(random() % 9000000), 1735689600000 + i * 1000, 1735689600000 + i * 1000 FROM n`,
    [USERS],
  );
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  const databaseBytes = statSync(join(dir, "usersvc.db")).size;
  log(`seeded ${USERS} users in ${((performance.now() - seedStarted) / 1000).toFixed(0)} s (${(databaseBytes / 1024 / 1024).toFixed(0)} MiB)`);

  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  server = Bun.spawn([BINARY, "serve"], { cwd: dir, env: { ...env, PORT: String(port) }, stdout: "ignore", stderr: "inherit" });
  for (
    let i = 0;
    !(await fetch(`${url}/actuator/health/readiness`).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  ) {
    if (i > 600) throw new Error("usersvc did not start");
    await Bun.sleep(50);
  }
  const login = await fetch(`${url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(ADMIN) });
  const token = (await jsonOf<{ data: TokenResponse }>(login)).data.token;

  /** WRITERS concurrent creates until `done()`; the latency of each, and any non-201. */
  let serial = 0;
  const write = async (done: () => boolean) => {
    const latencies: number[] = [];
    let errors = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (!done()) {
          const started = performance.now();
          const res = await fetch(`${url}/api/users`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "Bench Writer", email: `writer${++serial}@bench.example.com` }),
          });
          await res.arrayBuffer();
          latencies.push(performance.now() - started);
          if (res.status !== 201) errors++;
        }
      }),
    );
    return { creates: latencies.length, p50Ms: p(latencies, 0.5), p99Ms: p(latencies, 0.99), errors };
  };

  // Warm-up, then the baseline, then the same writers while a backup runs (from its request to its answer).
  const warm = performance.now() + 2_000;
  await write(() => performance.now() > warm);
  const baseEnd = performance.now() + BASELINE_S * 1000;
  const baseline = await write(() => performance.now() > baseEnd);
  log(`without a backup: ${baseline.creates} creates in ${BASELINE_S} s, p99 ${baseline.p99Ms.toFixed(1)} ms`);

  let finished = false;
  const backupStarted = performance.now();
  const backup = fetch(`${url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${token}` } }).then(async (r) => {
    finished = true;
    return { status: r.status, body: await jsonOf<CreatedBackup>(r), seconds: (performance.now() - backupStarted) / 1000 };
  });
  const during = await write(() => finished);
  const made = await backup;
  if (made.status !== 201) throw new Error(`backup answered ${made.status}: ${JSON.stringify(made.body)}`);
  log(`during the backup: ${during.creates} creates in ${made.seconds.toFixed(1)} s, p99 ${during.p99Ms.toFixed(1)} ms`);

  const ratio = during.p99Ms / baseline.p99Ms;
  const results = {
    at: new Date().toISOString(),
    users: USERS,
    databaseMiB: Math.round(databaseBytes / 1024 / 1024),
    backup: { seconds: Number(made.seconds.toFixed(1)), archiveMiB: Number((made.body.size / 1024 / 1024).toFixed(1)), name: made.body.name },
    writers: WRITERS,
    baseline,
    during,
    p99Ratio: Number(ratio.toFixed(2)),
    target: { p99Ratio: TARGET_RATIO, met: ratio <= TARGET_RATIO },
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/backup.json"), `${JSON.stringify(results, null, 2)}\n`);
  console.log(
    [
      "",
      `backup of ${USERS.toLocaleString("en")} users (${results.databaseMiB} MiB database): ${results.backup.seconds} s, archive ${results.backup.archiveMiB} MiB`,
      `writers (${WRITERS} concurrent creates) p99: ${baseline.p99Ms.toFixed(1)} ms without a backup, ${during.p99Ms.toFixed(1)} ms during it (${ratio.toFixed(2)}×); errors ${baseline.errors} / ${during.errors}`,
      `${results.target.met ? "MET    " : "NOT MET"}  writers' p99 during a backup ≤ ${TARGET_RATIO}× without: ${ratio.toFixed(2)}×`,
    ].join("\n"),
  );
} finally {
  server?.kill("SIGTERM");
  await server?.exited;
  rmSync(dir, { recursive: true, force: true });
}
