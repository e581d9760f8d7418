/**
 * What the backup suites share: the CLI from source, a database's rows as digests, an archive
 * unpacked and re-packed (to alter one member and keep the rest well-formed).
 */
import { Database } from "bun:sqlite";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createWriteStream } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { create, extract, Header, Pax } from "tar";
import type { Manifest } from "../src/features/backups/archive";
import { SCHEMA_TABLES } from "./support/tables";

const ROOT = resolve(import.meta.dir, "..");

/** The environment less JWT_SECRET (and the worker marker), plus `env`. */
export function cleanEnv(env: Record<string, string>): Record<string, string> {
  const { JWT_SECRET: _, USERSVC_WORKER: __, ...rest } = process.env as Record<string, string>;
  return { ...rest, LOG_LEVEL: "warn", ...env };
}

/** `usersvc ARGS` from source (or `binary`), waiting for its exit. */
export function cli(args: string[], env: Record<string, string>, binary?: string) {
  const argv = binary ? [binary, ...args] : [process.execPath, join(ROOT, "src/main.ts"), ...args];
  const run = Bun.spawnSync(argv, { cwd: env.DATA_DIR ?? ROOT, env: cleanEnv(env) });
  return { code: run.exitCode, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

/** Tables that are the data (every schema table but the bookkeeping of leases), and the migrations a restore must carry. */
const DATA_TABLES = [...SCHEMA_TABLES.filter((table) => table !== "leases"), "__drizzle_migrations"];

/** One digest per table, rows in rowid order; audit entries about backups are left out (they are written after a snapshot). */
export function digests(file: string): Record<string, string> {
  const db = new Database(file, { readonly: true });
  try {
    const out: Record<string, string> = {};
    for (const table of DATA_TABLES) {
      const where = table === "audit_log" ? " WHERE action NOT LIKE 'BACKUP_%'" : "";
      const rows = db.query(`SELECT * FROM "${table}"${where} ORDER BY rowid`).all();
      out[table] = `${rows.length}:${createHash("sha1").update(JSON.stringify(rows)).digest("hex")}`;
    }
    return out;
  } finally {
    db.close();
  }
}

export function integrity(file: string) {
  const db = new Database(file, { readonly: true });
  try {
    return {
      integrity: db
        .query<{ integrity_check: string }, []>("PRAGMA integrity_check")
        .all()
        .map((r) => r.integrity_check),
      foreignKeys: db.query("PRAGMA foreign_key_check").all(),
    };
  } finally {
    db.close();
  }
}

export const sha256File = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** Every file under `folder` (relative path → sha256). */
export function folderHashes(folder: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, prefix: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path, `${prefix}${entry}/`);
      else out[prefix + entry] = sha256File(path);
    }
  };
  walk(folder, "");
  return out;
}

/** Unpacks `archive`, lets `change` alter the members, and packs them again (manifest first) into a new file. */
export async function repack(archive: string, change: (folder: string, manifest: Manifest) => void | Promise<void>): Promise<string> {
  const folder = mkdtempSync(join(tmpdir(), "usersvc-repack-"));
  await extract({ file: archive, cwd: folder });
  const manifest = JSON.parse(readFileSync(join(folder, "manifest.json"), "utf8")) as Manifest;
  await change(folder, manifest);
  await Bun.write(join(folder, "manifest.json"), JSON.stringify(manifest));
  const out = join(folder, "repacked.tar.gz");
  await create({ gzip: true, file: out, cwd: folder }, ["manifest.json", ...Object.keys(manifest.files)]);
  return out;
}

/** Every process below `pid`, deepest first (from /proc). */
export function descendants(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readdirSync(`/proc/${pid}/task`).flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
  return children.flatMap((child) => [...descendants(child), child]);
}

/** One tar member's 512-byte header. */
function tarHeader(path: string, size: number): Buffer {
  const block = Buffer.alloc(512);
  new Header({ path, size, mode: 0o600, mtime: new Date(0), type: "File" }).encode(block, 0);
  return block;
}
const padding = (size: number) => Buffer.alloc((512 - (size % 512)) % 512);

/**
 * A hostile archive, built as a stream (never whole on disk or in memory): `manifest`, then a
 * member `path` of `size` zero bytes (its size stated again as `paxSize` by a pax header, if given), gzipped at level 9. 200 MiB of zeros alone packs to ~204 KB
 * (1,030:1), past node-tar's own limit of 1,000:1; the manifest carries ~12 KB of incompressible
 * filler so the archive is the review's: 215 KB, about 950:1, which node-tar lets through.
 */
export async function zerosArchive(file: string, manifest: object, path: string, size: number, options: { paxSize?: number } = {}): Promise<void> {
  const filler = Buffer.from(crypto.getRandomValues(new Uint8Array(12 * 1024))).toString("hex");
  const text = Buffer.from(JSON.stringify({ ...manifest, filler }));
  const zeros = Buffer.alloc(1024 * 1024);
  // A pax header may state another size than the member's own header, which frames the bytes.
  const pax = options.paxSize === undefined ? Buffer.alloc(0) : new Pax({ path, size: options.paxSize }).encode();
  async function* members() {
    yield Buffer.concat([tarHeader("manifest.json", text.length), text, padding(text.length), pax, tarHeader(path, size)]);
    for (let left = size; left > 0; left -= zeros.length) yield left >= zeros.length ? zeros : zeros.subarray(0, left);
    yield Buffer.concat([padding(size), Buffer.alloc(1024)]);
  }
  await pipeline(Readable.from(members()), createGzip({ level: 9 }), createWriteStream(file));
}

/** Bytes under `folder` right now (files that vanish meanwhile count as nothing). */
export function bytesUnder(folder: string): number {
  let total = 0;
  for (const entry of readdirSync(folder, { recursive: true }) as string[]) {
    try {
      const info = statSync(join(folder, entry));
      if (info.isFile()) total += info.size;
    } catch {
      // removed between the listing and the stat
    }
  }
  return total;
}
