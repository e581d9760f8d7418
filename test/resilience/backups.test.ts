/**
 * Backups under load and under kill -9, on the compiled binary (heavy: RESILIENCE_HEAVY=1,
 * npm run test:resilience):
 * - 16 writers create users for 10 s while a backup is taken through the API in the middle: the
 *   archive is consistent and holds every create acknowledged before the backup began, no writer
 *   gets an error, and the writers' p99 stays under 1 s;
 * - `usersvc backup` killed with -9 while its temp archive is being written leaves no archive under
 *   a final name, and the next backup succeeds once the dead one's lease has expired;
 * - a restore over the folder of a server killed with -9 (its WAL still there) is refused until the
 *   server's lease expires, then restores exactly the archive's data;
 * - under --workers 2, concurrent creates give one 201 and 409 BACKUP_IN_PROGRESS for the rest,
 *   and the CLI is refused while a server's backup runs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Envelope } from "../../src/envelope";
import { unpackVerified } from "../../src/features/backups/archive";
import { jsonOf } from "../answers";
import { LEASE_TTL_MS } from "../../src/store/leases";
import { cli, descendants, integrity } from "../backup-support";
import { alive } from "../s3-server";
import { ADMIN, ensureBinary, freePort, HEAVY, loginToken, startBinary } from "./support";

if (!HEAVY) console.warn("backups under load and kill -9: skipped (heavy; runs under npm run test:resilience, RESILIENCE_HEAVY=1)");

const folders: string[] = [];
const folder = (tag: string) => {
  const dir = mkdtempSync(join(tmpdir(), `usersvc-backup-${tag}-`));
  folders.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

const binaryEnv = (dir: string) => ({ DATA_DIR: dir, JWT_SECRET: "resilience-secret-".padEnd(80, "r") });

/** A migrated data folder with `count` users written straight into the file (big enough that a backup takes seconds). */
function seeded(tag: string, count: number): string {
  const dir = folder(tag);
  expect(cli(["migrate"], binaryEnv(dir), ensureBinary()).code).toBe(0);
  const db = new Database(join(dir, "usersvc.db"));
  db.run("PRAGMA journal_mode = WAL");
  db.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO users (name, email, phone, age, created_at, updated_at)
     SELECT 'Seeded ' || hex(randomblob(6)), 'seed' || i || '@load.example.com', '+886 ' || abs(random() % 100000000), 18 + i % 80,
            unixepoch('subsec') * 1000, unixepoch('subsec') * 1000 FROM n`,
    [count],
  );
  db.close();
  return dir;
}

const archivesIn = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((n) => /^usersvc-.*\.tar\.gz$/.test(n)) : []);
const tempsIn = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".tar.gz.tmp")) : []);

async function unpacked(archive: string) {
  const dir = folder("unpacked");
  const file = Bun.file(archive);
  const manifest = await unpackVerified(file.stream() as unknown as AsyncIterable<Uint8Array>, dir, file.size);
  return { manifest, db: join(dir, "usersvc.db") };
}

const emailsIn = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return new Set(
      db
        .query<{ email: string }, []>("SELECT email FROM users")
        .all()
        .map((r) => r.email),
    );
  } finally {
    db.close();
  }
};

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.max(0, Math.ceil(values.length * 0.99) - 1)];

describe.skipIf(!HEAVY)("backups under load and kill -9", () => {
  test("16 writers for 10 s, a backup through the API in the middle: consistent, complete, no errors, p99 < 1 s", async () => {
    const dir = seeded("load", 50_000);
    const service = await startBinary(dir, freePort(), binaryEnv(dir));
    try {
      const token = await loginToken(service.url);
      const acked: { email: string; at: number }[] = [];
      const latencies: number[] = [];
      const failures: string[] = [];
      const until = performance.now() + 10_000;
      const writer = async (w: number) => {
        for (let i = 0; performance.now() < until; i++) {
          const email = `w${w}-${i}@load.example.com`;
          const started = performance.now();
          const res = await fetch(`${service.url}/api/users`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ name: `Writer ${w}`, email }),
          });
          await res.arrayBuffer();
          const at = performance.now();
          latencies.push(at - started);
          if (res.status === 201) acked.push({ email, at });
          else failures.push(`${res.status} for ${email}`);
        }
      };
      const writers = Array.from({ length: 16 }, (_, w) => writer(w));
      await Bun.sleep(4_000);
      const backupBegan = performance.now();
      const made = await fetch(`${service.url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
      const backupEnded = performance.now();
      expect(made.status).toBe(201);
      const { name } = (await made.json()) as { name: string };
      await Promise.all(writers);

      expect(failures).toEqual([]);
      const { manifest, db } = await unpacked(join(dir, "backups", name));
      expect(integrity(db)).toEqual({ integrity: ["ok"], foreignKeys: [] });
      const inArchive = emailsIn(db);
      const before = acked.filter((a) => a.at < backupBegan);
      expect(before.filter((a) => !inArchive.has(a.email))).toEqual([]);
      expect(manifest.tables.users).toBe(inArchive.size);
      const during = latencies.length;
      console.log(
        `backup under load: ${acked.length} creates by 16 writers in 10 s, p99 ${p99(latencies).toFixed(0)} ms; ` +
          `the backup took ${((backupEnded - backupBegan) / 1000).toFixed(1)} s for ${manifest.tables.users} users (${before.length} acknowledged before it began, all in it)`,
      );
      expect(during).toBeGreaterThan(0);
      expect(p99(latencies)).toBeLessThan(1000);
    } finally {
      service.proc.kill("SIGTERM");
      await service.proc.exited;
    }
  }, 120_000);

  test("kill -9 of `usersvc backup` while it writes: no archive under a final name; the next backup succeeds", async () => {
    const dir = seeded("kill", 200_000);
    const backups = join(dir, "backups");
    const env = binaryEnv(dir);
    const proc = Bun.spawn([ensureBinary(), "backup"], { cwd: dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LOG_LEVEL: "warn", ...env }, stdout: "pipe", stderr: "pipe" });
    let temp: string | undefined;
    for (let i = 0; i < 6000 && !temp && proc.exitCode === null; i++) {
      temp = tempsIn(backups)[0];
      if (!temp) await Bun.sleep(5);
    }
    const snapshotChildren = descendants(proc.pid);
    proc.kill("SIGKILL");
    await proc.exited;
    // The temp archive was there, and the process had not finished, when it was killed.
    expect(temp).toBeDefined();
    expect(proc.signalCode).toBe("SIGKILL");
    // Its snapshot process sees it is orphaned and stops without publishing.
    for (let i = 0; i < 200 && snapshotChildren.some(alive); i++) await Bun.sleep(50);
    expect(snapshotChildren.filter(alive)).toEqual([]);
    expect(archivesIn(backups)).toEqual([]);

    // Its lease is still live for a while: a backup now is refused, then succeeds once it expires.
    const refused = cli(["backup"], env, ensureBinary());
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("A backup is already running");
    await Bun.sleep(LEASE_TTL_MS);
    const next = cli(["backup"], env, ensureBinary());
    expect(next.stderr).toBe("");
    expect(next.code).toBe(0);
    const archive = next.stdout.trim();
    expect(archivesIn(backups)).toEqual([archive.split("/").pop()!]);
    expect(tempsIn(backups)).toEqual([]); // the dead one's temp file was cleared by the next backup
    const { manifest, db } = await unpacked(archive);
    expect(manifest.tables.users).toBe(200_000);
    expect(integrity(db).integrity).toEqual(["ok"]);
  }, 180_000);

  test("restore over a server killed with -9 (WAL present): refused while its lease lives, then exactly the archive's data", async () => {
    const dir = folder("wal");
    const service = await startBinary(dir, freePort(), binaryEnv(dir));
    const token = await loginToken(service.url);
    const create = async (email: string) => {
      const res = await fetch(`${service.url}/api/users`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "Wal Test", email }),
      });
      expect(res.status).toBe(201);
    };
    for (let i = 0; i < 20; i++) await create(`before${i}@wal.example.com`);
    const made = await fetch(`${service.url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    const archive = join(dir, "backups", ((await made.json()) as { name: string }).name);
    for (let i = 0; i < 20; i++) await create(`after${i}@wal.example.com`);
    service.proc.kill("SIGKILL");
    await service.proc.exited;
    const wal = join(dir, "usersvc.db-wal");
    expect(statSync(wal).size).toBeGreaterThan(0);

    const early = cli(["restore", archive], binaryEnv(dir), ensureBinary());
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/a server holds this data folder .*its lease expires within \d+ s/);
    await Bun.sleep(LEASE_TTL_MS);
    const restored = cli(["restore", archive], binaryEnv(dir), ensureBinary());
    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);

    const emails = emailsIn(join(dir, "usersvc.db"));
    expect([...emails].filter((e) => e.startsWith("after"))).toEqual([]);
    expect([...emails].filter((e) => e.startsWith("before"))).toHaveLength(20);
    expect(emails.has(ADMIN.email)).toBe(true);
    expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0); // no stale WAL beside the restored file
    expect(integrity(join(dir, "usersvc.db"))).toEqual({ integrity: ["ok"], foreignKeys: [] });
    // The replaced database, with the WAL it was killed with, still opens with every acknowledged write.
    const replaced = emailsIn(join(dir, "usersvc.db.before-restore"));
    expect([...replaced].filter((e) => e.startsWith("after"))).toHaveLength(20);

    // And a server starts on the restored folder.
    const again = await startBinary(dir, freePort(), binaryEnv(dir));
    again.proc.kill("SIGTERM");
    expect(await again.proc.exited).toBe(0);
  }, 120_000);

  test("--workers 2 with BACKUP_SCHEDULE: one process runs the schedule", async () => {
    const dir = folder("schedule");
    const port = freePort();
    const proc = Bun.spawn([ensureBinary(), "serve"], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...binaryEnv(dir),
        PORT: String(port),
        HOST: "127.0.0.1",
        WORKERS: "2",
        BACKUP_SCHEDULE: "*/2 * * * * *",
        LOG_LEVEL: "info",
      },
      stdout: "pipe",
      stderr: "inherit",
    });
    try {
      const lines: string[] = [];
      void (async () => {
        const decoder = new TextDecoder();
        let rest = "";
        for await (const chunk of proc.stdout) {
          const text = rest + decoder.decode(chunk);
          const parts = text.split("\n");
          rest = parts.pop()!;
          lines.push(...parts);
        }
      })();
      const count = (msg: string) => lines.filter((l) => l.includes(`"msg":"${msg}"`)).length;
      for (let i = 0; count("backup written") < 3; i++) {
        if (i > 300) throw new Error(`no three scheduled backups in 30 s: ${lines.slice(-5).join("\n")}`);
        await Bun.sleep(100);
      }
      expect(count("worker started")).toBe(1);
      expect(count("backups scheduled")).toBe(1);
      // Every scheduled run of the one scheduler got the lease: nothing was skipped for another scheduler's run.
      expect(count("scheduled backup skipped: another backup is running")).toBe(0);
      expect(archivesIn(join(dir, "backups")).length).toBeGreaterThanOrEqual(3);
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  }, 60_000);

  test("--workers 2: concurrent creates give one 201 and 409 for the rest; the CLI is refused meanwhile", async () => {
    const dir = seeded("workers", 200_000);
    const service = await startBinary(dir, freePort(), { ...binaryEnv(dir), WORKERS: "2" });
    try {
      const token = await loginToken(service.url);
      const post = () =>
        fetch(`${service.url}/api/admin/backups`, { method: "POST", keepalive: false, headers: { authorization: `Bearer ${token}`, connection: "close" } }).then(async (r) => ({
          status: r.status,
          body: await jsonOf<Envelope>(r),
        }));
      const first = post();
      await Bun.sleep(300); // the first one holds the lease by now (its backup of 200,000 users takes seconds)
      const racing = Promise.all(Array.from({ length: 6 }, post));
      const cliWhileRunning = cli(["backup"], binaryEnv(dir), ensureBinary());
      const others = await racing;
      const all = [await first, ...others];
      expect(all.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409]);
      expect(others.every((r) => r.body.errorCode === "BACKUP_IN_PROGRESS")).toBe(true);
      expect(cliWhileRunning.code).toBe(1);
      expect(cliWhileRunning.stderr).toContain("A backup is already running");
      expect(archivesIn(join(dir, "backups"))).toHaveLength(1);
    } finally {
      service.proc.kill("SIGTERM");
      await service.proc.exited;
    }
  }, 120_000);
});
