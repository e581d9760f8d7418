/**
 * Backups as the API, the CLI and the schedule use them: one at a time anywhere (the "backup"
 * lease), taken in a child process, recorded in the audit log (BACKUP_CREATED / BACKUP_FAILED /
 * BACKUP_DELETED), which health and the metrics read back so every worker process reports the same.
 */
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import { VERSION } from "../../version";
import { ENCRYPTION_KEY_FILE, JWT_SECRET_FILE } from "../../security/kept-secrets";
import { writeAudit } from "../../store/audit";
import { createdAtOf, isArchiveName, isEncryptedName, readManifest, type Trigger } from "./archive";
import { openArchive } from "./encryption";
import { openDestination, type ArchiveInfo, type Destination } from "./destination";
import { acquireLease, BACKUP_LEASE } from "../../store/leases";
import { snapshotInChild } from "./snapshot-process";

export interface BackupDeps {
  config: Config;
  db: Database;
  logger: Logger;
  /** The clock of the manifest, the audit rows and the lease (the app's in the server, the system's in the CLI). */
  now: () => number;
}

/** The `file:` DATABASE_URL's file (a plain database or an embedded replica's copy), when there is one. */
function databaseFile(config: Config): string | undefined {
  if (!config.databaseUrl.startsWith("file:")) return undefined;
  const path = config.databaseUrl.slice("file:".length).split("?")[0];
  return path && path !== ":memory:" ? resolve(path) : undefined;
}

/** The database file, when it is the database itself: a plain `file:` URL (no remote, no replica). What restore replaces. */
export const localDatabasePath = (config: Config): string | undefined => (config.databaseSyncUrl ? undefined : databaseFile(config));

/** The file a backup snapshots: the database's own, or an embedded replica's local copy. A remote database has none. */
export const backupSource = (config: Config): string | undefined => databaseFile(config);

/** DATABASE_SYNC_URL as a manifest may carry it: no credentials, no query. */
function primaryOf(syncUrl: string): string {
  const url = new URL(syncUrl);
  url.username = "";
  url.password = "";
  url.search = "";
  return url.toString().replace(/\/$/, "");
}

export const destinationOf = (config: Config, location = config.backupDir): Destination => openDestination(location, config.s3, config.dataDir);

export interface CreatedBackup extends ArchiveInfo {
  /** An absolute path or an s3:// URL. */
  location: string;
}

/**
 * Takes one backup now. 400 BACKUP_UNSUPPORTED for a remote database (its server backs it up),
 * 409 BACKUP_IN_PROGRESS while another one runs in any process. An embedded replica backs up its
 * local copy, pulled just before: the manifest names the primary and the frame that pull reached
 * (the copy holds at least that; a background pull may land before the snapshot reads it).
 */
export async function createBackup(deps: BackupDeps, options: { trigger: Trigger; actor: string; destination?: string }): Promise<CreatedBackup> {
  const { config, db, logger, now } = deps;
  const databasePath = backupSource(config);
  if (!databasePath) throw new AppError("BACKUP_UNSUPPORTED");
  const lease = await acquireLease(db, BACKUP_LEASE, now, { onRenewError: (error) => logger.warn({ err: error }, "could not renew the backup lease") });
  if (!lease) throw new AppError("BACKUP_IN_PROGRESS");
  const started = performance.now();
  const location = options.destination ?? config.backupDir;
  try {
    const { databaseSyncUrl } = config;
    const replica = databaseSyncUrl && db.pull ? { primary: primaryOf(databaseSyncUrl), ...(await db.pull()), syncedAt: new Date(now()).toISOString() } : undefined;
    const result = await snapshotInChild({
      databasePath,
      replica,
      dataDir: resolve(config.dataDir),
      // The keys in force that live in the data folder, and only inside an encrypted archive.
      secretFiles: config.backupEncryptionKey
        ? [config.jwtSecret ? undefined : JWT_SECRET_FILE, config.dataEncryptionKey ? undefined : ENCRYPTION_KEY_FILE].flatMap((name) =>
            name ? [resolve(config.dataDir, name)] : [],
          )
        : [],
      encryptionKey: config.backupEncryptionKey?.toString("base64"),
      uploadsDir: config.fileStorage.startsWith("s3://") ? undefined : resolve(config.fileStorage),
      destination: { location, s3: config.s3 },
      trigger: options.trigger,
      version: VERSION.version,
      createdAt: new Date(Math.floor(now() / 1000) * 1000).toISOString(),
    });
    const durationMs = Math.round(performance.now() - started);
    await db.write((tx) =>
      writeAudit(
        tx,
        {
          action: "BACKUP_CREATED",
          actor: options.actor,
          subjectType: "backup",
          subjectId: result.name,
          details: { trigger: options.trigger, size: result.size, durationMs, location: result.location, migration: result.migration, tables: result.tables },
        },
        new Date(now()),
      ),
    );
    if (result.missingUploads > 0) logger.warn({ name: result.name, missing: result.missingUploads }, "uploads with a row but no bytes in the folder were left out of the backup");
    logger.info({ name: result.name, trigger: options.trigger, size: result.size, durationMs, location: result.location, users: result.tables.users }, "backup written");
    return { name: result.name, size: result.size, createdAt: createdAtOf(result.name).toISOString(), location: result.location };
  } catch (error) {
    const message = (error as Error).message;
    logger.error({ err: error, trigger: options.trigger, location }, "backup failed");
    await db
      .write((tx) =>
        writeAudit(
          tx,
          { action: "BACKUP_FAILED", actor: options.actor, subjectType: "backup", subjectId: "-", details: { trigger: options.trigger, error: message } },
          new Date(now()),
        ),
      )
      .catch(() => {});
    throw error;
  } finally {
    await lease.release().catch((error) => logger.warn({ err: error }, "could not release the backup lease"));
  }
}

export const listBackups = (config: Config) => destinationOf(config).list();

async function existing(config: Config, name: string): Promise<{ destination: Destination; size: number }> {
  if (!isArchiveName(name)) throw new AppError("BACKUP_NOT_FOUND", { name });
  const destination = destinationOf(config);
  const stat = await destination.stat(name);
  if (!stat) throw new AppError("BACKUP_NOT_FOUND", { name });
  return { destination, size: stat.size };
}

/** The archive, streamed; audited BACKUP_DOWNLOADED (it holds password hashes, and when encrypted the keys). */
export async function downloadBackup(deps: BackupDeps, name: string, actor: string): Promise<Response> {
  const { destination, size } = await existing(deps.config, name);
  await deps.db.write((tx) => writeAudit(tx, { action: "BACKUP_DOWNLOADED", actor, subjectType: "backup", subjectId: name }, new Date(deps.now())));
  return new Response(destination.read(name), {
    headers: {
      "content-type": isEncryptedName(name) ? "application/octet-stream" : "application/gzip",
      "content-disposition": `attachment; filename="${name}"`,
      "content-length": String(size),
      "cache-control": "no-store",
    },
  });
}

export async function deleteBackup(deps: BackupDeps, name: string, actor: string): Promise<void> {
  const { destination } = await existing(deps.config, name);
  await destination.delete(name);
  await deps.db.write((tx) => writeAudit(tx, { action: "BACKUP_DELETED", actor, subjectType: "backup", subjectId: name }, new Date(deps.now())));
  deps.logger.info({ name, actor }, "backup deleted");
}

/** Keeps the newest `keep` scheduled archives; manual ones are never touched. Returns the names removed. */
export async function pruneScheduled(deps: BackupDeps): Promise<string[]> {
  const destination = destinationOf(deps.config);
  let scheduled = 0;
  const removed: string[] = [];
  for (const archive of await destination.list()) {
    let trigger: Trigger;
    try {
      // An encrypted archive's manifest is read with the key set now; its tag is not checked (only a restore, reading it all, does).
      trigger = (await readManifest((await openArchive(destination.read(archive.name), deps.config.backupEncryptionKey)).bytes)).trigger;
    } catch (error) {
      deps.logger.warn({ name: archive.name, err: error }, "could not read a backup's manifest: left as it is");
      continue;
    }
    if (trigger !== "scheduled" || ++scheduled <= deps.config.backupKeep) continue;
    await destination.delete(archive.name);
    await deps.db.write((tx) =>
      writeAudit(tx, { action: "BACKUP_DELETED", actor: "system", subjectType: "backup", subjectId: archive.name, details: { reason: "BACKUP_KEEP" } }, new Date(deps.now())),
    );
    removed.push(archive.name);
  }
  if (removed.length > 0) deps.logger.info({ removed, keep: deps.config.backupKeep }, "pruned old scheduled backups");
  return removed;
}
