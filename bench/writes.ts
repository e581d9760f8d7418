/**
 * The write path in-process, per driver: POST /api/users-shaped creates through the users
 * service (no HTTP), with the WAL frames each create appends (every dirty page of a commit is
 * one frame) and which b-trees they land in. Once one after another, once with IN_FLIGHT
 * creates at a time, as concurrent requests make them (the native driver commits those in groups).
 *
 *   bun bench/writes.ts [creates] [in-flight] [--department] [--duplicates SHARE] [--native]
 *     --department      every create names a department (its upsert comes before the user's row)
 *     --duplicates 0.25 that share of creates reuse an e-mail already taken (each answers DUPLICATE_EMAIL)
 *     --native          only the native driver, only IN_FLIGHT at a time
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database as Connection } from "bun:sqlite";
import type { DatabaseDriver } from "../src/db/database";
import { openDatabase } from "../src/db/open";
import { migrate } from "../src/db/migrate";
import { createUser } from "../src/features/users/service";
import { createMetrics } from "../src/metrics";

const args = process.argv.slice(2);
const positional = args.filter((a, i) => !a.startsWith("--") && args[i - 1] !== "--duplicates");
const CREATES = Number(positional[0] ?? 2000);
const DEPARTMENT = args.includes("--department");
const DUPLICATES = args.includes("--duplicates") ? Number(args[args.indexOf("--duplicates") + 1]) : 0;
const NATIVE_ONLY = args.includes("--native");
/** Fewer than the autocheckpoint's 10,000 frames, so the WAL holds every frame written. */
const COUNTED = 150;
const IN_FLIGHT = Number(positional[1] ?? 32);
const logger = { warn() {} };

async function run(driver: DatabaseDriver, inFlight: number) {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-writes-"));
  const path = join(dir, "w.db");
  try {
    const db = await openDatabase({ url: `file:${path}`, driver });
    await migrate(db);
    const deps = { db, metrics: createMetrics({ defaultMetrics: false }), logger, now: Date.now, config: { passwordPolicy: "seed" as const } };
    let duplicates = 0;
    const createOne = async (i: number) => {
      // Every create in DUPLICATES' share reuses the address of the first one (created before the count).
      const duplicate = i >= 0 && (i * DUPLICATES) % 1 >= 1 - DUPLICATES;
      const email = duplicate ? "bench-1@example.com" : `bench${i}@example.com`;
      // Four creates in a row name one department: the first of them (never a duplicate) creates it.
      const department = DEPARTMENT ? { department: `Department ${Math.floor(i / 4) % 8}` } : {};
      try {
        await createUser(deps, { name: `Bench User ${i}`, email, ...department }, "bench");
      } catch (error) {
        if (!duplicate) throw error;
        duplicates++;
      }
    };
    /** Creates `from` … `to` - 1, `inFlight` at a time. */
    const creates = async (from: number, to: number) => {
      for (let i = from; i < to; i += inFlight) await Promise.all(Array.from({ length: Math.min(inFlight, to - i) }, (_, k) => createOne(i + k)));
    };
    // Frames per create: a fresh WAL (checkpointed and truncated), COUNTED creates, its size.
    await createOne(-1);
    const probe = new Connection(path);
    probe.run("PRAGMA wal_checkpoint(TRUNCATE)");
    await creates(0, COUNTED);
    const pageSize = Number(probe.query("PRAGMA page_size").values()[0][0]);
    const frames = framesByTree(probe, `${path}-wal`, pageSize);
    probe.close();
    const started = performance.now();
    const cpu = process.cpuUsage();
    await creates(COUNTED, COUNTED + CREATES);
    const { user, system } = process.cpuUsage(cpu);
    const perSecond = Math.round(CREATES / ((performance.now() - started) / 1000));
    db.close();
    return {
      driver,
      inFlight,
      department: DEPARTMENT,
      duplicates,
      createsPerSecond: perSecond,
      // On a shared machine wall time mostly measures the neighbours: per CPU-second of this process too.
      createsPerCpuSecond: Math.round(CREATES / ((user + system) / 1e6)),
      walFramesPerCreate: Math.round((Object.values(frames).reduce((a, b) => a + b, 0) / COUNTED) * 10) / 10,
      byTree: Object.fromEntries(
        Object.entries(frames)
          .sort(([, a], [, b]) => b - a)
          .map(([name, n]) => [name, Math.round((n / COUNTED) * 10) / 10]),
      ),
      pageSize,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Frames in the WAL per b-tree (table or index), from the frame headers' page numbers and dbstat. */
function framesByTree(connection: Connection, walPath: string, pageSize: number) {
  const owner = new Map(
    connection
      .query<{ name: string; pageno: number }, []>("SELECT name, pageno FROM dbstat")
      .all()
      .map((r) => [r.pageno, r.name]),
  );
  const wal = readFileSync(walPath);
  const counts: Record<string, number> = {};
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    const name = owner.get(wal.readUInt32BE(at)) ?? "(free list or new)";
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

if (NATIVE_ONLY) console.log(JSON.stringify(await run("native", IN_FLIGHT)));
else for (const driver of ["native", "libsql"] as const) for (const inFlight of [1, IN_FLIGHT]) console.log(JSON.stringify(await run(driver, inFlight)));
