/**
 * Taking one archive, start to end, in a process of its own (snapshot-process.ts). The snapshot
 * is a connection of its own reading one consistent WAL snapshot: the server's writers go on
 * writing meanwhile.
 */
import { Database } from "bun:sqlite";
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync, existsSync } from "node:fs";
import { basename, join } from "node:path";
import journal from "../../../drizzle/meta/_journal.json";
import type { S3Settings } from "../../storage/files";
import { privateFolder } from "../../storage/private-paths";
import { DATABASE_MEMBER, MANIFEST, packArchive, stampOf, UPLOADS_PREFIX, type Manifest, type Trigger } from "./archive";
import { openDestination, TEMP_ARCHIVE, tempArchiveName } from "./destination";
import { encryptArchive } from "./encryption";

export interface SnapshotJob {
  databasePath: string;
  dataDir: string;
  /** The kept secrets' files (the signing key, the data encryption key) to carry: only into an encrypted archive. */
  secretFiles: string[];
  /** BACKUP_ENCRYPTION_KEY in base64: the archive is encrypted whole (encryption.ts). */
  encryptionKey?: string;
  /** The uploads folder, when FILE_STORAGE is a folder (S3 objects stay where they are). */
  uploadsDir?: string;
  destination: { location: string; s3: S3Settings };
  trigger: Trigger;
  /** An embedded replica's copy: the manifest says so, and as of which pull. */
  replica?: Required<Pick<Manifest, "primary" | "syncedAt">> & Pick<Manifest, "frameNo">;
  version: string;
  /** Whole seconds: the archive's name carries the same instant. */
  createdAt: string;
}

export interface SnapshotResult {
  name: string;
  location: string;
  size: number;
  migration: string;
  tables: Record<string, number>;
  /** Upload rows whose bytes were not in the folder (reported, not fatal). */
  missingUploads: number;
}

/** The staging folders of a snapshot in the data folder: `.backup-<random>`. */
const STAGING = /^\.backup-[0-9a-f-]{36}$/;

/** The journal tag of a migration, by the `created_at` the migrator records (its folderMillis). */
export function migrationTag(createdAt: number | undefined): string {
  const entry = journal.entries.find((e) => e.when === createdAt);
  return entry?.tag ?? (createdAt === undefined ? "none" : `unknown-${createdAt}`);
}

export const LATEST_MIGRATION = journal.entries[journal.entries.length - 1];

/** Leftovers of a backup that was killed: only ever called by the holder of the backup lease. */
function removeLeftovers(dataDir: string, tempDir: string) {
  for (const entry of readdirSync(dataDir)) if (STAGING.test(entry)) rmSync(join(dataDir, entry), { recursive: true, force: true });
  for (const entry of readdirSync(tempDir)) if (TEMP_ARCHIVE.test(entry)) rmSync(join(tempDir, entry), { force: true });
}

async function sha256Of(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/** VACUUM INTO a fresh file: one read transaction, so one consistent state of every table. */
function snapshotDatabase(source: string, target: string, withUploads: boolean) {
  const live = new Database(source);
  try {
    live.run("PRAGMA busy_timeout = 5000");
    live.run("VACUUM INTO ?", [target]);
  } finally {
    live.close();
  }
  const copy = new Database(target);
  try {
    // The archive must not carry the leases of this moment (this backup's own among them).
    const hasLeases = copy.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'leases'").get();
    if (hasLeases) copy.run("DELETE FROM leases");
    const names = copy
      .query<{ name: string }, []>("SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all()
      .map((r) => r.name);
    const tables: Record<string, number> = {};
    for (const name of names) tables[name] = copy.query<{ n: number }, []>(`SELECT count(*) AS n FROM "${name.replaceAll('"', '""')}"`).get()!.n;
    const last = names.includes("__drizzle_migrations")
      ? copy.query<{ at: number }, []>("SELECT created_at AS at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1").get()?.at
      : undefined;
    const uploads =
      withUploads && names.includes("files")
        ? copy
            .query<{ id: string }, []>("SELECT id FROM files ORDER BY id")
            .all()
            .map((r) => r.id)
        : [];
    return { tables, migration: migrationTag(last === undefined ? undefined : Number(last)), uploads };
  } finally {
    copy.close();
  }
}

/** `stillWanted` false (the process that asked is gone): stop, and publish nothing. */
export async function takeSnapshot(job: SnapshotJob, stillWanted: () => boolean = () => true): Promise<SnapshotResult> {
  const abandoned = () => new Error("the backup was abandoned: the process that asked for it is gone");
  // DATABASE_URL may put the database outside DATA_DIR, which then need not exist yet.
  privateFolder(job.dataDir);
  const destination = openDestination(job.destination.location, job.destination.s3, job.dataDir);
  removeLeftovers(job.dataDir, destination.tempDir);
  const staging = join(job.dataDir, `.backup-${crypto.randomUUID()}`);
  const stamp = stampOf(new Date(job.createdAt));
  const temp = join(destination.tempDir, tempArchiveName(stamp));
  mkdirSync(staging, { mode: 0o700 });
  try {
    const snapshot = snapshotDatabase(job.databasePath, join(staging, DATABASE_MEMBER), job.uploadsDir !== undefined);
    const members = [DATABASE_MEMBER];
    for (const file of job.secretFiles.filter((path) => existsSync(path))) {
      symlinkSync(file, join(staging, basename(file)));
      members.push(basename(file));
    }
    let missingUploads = 0;
    if (job.uploadsDir && snapshot.uploads.length > 0) {
      mkdirSync(join(staging, UPLOADS_PREFIX));
      for (const id of snapshot.uploads) {
        // Uploaded bytes never change once stored: the file now is the file of the snapshot's row.
        if (!existsSync(join(job.uploadsDir, id))) {
          missingUploads++;
          continue;
        }
        symlinkSync(join(job.uploadsDir, id), join(staging, UPLOADS_PREFIX, id));
        members.push(UPLOADS_PREFIX + id);
      }
    }
    const files: Record<string, string> = {};
    const sizes: Record<string, number> = {};
    for (const member of members) {
      files[member] = await sha256Of(join(staging, member));
      sizes[member] = statSync(join(staging, member)).size;
    }
    const manifest: Manifest = {
      format: 2,
      version: job.version,
      createdAt: job.createdAt,
      trigger: job.trigger,
      migration: snapshot.migration,
      tables: snapshot.tables,
      files,
      sizes,
      source: job.replica ? "replica" : "file",
      ...job.replica,
    };
    writeFileSync(join(staging, MANIFEST), JSON.stringify(manifest, null, 2), { mode: 0o600 });

    const fd = openSync(temp, "wx", 0o600);
    let size = 0;
    const packed = packArchive(staging, members);
    try {
      for await (const chunk of job.encryptionKey ? encryptArchive(Buffer.from(job.encryptionKey, "base64"), packed) : packed) {
        if (!stillWanted()) throw abandoned();
        writeSync(fd, chunk);
        size += chunk.byteLength;
      }
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (!stillWanted()) throw abandoned();
    const name = await destination.publish(temp, stamp, job.encryptionKey !== undefined);
    return { name, location: destination.locationOf(name), size, migration: snapshot.migration, tables: snapshot.tables, missingUploads };
  } finally {
    rmSync(staging, { recursive: true, force: true });
    rmSync(temp, { force: true });
  }
}
