/**
 * What the service keeps on disk is its owner's alone, whatever the umask: folders it makes are
 * 0700 and the files holding data (the database with its -wal and -shm, the signing key, uploads,
 * archives) 0600. A mode given at creation can only be narrowed by the umask, never widened.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";

/** Makes `path` (and any missing parent) as 0700 folders; a folder that already exists keeps its mode, the operator's choice. */
export function privateFolder(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
}

/** A file of ours that others may read (an older version, or a copy under another umask) becomes 0600. */
function tighten(path: string): void {
  const { mode, uid } = statSync(path);
  // Only the owner may chmod: a file someone else provides is left as it is.
  if ((mode & 0o077) !== 0 && uid === process.getuid?.()) chmodSync(path, 0o600);
}

/**
 * Before SQLite opens `path`: the database file exists as 0600 (SQLite would create it 0644, less
 * the umask), so the -wal and -shm SQLite creates beside it take the same mode; files of an
 * earlier run that others could read are narrowed. `create: false` (an embedded replica, whose
 * client creates its files itself, in a 0700 folder): after opening, its files are narrowed,
 * the replica's own index and metadata among them.
 */
export function privateDatabaseFiles(path: string, { create = true } = {}): void {
  if (create && !existsSync(path)) closeSync(openSync(path, "a", 0o600));
  for (const suffix of ["", "-wal", "-shm", "-client_wal_index", "-info"]) if (existsSync(path + suffix)) tighten(path + suffix);
}
