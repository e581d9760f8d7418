/**
 * FileStore: where uploaded bytes live, behind one small interface with two real back ends,
 * a local folder and S3-compatible object storage. Only generated names (`<uuid><.ext>`) are
 * ever keys: every method refuses anything else, so a client's text never reaches a path.
 */
import { open, readdir, rename, rm, stat as statFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { S3Client } from "bun";
import { privateFolder } from "./private-paths";
import { multipartUpload, type S3Target } from "./s3-multipart";

/** The only shape a stored name has: a v4 UUID plus an optional short lowercase extension. */
export const STORED_NAME = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}(\.[a-z0-9]{1,10})?$/;
export const STORED_NAME_MAX = 47;

export const isStoredName = (name: string) => name.length <= STORED_NAME_MAX && STORED_NAME.test(name);

/** Inclusive byte range, already checked against the object's size. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface StoredObject {
  size: number;
  sha256: string;
}

export interface FileStore {
  /** "local" or "s3", for logs and health. */
  readonly kind: "local" | "s3";
  /** Streams `source` under `name`; nothing is visible under that name unless every byte arrived within `limit`. */
  put(name: string, source: AsyncIterable<Uint8Array>, limit: number): Promise<StoredObject>;
  /** The object's bytes (or one range of them) as a stream; call `stat` first to know it exists. */
  get(name: string, range?: ByteRange): ReadableStream<Uint8Array>;
  stat(name: string): Promise<{ size: number; modified: Date } | undefined>;
  delete(name: string): Promise<void>;
  /** Every stored name with its last change, for sweeping out bytes whose row never committed. */
  list(): AsyncIterable<{ name: string; modified: Date }>;
}

/** Thrown by `put` when the source passes its limit; the partial bytes are already gone. */
export class SizeLimitExceeded extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} bytes`);
  }
}

/**
 * The storage itself failed (its folder gone, unwritable or full): not the client's doing, and
 * nothing was stored. The cause stays for the log, never for the client.
 */
export class StorageUnavailable extends Error {
  constructor(readonly cause: unknown) {
    super("file storage unavailable");
  }
}

const STORAGE_ERRNOS = new Set(["ENOTDIR", "EACCES", "EPERM", "ENOSPC", "EDQUOT", "EROFS", "EIO", "ENOENT", "EISDIR", "EMFILE", "ENFILE"]);
const asUnavailable = (error: unknown) => (STORAGE_ERRNOS.has((error as NodeJS.ErrnoException)?.code ?? "") ? new StorageUnavailable(error) : error);

function checked(name: string): string {
  if (!isStoredName(name)) throw new Error("not a stored file name");
  return name;
}

/** Counts and hashes the bytes on their way through; throws as soon as they pass the limit. */
async function* metered(source: AsyncIterable<Uint8Array>, limit: number, result: StoredObject) {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of source) {
    result.size += chunk.byteLength;
    if (result.size > limit) throw new SizeLimitExceeded(limit);
    hasher.update(chunk);
    yield chunk;
  }
  result.sha256 = hasher.digest("hex");
}

const TEMP_PREFIX = ".upload-";
/** Temp files older than this at start are leftovers of a crash (a live upload is never this slow). */
const STALE_TEMP_MS = 24 * 60 * 60 * 1000;

/** A folder: each upload goes to a temp name in the same folder, is fsynced, then renamed into place. */
export async function localFileStore(folder: string): Promise<FileStore> {
  const root = resolve(folder);
  privateFolder(root);
  for (const entry of await readdir(root)) {
    if (!entry.startsWith(TEMP_PREFIX)) continue;
    const info = await statFile(join(root, entry)).catch(() => undefined);
    // The machine's clock, not the app's: the file system stamped mtime with it.
    if (info && Date.now() - info.mtimeMs > STALE_TEMP_MS) await rm(join(root, entry), { force: true });
  }
  const pathOf = (name: string) => join(root, checked(name));

  return {
    kind: "local",
    async put(name, source, limit) {
      const target = pathOf(name);
      const temp = join(root, `${TEMP_PREFIX}${crypto.randomUUID()}`);
      const result: StoredObject = { size: 0, sha256: "" };
      const file = await open(temp, "wx", 0o600).catch((error) => {
        throw asUnavailable(error);
      });
      try {
        for await (const chunk of metered(source, limit, result)) await file.write(chunk);
        await file.sync();
        await file.close();
        await rename(temp, target);
      } catch (error) {
        await file.close().catch(() => {});
        await rm(temp, { force: true }).catch(() => {});
        throw asUnavailable(error);
      }
      // The rename itself survives a crash only once the folder's entry is on disk.
      try {
        const dir = await open(root, "r");
        await dir.sync().finally(() => dir.close());
      } catch (error) {
        throw asUnavailable(error);
      }
      return result;
    },
    get(name, range) {
      const file = Bun.file(pathOf(name));
      return (range ? file.slice(range.start, range.end + 1) : file).stream();
    },
    async stat(name) {
      const info = await statFile(pathOf(name)).catch((error) => {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw asUnavailable(error);
      });
      return info?.isFile() ? { size: info.size, modified: info.mtime } : undefined;
    },
    async delete(name) {
      await rm(pathOf(name), { force: true });
    },
    async *list() {
      for (const entry of await readdir(root)) {
        if (!isStoredName(entry)) continue;
        const info = await statFile(join(root, entry)).catch(() => undefined);
        if (info?.isFile()) yield { name: entry, modified: info.mtime };
      }
    },
  };
}

export interface S3Settings {
  endpoint?: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
}

/** `s3://bucket/prefix` with the S3 settings: Bun's client for reads, our signed target for multipart uploads. */
export function s3Location(location: string, settings: S3Settings) {
  const url = new URL(location);
  const prefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, "");
  const region = settings.region ?? "us-east-1";
  const client = new S3Client({ bucket: url.hostname, ...settings, region });
  const target: S3Target = {
    endpoint: settings.endpoint ?? `https://s3.${region}.amazonaws.com`,
    region,
    bucket: url.hostname,
    accessKeyId: settings.accessKeyId ?? "",
    secretAccessKey: settings.secretAccessKey ?? "",
    sessionToken: settings.sessionToken,
  };
  return { prefix, client, target };
}

/**
 * `s3://bucket/prefix`: uploads through our own multipart upload (one 5 MiB part buffer; only a
 * completed upload becomes an object, a failed or oversized one is aborted), reads, stats and
 * deletes through Bun's built-in client.
 */
export async function s3FileStore(location: string, settings: S3Settings): Promise<FileStore> {
  const { prefix, client, target } = s3Location(location, settings);
  const keyOf = (name: string) => (prefix ? `${prefix}/${checked(name)}` : checked(name));
  // Fail at start, with the bucket's name, rather than on the first upload.
  await client.list({ prefix: prefix ? `${prefix}/` : undefined, maxKeys: 1 });

  return {
    kind: "s3",
    async put(name, source, limit) {
      const result: StoredObject = { size: 0, sha256: "" };
      try {
        await multipartUpload(target, keyOf(name), metered(source, limit, result));
      } catch (error) {
        // The client's own doing (too large, cut off) stays as it is; the store failing is a 503.
        if (error instanceof SizeLimitExceeded || !isStoreFailure(error)) throw error;
        throw new StorageUnavailable(error);
      }
      return result;
    },
    get(name, range) {
      const file = client.file(keyOf(name));
      return (range ? file.slice(range.start, range.end + 1) : file).stream();
    },
    async stat(name) {
      try {
        const info = await client.stat(keyOf(name));
        return { size: info.size, modified: info.lastModified };
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw isStoreFailure(error) ? new StorageUnavailable(error) : error;
      }
    },
    async delete(name) {
      await client.delete(keyOf(name));
    },
    async *list() {
      const within = prefix ? `${prefix}/` : "";
      let continuationToken: string | undefined;
      do {
        const page = await client.list({ prefix: within || undefined, continuationToken });
        for (const object of page.contents ?? []) {
          const name = object.key.slice(within.length);
          if (isStoredName(name)) yield { name, modified: new Date(object.lastModified ?? 0) };
        }
        continuationToken = page.isTruncated ? page.nextContinuationToken : undefined;
      } while (continuationToken);
    },
  };
}

/** An error of the S3 endpoint (an S3 answer or no answer at all), not of the upload's source. */
const isStoreFailure = (error: unknown) => {
  const e = error as { code?: string; message?: string };
  return /^S3 /.test(e?.message ?? "") || ["ConnectionRefused", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "FailedToOpenSocket"].includes(e?.code ?? "");
};

export const isMissing = (error: unknown) => {
  const e = error as { code?: string; message?: string };
  return e?.code === "NoSuchKey" || e?.code === "ERR_S3_FILE_NOT_FOUND" || /not found|NoSuchKey|404/i.test(e?.message ?? "");
};

/** FILE_STORAGE: `s3://bucket/prefix` or a folder. */
export function createFileStore(location: string, s3: S3Settings): Promise<FileStore> {
  return location.startsWith("s3://") ? s3FileStore(location, s3) : localFileStore(location);
}
