/**
 * `usersvc restore ARCHIVE`: an encrypted archive is decrypted beside the data whole (its tag
 * checked) before it is unpacked; every member is unpacked beside the data and checked against the
 * manifest, and the archive's sealed values against the keys the restored service will have
 * (sealed-secrets.ts), before anything live is touched; then the database is swapped (the replaced one kept
 * as usersvc.db.before-restore with its -wal and -shm), the keys it carries and the uploads restored,
 * and BACKUP_RESTORED recorded in the restored database, so the next orphan sweep keeps the
 * objects uploaded after the backup (they have no row now).
 */
import { Database } from "bun:sqlite";
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { S3Client } from "bun";
import type { Logger } from "pino";
import type { Config } from "../../config";
import { openDatabase } from "../../db/open";
import { migrate } from "../../db/migrate";
import { createFileStore } from "../../storage/files";
import { privateFolder } from "../../storage/private-paths";
import { writeAudit } from "../../store/audit";
import { ENCRYPTION_KEY_FILE } from "../../security/kept-secrets";
import { ArchiveRejected, DATABASE_MEMBER, SECRET_MEMBERS, UPLOADS_PREFIX, unpackVerified, type Manifest } from "./archive";
import { openArchive } from "./encryption";
import { discardUnopenable, keysAtHand, unopenable } from "./sealed-secrets";
import { acquireLease, BACKUP_LEASE, claimLease, hasLeaseTable, liveLeases, RESTORE_LEASE, SERVE_LEASE_PREFIX } from "../../store/leases";
import { localDatabasePath } from "./service";
import { LATEST_MIGRATION, migrationTag } from "./snapshot";
import journal from "../../../drizzle/meta/_journal.json";

export interface RestoreSummary {
  archive: string;
  createdAt: string;
  migration: string;
  users: number;
  uploads: number;
  /** The replaced database, when there was one. */
  keptAs?: string;
  /** --discard-secrets: what was dropped, e.g. "2 TOTP secrets, 1 private signing key". */
  discarded?: string;
}

export interface RestoreOptions {
  /** Drop the sealed values no key at hand opens, instead of refusing the archive. */
  discardSecrets?: boolean;
}

/** A refusal: one clear line for the operator, exit 1, nothing changed. */
export class RestoreRefused extends Error {}

/** The archive's bytes, and how many there are (what its members may expand to is bounded by it). */
async function sourceOf(archive: string, config: Config): Promise<{ stream: AsyncIterable<Uint8Array>; size: number }> {
  if (archive.startsWith("s3://")) {
    const url = new URL(archive);
    const client = new S3Client({ bucket: url.hostname, ...config.s3, region: config.s3.region ?? "us-east-1" });
    const file = client.file(decodeURIComponent(url.pathname).replace(/^\/+/, ""));
    return { stream: file.stream(), size: (await file.stat()).size };
  }
  if (!existsSync(archive)) throw new RestoreRefused(`no archive at ${archive}`);
  const file = Bun.file(archive);
  return { stream: file.stream(), size: file.size };
}

/**
 * The archive's tar.gz, and its size: an encrypted one (BACKUP_ENCRYPTION_KEY, from the environment)
 * is first decrypted whole into `staging`, so nothing of it is unpacked before its tag verifies.
 */
async function plainSource(archive: string, config: Config, staging: string): Promise<{ stream: AsyncIterable<Uint8Array>; size: number }> {
  const { stream, size } = await sourceOf(archive, config);
  const opened = await openArchive(stream, config.backupEncryptionKey);
  if (opened.keyId === undefined) return { stream: opened.bytes, size };
  const decrypted = join(staging, ".archive.tar.gz");
  const fd = openSync(decrypted, "wx", 0o600);
  try {
    for await (const chunk of opened.bytes) writeSync(fd, chunk);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const file = Bun.file(decrypted);
  return { stream: file.stream(), size: file.size };
}

/**
 * Refuses (or, discarding, drops) the archive's sealed values that the keys at hand do not open.
 * Returns what was dropped.
 */
function checkSealedSecrets(config: Config, manifest: Manifest, staging: string, discard: boolean): string | undefined {
  const staged = join(staging, DATABASE_MEMBER);
  const keys = keysAtHand(config, manifest.files[ENCRYPTION_KEY_FILE] ? join(staging, ENCRYPTION_KEY_FILE) : undefined);
  const missing = unopenable(staged, keys.ids);
  if (!missing) return undefined;
  const needed = `data encryption key id ${missing.keyIds.join(", ")}`;
  if (!discard) {
    throw new RestoreRefused(
      `its sealed secrets (${missing.what}) need ${needed}, and the key at hand is ${keys.current}: set DATA_ENCRYPTION_KEY (or DATA_ENCRYPTION_KEY_PREVIOUS) to that key, or restore with --discard-secrets to drop them; nothing was changed`,
    );
  }
  discardUnopenable(staged, keys.ids);
  return `${missing.what} (sealed under ${needed})`;
}

/** Refuses an archive of a schema this program does not know (a newer usersvc wrote it). */
function checkSchema(manifest: Manifest, stagedDatabase: string) {
  const known = journal.entries.some((e) => e.tag === manifest.migration);
  const db = new Database(stagedDatabase, { readonly: true });
  let last: number | undefined;
  try {
    last = db.query<{ at: number }, []>("SELECT max(created_at) AS at FROM __drizzle_migrations").get()?.at ?? undefined;
  } catch {
    throw new RestoreRefused("its database has no migration table: it is not a usersvc database");
  } finally {
    db.close();
  }
  if (!known || (last !== undefined && Number(last) > LATEST_MIGRATION.when)) {
    throw new RestoreRefused(
      `the archive's schema (${manifest.migration}, database at ${migrationTag(last === undefined ? undefined : Number(last))}) is newer than this usersvc knows (${LATEST_MIGRATION.tag}): restore it with the version that wrote it (${manifest.version}) or a newer one`,
    );
  }
}

/** Refuses while a server or a backup holds the data folder; else marks the restore (a lease that lapses by itself). */
async function claimDataFolder(databasePath: string, now: () => number) {
  if (!existsSync(databasePath)) return;
  const database = await openDatabase({ url: `file:${databasePath}` });
  try {
    if (!(await hasLeaseTable(database))) return;
    const serving = await liveLeases(database, SERVE_LEASE_PREFIX, now());
    if (serving.length > 0) {
      const seconds = Math.ceil(Math.max(...serving.map((l) => l.remainingMs)) / 1000);
      throw new RestoreRefused(
        `a server holds this data folder (${serving.length} serving process${serving.length > 1 ? "es" : ""}): stop it first (if it was killed, its lease expires within ${seconds} s)`,
      );
    }
    if ((await liveLeases(database, BACKUP_LEASE, now())).length > 0) throw new RestoreRefused("a backup of this data folder is running: wait for it to finish");
    if (!(await claimLease(database, RESTORE_LEASE, `${process.pid}-${crypto.randomUUID()}`, now()))) throw new RestoreRefused("another restore of this data folder is running");
  } finally {
    database.close();
  }
}

const moveIfThere = (from: string, to: string) => {
  if (!existsSync(from)) return false;
  renameSync(from, to);
  return true;
};

/** `now`: the clock of the lease and of the BACKUP_RESTORED row (the CLI passes the system's). */
export async function restoreArchive(config: Config, archive: string, logger: Logger, now: () => number, options: RestoreOptions = {}): Promise<RestoreSummary> {
  const databasePath = localDatabasePath(config);
  if (config.databaseSyncUrl)
    throw new RestoreRefused(
      "this DATABASE_URL is an embedded replica's copy (DATABASE_SYNC_URL is set): restore onto the primary's own file, then start the edges from empty folders",
    );
  if (!databasePath) throw new RestoreRefused("restore needs a local file: DATABASE_URL; a remote database is restored by its own server");
  const dataDir = resolve(config.dataDir);
  privateFolder(dataDir);
  const staging = join(dataDir, `.restore-${crypto.randomUUID()}`);
  mkdirSync(staging, { mode: 0o700 });
  try {
    let manifest: Manifest;
    try {
      const { stream, size } = await plainSource(archive, config, staging);
      manifest = await unpackVerified(stream, staging, size);
    } catch (error) {
      if (error instanceof ArchiveRejected) throw new RestoreRefused(`${basename(archive)} cannot be restored: ${error.message}; nothing was changed`);
      throw error;
    }
    checkSchema(manifest, join(staging, DATABASE_MEMBER));
    const discarded = checkSealedSecrets(config, manifest, staging, options.discardSecrets === true);
    if (discarded) logger.warn({ archive, discarded }, "sealed secrets that no key at hand opens were dropped (--discard-secrets)");
    await claimDataFolder(databasePath, now);

    // The replaced database keeps its WAL and shared-memory files beside it, under the same new name,
    // so it can still be opened as it was; none of them stays beside the restored file.
    const keptAs = `${databasePath}.before-restore`;
    let kept = false;
    if (existsSync(databasePath)) {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(keptAs + suffix, { force: true });
      kept = moveIfThere(databasePath, keptAs);
      moveIfThere(`${databasePath}-wal`, `${keptAs}-wal`);
      moveIfThere(`${databasePath}-shm`, `${keptAs}-shm`);
    }
    for (const suffix of ["-wal", "-shm", "-journal"]) rmSync(databasePath + suffix, { force: true });
    privateFolder(resolve(databasePath, ".."));
    renameSync(join(staging, DATABASE_MEMBER), databasePath);

    for (const member of SECRET_MEMBERS.filter((name) => manifest.files[name])) {
      const secretFile = join(dataDir, member);
      const restored = readFileSync(join(staging, member), "utf8");
      if (existsSync(secretFile) && readFileSync(secretFile, "utf8") !== restored) renameSync(secretFile, `${secretFile}.before-restore`);
      renameSync(join(staging, member), secretFile);
    }

    // The restored file is migrated now (as serve would) so the restore can be recorded in it.
    const database = await openDatabase({ url: `file:${databasePath}` });
    let uploads = 0;
    try {
      await migrate(database);
      const lease = await acquireLease(database, RESTORE_LEASE, now);
      const uploadNames = Object.keys(manifest.files).filter((path) => path.startsWith(UPLOADS_PREFIX));
      if (uploadNames.length > 0) {
        const files = await createFileStore(config.fileStorage, config.s3);
        for (const path of uploadNames) {
          const name = path.slice(UPLOADS_PREFIX.length);
          const staged = join(staging, path);
          // Stored names are never reused, so bytes already there under the name are these bytes.
          if ((await files.stat(name))?.size === Bun.file(staged).size) continue;
          await files.put(name, Bun.file(staged).stream(), Number.MAX_SAFE_INTEGER);
          uploads++;
        }
      }
      const details = { backupCreatedAt: manifest.createdAt, restoredAt: new Date(now()).toISOString(), migration: manifest.migration };
      await database.write((tx) => writeAudit(tx, { action: "BACKUP_RESTORED", actor: "system", subjectType: "backup", subjectId: basename(archive), details }, new Date(now())));
      await lease?.release();
    } finally {
      database.close();
    }
    logger.info({ archive, createdAt: manifest.createdAt, migration: manifest.migration, uploads }, "backup restored");
    return {
      archive,
      createdAt: manifest.createdAt,
      migration: manifest.migration,
      users: manifest.tables.users ?? 0,
      uploads,
      keptAs: kept ? keptAs : undefined,
      discarded,
    };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
