/**
 * The archive format: `usersvc-<YYYYMMDDTHHMMSSZ>[-N].tar.gz` (encrypted whole: `….tar.gz.enc`,
 * encryption.ts), written and read with node-tar, streamed both ways (never a whole member in memory).
 * Every member is mode 0600, whatever the file it was read from. `manifest.json` comes first, so its
 * `trigger` is read without unpacking the rest; every other member's sha256 is in it, and (format
 * 2) its size, so a restore refuses a member larger than that before writing a byte of it.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ReadEntry } from "tar";
import { isStoredName } from "../../storage/files";
import { ENCRYPTION_KEY_FILE, JWT_SECRET_FILE } from "../../security/kept-secrets";

export const ARCHIVE_NAME = /^usersvc-(\d{8}T\d{6}Z)(?:-(\d{1,4}))?\.tar\.gz(\.enc)?$/;
export const isArchiveName = (name: string) => name.length <= 64 && ARCHIVE_NAME.test(name);

/** 2026-11-23T15:00:00.000Z → 20261123T150000Z */
export const stampOf = (date: Date) => date.toISOString().replace(/[-:]|\.\d{3}/g, "");

/** The name for `stamp`, with the suffix a taken name gets (attempt 0: none, then -2, -3, …). */
export const archiveName = (stamp: string, attempt: number, encrypted = false) => `usersvc-${stamp}${attempt === 0 ? "" : `-${attempt + 1}`}.tar.gz${encrypted ? ".enc" : ""}`;
export const isEncryptedName = (name: string) => name.endsWith(".enc");

/** When the archive was taken, from its name (second resolution, as the manifest's createdAt). */
export function createdAtOf(name: string): Date {
  const [, stamp] = ARCHIVE_NAME.exec(name)!;
  return new Date(`${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`);
}

/** Newest first: by stamp, then by suffix. */
export function byNewest(a: string, b: string): number {
  const [, sa, na = "1"] = ARCHIVE_NAME.exec(a)!;
  const [, sb, nb = "1"] = ARCHIVE_NAME.exec(b)!;
  return sa === sb ? Number(nb) - Number(na) : sa < sb ? 1 : -1;
}

export type Trigger = "manual" | "scheduled";

export interface Manifest {
  /** 1: sha256s only (read still, with an expansion cap); 2: sizes too. Written: 2. */
  format: 1 | 2;
  version: string;
  createdAt: string;
  trigger: Trigger;
  /** The drizzle journal tag of the last migration the database had. */
  migration: string;
  tables: Record<string, number>;
  /** Member path → hex sha256, for every member but the manifest. */
  files: Record<string, string>;
  /** Format 2: member path → its size in bytes, for every member in `files`. */
  sizes?: Record<string, number>;
  /** Where the database came from: its own file, or an embedded replica's copy (absent in older archives). */
  source?: "file" | "replica";
  /** A replica's: its primary (DATABASE_SYNC_URL without credentials), and the pull before the snapshot. */
  primary?: string;
  syncedAt?: string;
  /** The primary's replication frame that pull reached: the copy holds at least that. */
  frameNo?: number;
}

/**
 * What an archive without sizes (format 1), and the manifest of any, may unpack to: this many
 * times the archive's own size. A real backup is far below it (a database packs about 2:1 to
 * 10:1; zeros ~1,000:1): 200 MiB of zeros in a 215 KB archive is refused before it is written.
 */
export const MAX_EXPANSION = 200;

export const MANIFEST = "manifest.json";
export const DATABASE_MEMBER = "usersvc.db";
/**
 * The secrets kept in the data folder when not configured (security/kept-secrets.ts): carried only
 * in an encrypted archive, so a restore can read what they sign and seal.
 */
export const SECRET_MEMBERS: readonly string[] = [JWT_SECRET_FILE, ENCRYPTION_KEY_FILE];
export const UPLOADS_PREFIX = "uploads/";

/** The only member paths an archive may hold: nothing else is ever written on restore. */
const isKnownMember = (path: string) =>
  path === MANIFEST || path === DATABASE_MEMBER || SECRET_MEMBERS.includes(path) || (path.startsWith(UPLOADS_PREFIX) && isStoredName(path.slice(UPLOADS_PREFIX.length)));

/**
 * zlib level 1: a 1,000,000-user database (261 MiB) packs in about a third of level 6's CPU time
 * (4 s against 14.5 s here) for an archive 35 % larger (113 MiB against 84 MiB); CPU is what a
 * backup takes from the writers beside it.
 */
const GZIP_LEVEL = 1;

/** node-tar (and the streams, zlib and assert it loads) only when an archive is made or read, not in every idle server. */
let tar: Promise<typeof import("tar")> | undefined;
const loadTar = () => (tar ??= import("tar"));

/**
 * Streams the members found in `folder` (their paths relative to it; symbolic links are followed,
 * so uploads can stay where they are) as a gzipped tar into `out`, manifest first.
 */
export async function* packArchive(folder: string, members: string[]): AsyncIterable<Uint8Array> {
  const { create } = await loadTar();
  // Members are 0600 in the archive whatever their files' modes (an upload's or the snapshot's umask).
  const onWriteEntry = (entry: { stat?: { mode: number } }) => {
    if (entry.stat) entry.stat.mode = (entry.stat.mode & ~0o7777) | 0o600;
  };
  yield* create({ gzip: { level: GZIP_LEVEL }, portable: true, follow: true, cwd: folder, noDirRecurse: true, onWriteEntry }, [MANIFEST, ...members]) as AsyncIterable<Uint8Array>;
}

/** The archive cannot be used: corrupted, altered, or not ours. Nothing was changed. */
export class ArchiveRejected extends Error {}

/**
 * Inflates the archive's bytes and feeds the tar to node-tar's parser, handing each entry to
 * `onEntry`, until the tar's end or until `onEntry` returns "stop" or calls `stop` (from a later
 * event of its entry). Gzip or tar damage rejects with ArchiveRejected.
 *
 * The gzip layer is ours, not node-tar's, so nothing after the tar's end is read: node-tar keeps
 * what follows its end-of-archive blocks and re-copies it with every chunk, so 200 MiB of zeros
 * there (a member whose header understates its size) held restore at full CPU indefinitely.
 */
async function parseArchive(source: AsyncIterable<Uint8Array>, onEntry: (entry: ReadEntry, stop: () => void) => "stop" | undefined): Promise<void> {
  let failure: Error | undefined;
  let stopped = false;
  const stop = () => {
    stopped = true;
  };
  const { Parser } = await loadTar();
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      if (stopped || onEntry(entry, stop) === "stop") stop();
    },
  });
  parser.on("error", (error: Error) => (failure ??= error));
  let ended = false;
  parser.on("eof", () => (ended = true));
  const closed = new Promise<void>((resolve) => parser.on("close", () => resolve()));
  // Casts: ReadableStream.from (Bun's, and the web's) is missing from @types/bun 1.4, whose
  // DecompressionStream takes any BufferSource where our chunks are bytes.
  const gunzip = new DecompressionStream("gzip") as TransformStream<Uint8Array, Uint8Array>;
  const tar = (ReadableStream as unknown as { from(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> }).from(source).pipeThrough(gunzip);
  try {
    for await (const chunk of tar) {
      parser.write(Buffer.from(chunk));
      if (failure || stopped || ended) break;
    }
  } catch (error) {
    failure ??= error as Error;
  }
  if (failure) throw new ArchiveRejected(`the archive is damaged (${failure.message})`);
  if (stopped) return;
  parser.end();
  await closed;
  if (failure) throw new ArchiveRejected(`the archive is damaged (${(failure as Error).message})`);
}

async function collect(entry: ReadEntry): Promise<Buffer> {
  const parts: Buffer[] = [];
  entry.on("data", (chunk: Buffer) => parts.push(chunk));
  await new Promise<void>((resolve) => entry.on("end", () => resolve()));
  return Buffer.concat(parts);
}

function parseManifest(bytes: Buffer): Manifest {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new ArchiveRejected("its manifest.json is not JSON");
  }
  if ((manifest?.format !== 1 && manifest?.format !== 2) || typeof manifest.files !== "object" || typeof manifest.migration !== "string") {
    throw new ArchiveRejected("its manifest.json is not a usersvc backup manifest (format 1 or 2)");
  }
  if (manifest.format === 2 && !Object.keys(manifest.files).every((path) => Number.isSafeInteger(manifest.sizes?.[path]) && manifest.sizes![path] >= 0)) {
    throw new ArchiveRejected("its manifest.json (format 2) does not record every member's size");
  }
  return manifest;
}

/** The manifest alone (the first member), without reading the rest of the archive. */
export async function readManifest(source: AsyncIterable<Uint8Array>): Promise<Manifest> {
  let found: Promise<Buffer> | undefined;
  await parseArchive(source, (entry) => {
    if (entry.path !== MANIFEST) throw new ArchiveRejected(`it does not start with ${MANIFEST}`);
    found = collect(entry);
    return "stop";
  });
  if (!found) throw new ArchiveRejected(`it holds no ${MANIFEST}`);
  return parseManifest(await found);
}

/**
 * Unpacks every member into `folder`, hashing each on its way, then checks them against the
 * manifest: a member missing, unlisted, unknown or with another sha256 rejects the archive.
 * `archiveSize` (its compressed bytes) bounds what it may expand to: a format-2 member larger
 * than its recorded size, or (format 1, and the manifest itself) members adding up to more than
 * MAX_EXPANSION times the archive, is refused at its tar header, before a byte of it is written.
 * The caller removes `folder` when this throws.
 */
export async function unpackVerified(source: AsyncIterable<Uint8Array>, folder: string, archiveSize: number): Promise<Manifest> {
  const expansionCap = MAX_EXPANSION * archiveSize;
  const hashes = new Map<string, string>();
  let manifest: Manifest | undefined;
  /** Bytes the members (the manifest included) declared so far, against the expansion cap. */
  let declared = 0;
  let problem: ArchiveRejected | undefined;
  await parseArchive(source, (entry, stop) => {
    const path = entry.path;
    const refuse = (reason: string) => {
      problem ??= new ArchiveRejected(reason);
      stop();
      return "stop" as const;
    };
    if (entry.type !== "File" || !isKnownMember(path) || hashes.has(path) || (manifest !== undefined && path === MANIFEST))
      return refuse(`it holds an unexpected member "${path}"`);
    if (manifest === undefined && path !== MANIFEST) return refuse(`it does not start with ${MANIFEST}`);
    // entry.size is exactly the bytes node-tar will hand over (a pax header's size included: it
    // frames the member by it), so a member is judged before a byte of it is read.
    if (manifest?.format === 2) {
      if (!Object.hasOwn(manifest.files, path)) return refuse(`member ${path} is not in the manifest`);
      const recorded = manifest.sizes![path];
      if (entry.size > recorded) return refuse(`member ${path} is larger than the ${recorded} bytes its manifest records`);
    } else {
      declared += entry.size;
      if (declared > expansionCap) return refuse(`its members would expand past ${MAX_EXPANSION} times the archive's size (${archiveSize} bytes)`);
    }
    if (path === MANIFEST) {
      const parts: Buffer[] = [];
      entry.on("data", (chunk: Buffer) => parts.push(chunk));
      // Synchronous: node-tar reads the next member's header only after this one's end.
      entry.on("end", () => {
        try {
          manifest = parseManifest(Buffer.concat(parts));
        } catch (error) {
          refuse((error as Error).message);
        }
      });
      return;
    }
    const target = join(folder, path);
    mkdirSync(dirname(target), { recursive: true });
    const fd = openSync(target, "wx", 0o600);
    const hasher = new Bun.CryptoHasher("sha256");
    entry.on("data", (chunk: Buffer) => {
      hasher.update(chunk);
      writeSync(fd, chunk);
    });
    entry.on("end", () => {
      fsyncSync(fd);
      closeSync(fd);
      hashes.set(path, hasher.digest("hex"));
    });
  });
  if (problem) throw problem;
  if (!manifest) throw new ArchiveRejected(`it holds no ${MANIFEST}`);
  for (const [path, sha256] of Object.entries(manifest.files)) {
    const actual = hashes.get(path);
    if (actual === undefined) throw new ArchiveRejected(`member ${path} is missing`);
    if (actual !== sha256) throw new ArchiveRejected(`member ${path} does not match its sha256 in the manifest (altered or damaged)`);
  }
  for (const path of hashes.keys()) if (!(path in manifest.files)) throw new ArchiveRejected(`member ${path} is not in the manifest`);
  if (!hashes.has(DATABASE_MEMBER)) throw new ArchiveRejected(`it holds no ${DATABASE_MEMBER}`);
  return manifest;
}
