/**
 * BACKUP_DIR: a folder or `s3://bucket/prefix` (the same S3 client and settings as file
 * storage). An archive is built in a temp file first; `publish` then makes it appear whole under
 * its name, or a suffixed one when that name is taken: never replacing an archive.
 */
import { linkSync, openSync, fsyncSync, closeSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { isMissing, s3Location, type S3Settings } from "../../storage/files";
import { privateFolder } from "../../storage/private-paths";
import { multipartUpload } from "../../storage/s3-multipart";
import { archiveName, byNewest, createdAtOf, isArchiveName } from "./archive";

export interface ArchiveInfo {
  name: string;
  size: number;
  createdAt: string;
}

export interface Destination {
  readonly kind: "local" | "s3";
  /** Where temp archives are written (the folder itself, or the data folder for S3). */
  readonly tempDir: string;
  /** Where an archive is, for stdout and logs: an absolute path or an s3:// URL. */
  locationOf(name: string): string;
  /** Newest first. */
  list(): Promise<ArchiveInfo[]>;
  stat(name: string): Promise<{ size: number } | undefined>;
  read(name: string): ReadableStream<Uint8Array>;
  delete(name: string): Promise<void>;
  /** Makes the finished temp file the archive `usersvc-<stamp>[-N].tar.gz` (`.enc` after it when encrypted); returns the name taken. */
  publish(tempFile: string, stamp: string, encrypted?: boolean): Promise<string>;
}

/** Temp archives: `.usersvc-<stamp>-<random>.tar.gz.tmp`, never listed, removed by the next backup. */
export const TEMP_ARCHIVE = /^\.usersvc-.*\.tar\.gz\.tmp$/;
export const tempArchiveName = (stamp: string) => `.usersvc-${stamp}-${crypto.randomUUID().slice(0, 8)}.tar.gz.tmp`;

const MAX_SUFFIX = 1000;

function syncFolder(folder: string) {
  const fd = openSync(folder, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function localDestination(folder: string): Destination {
  const root = resolve(folder);
  privateFolder(root);
  const pathOf = (name: string) => join(root, name);
  const statOf = (name: string) => {
    try {
      const info = statSync(pathOf(name));
      return info.isFile() ? info : undefined;
    } catch {
      return undefined;
    }
  };
  return {
    kind: "local",
    tempDir: root,
    locationOf: pathOf,
    async list() {
      return readdirSync(root)
        .filter(isArchiveName)
        .sort(byNewest)
        .flatMap((name) => {
          const info = statOf(name);
          return info ? [{ name, size: info.size, createdAt: createdAtOf(name).toISOString() }] : [];
        });
    },
    async stat(name) {
      const info = statOf(name);
      return info && { size: info.size };
    },
    read: (name) => Bun.file(pathOf(name)).stream(),
    async delete(name) {
      rmSync(pathOf(name), { force: true });
    },
    async publish(tempFile, stamp, encrypted) {
      // link() fails on a taken name instead of replacing it, as rename() would.
      for (let attempt = 0; attempt < MAX_SUFFIX; attempt++) {
        const name = archiveName(stamp, attempt, encrypted);
        try {
          linkSync(tempFile, pathOf(name));
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
          throw error;
        }
        rmSync(tempFile, { force: true });
        syncFolder(root);
        return name;
      }
      throw new Error(`every name for ${stamp} is taken`);
    },
  };
}

export function s3Destination(location: string, settings: S3Settings, dataDir: string): Destination {
  const { prefix, client, target } = s3Location(location, settings);
  const keyOf = (name: string) => (prefix ? `${prefix}/${name}` : name);
  const tempDir = resolve(dataDir);
  privateFolder(tempDir);
  const stat = async (name: string) => {
    try {
      return { size: (await client.stat(keyOf(name))).size };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  };
  return {
    kind: "s3",
    tempDir,
    locationOf: (name) => `s3://${target.bucket}/${keyOf(name)}`,
    async list() {
      const within = prefix ? `${prefix}/` : "";
      const found: ArchiveInfo[] = [];
      let continuationToken: string | undefined;
      do {
        const page = await client.list({ prefix: within || undefined, continuationToken });
        for (const object of page.contents ?? []) {
          const name = object.key.slice(within.length);
          if (isArchiveName(name)) found.push({ name, size: object.size ?? 0, createdAt: createdAtOf(name).toISOString() });
        }
        continuationToken = page.isTruncated ? page.nextContinuationToken : undefined;
      } while (continuationToken);
      return found.sort((a, b) => byNewest(a.name, b.name));
    },
    stat,
    read: (name) => client.file(keyOf(name)).stream(),
    async delete(name) {
      await client.delete(keyOf(name));
    },
    async publish(tempFile, stamp, encrypted) {
      // One backup at a time (the lease), so a name free now is still free when the upload completes.
      for (let attempt = 0; attempt < MAX_SUFFIX; attempt++) {
        const name = archiveName(stamp, attempt, encrypted);
        if (await stat(name)) continue;
        // A multipart upload becomes an object only when Complete succeeds: whole or not at all.
        await multipartUpload(target, keyOf(name), Bun.file(tempFile).stream());
        rmSync(tempFile, { force: true });
        return name;
      }
      throw new Error(`every name for ${stamp} is taken`);
    },
  };
}

/** BACKUP_DIR (or `--output`): `s3://bucket/prefix` or a folder. */
export function openDestination(location: string, settings: S3Settings, dataDir: string): Destination {
  return location.startsWith("s3://") ? s3Destination(location, settings, dataDir) : localDestination(location);
}
