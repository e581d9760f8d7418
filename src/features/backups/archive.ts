/**
 * The archive format: `usersvc-<YYYYMMDDTHHMMSSZ>[-N].tar.gz`, written and read with node-tar,
 * streamed both ways (never a whole member in memory). `manifest.json` comes first, so its
 * `trigger` is read without unpacking the rest; every other member's sha256 is in it.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ReadEntry } from "tar";
import { isStoredName } from "../../storage/files";

export const ARCHIVE_NAME = /^usersvc-(\d{8}T\d{6}Z)(?:-(\d{1,4}))?\.tar\.gz$/;
export const isArchiveName = (name: string) => name.length <= 64 && ARCHIVE_NAME.test(name);

/** 2026-11-23T15:00:00.000Z → 20261123T150000Z */
export const stampOf = (date: Date) => date.toISOString().replace(/[-:]|\.\d{3}/g, "");

/** The name for `stamp`, with the suffix a taken name gets (attempt 0: none, then -2, -3, …). */
export const archiveName = (stamp: string, attempt: number) => `usersvc-${stamp}${attempt === 0 ? "" : `-${attempt + 1}`}.tar.gz`;

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
  format: 1;
  version: string;
  createdAt: string;
  trigger: Trigger;
  /** The drizzle journal tag of the last migration the database had. */
  migration: string;
  tables: Record<string, number>;
  /** Member path → hex sha256, for every member but the manifest. */
  files: Record<string, string>;
}

export const MANIFEST = "manifest.json";
export const DATABASE_MEMBER = "usersvc.db";
export const SECRET_MEMBER = "jwt.secret";
export const UPLOADS_PREFIX = "uploads/";

/** The only member paths an archive may hold: nothing else is ever written on restore. */
const isKnownMember = (path: string) =>
  path === MANIFEST || path === DATABASE_MEMBER || path === SECRET_MEMBER || (path.startsWith(UPLOADS_PREFIX) && isStoredName(path.slice(UPLOADS_PREFIX.length)));

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
  yield* create({ gzip: { level: GZIP_LEVEL }, portable: true, follow: true, cwd: folder, noDirRecurse: true }, [MANIFEST, ...members]) as unknown as AsyncIterable<Uint8Array>;
}

/** The archive cannot be used: corrupted, altered, or not ours. Nothing was changed. */
export class ArchiveRejected extends Error {}

/**
 * Feeds the archive's bytes to node-tar's parser and hands each entry to `onEntry`, until the
 * end or until `onEntry` returns "stop". Gzip or tar damage rejects with ArchiveRejected.
 */
async function parseArchive(source: AsyncIterable<Uint8Array>, onEntry: (entry: ReadEntry) => "stop" | undefined): Promise<void> {
  let failure: Error | undefined;
  let stopped = false;
  const { Parser } = await loadTar();
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      if (stopped || onEntry(entry) === "stop") stopped = true;
    },
  });
  parser.on("error", (error: Error) => (failure ??= error));
  const ended = new Promise<void>((resolve) => parser.on("close", () => resolve()));
  for await (const chunk of source) {
    if (failure || stopped) break;
    parser.write(Buffer.from(chunk));
  }
  if (failure) throw new ArchiveRejected(`the archive is damaged (${failure.message})`);
  if (stopped) return;
  parser.end();
  await ended;
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
  if (manifest?.format !== 1 || typeof manifest.files !== "object" || typeof manifest.migration !== "string") {
    throw new ArchiveRejected("its manifest.json is not a usersvc backup manifest (format 1)");
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
 * The caller removes `folder` when this throws.
 */
export async function unpackVerified(source: AsyncIterable<Uint8Array>, folder: string): Promise<Manifest> {
  const hashes = new Map<string, string>();
  let manifestBytes: Promise<Buffer> | undefined;
  let problem: ArchiveRejected | undefined;
  await parseArchive(source, (entry) => {
    const path = entry.path;
    if (entry.type !== "File" || !isKnownMember(path) || hashes.has(path)) {
      problem ??= new ArchiveRejected(`it holds an unexpected member "${path}"`);
      entry.resume();
      return;
    }
    if (path === MANIFEST) {
      manifestBytes = collect(entry);
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
  if (!manifestBytes) throw new ArchiveRejected(`it holds no ${MANIFEST}`);
  const manifest = parseManifest(await manifestBytes);
  for (const [path, sha256] of Object.entries(manifest.files)) {
    const actual = hashes.get(path);
    if (actual === undefined) throw new ArchiveRejected(`member ${path} is missing`);
    if (actual !== sha256) throw new ArchiveRejected(`member ${path} does not match its sha256 in the manifest (altered or damaged)`);
  }
  for (const path of hashes.keys()) if (!(path in manifest.files)) throw new ArchiveRejected(`member ${path} is not in the manifest`);
  if (!hashes.has(DATABASE_MEMBER)) throw new ArchiveRejected(`it holds no ${DATABASE_MEMBER}`);
  return manifest;
}
