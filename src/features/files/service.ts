/**
 * The files business layer: stores an upload under a generated name, records who sent what,
 * and finds stored files again. Client file names are kept as data only, never as paths.
 */
import type { Database } from "../../db/database";
import { AppError, Violations } from "../../errors";
import { pageOf } from "../../paging";
import { isStoredName, SizeLimitExceeded, StorageUnavailable, type ByteRange, type FileStore } from "../../storage/files";
import { restoreRecords } from "../../store/backups";
import { fileRow, fileRowExists, insertFileRow, readFiles, type FileRow } from "../../store/files";
import type { FileInfo, FileListQuery, FileUploadResponse } from "./model";

/** busboy and node:stream once something is uploaded, not in every idle server. */
let multipart: Promise<typeof import("./multipart")> | undefined;
const loadMultipart = () => (multipart ??= import("./multipart"));

export interface FilesDeps {
  db: Database;
  files: FileStore;
  now: () => number;
  logger: { warn(obj: object, msg: string): void };
}

const MAX_ORIGINAL_NAME = 255;

/** The last path segment, without control characters (NUL included), at most 255 characters. */
export function cleanOriginalName(raw: string): string {
  const base = raw.split(/[/\\]/).pop() ?? "";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this removes.
  const clean = Array.from(base.replace(/[\u0000-\u001f\u007f-\u009f]/g, "").trim())
    .slice(0, MAX_ORIGINAL_NAME)
    .join("");
  return clean === "" || clean === "." || clean === ".." ? "file" : clean;
}

/** `<uuid>` plus the original's extension, lowercased, when it is 1–10 letters or digits. */
export function storedNameFor(originalName: string): string {
  const dot = originalName.lastIndexOf(".");
  const ext = dot > 0 ? originalName.slice(dot + 1).toLowerCase() : "";
  return crypto.randomUUID() + (/^[a-z0-9]{1,10}$/.test(ext) ? `.${ext}` : "");
}

/** The declared type when it is a plain `type/subtype`; recorded only, never used to serve the bytes. */
export function cleanContentType(declared: string | undefined): string {
  const type = (declared ?? "").split(";")[0].trim().toLowerCase();
  return type.length <= 100 && /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/.test(type) ? type : "application/octet-stream";
}

/** Room for multipart framing and the small fields busboy allows beside the file (20 × 64 KiB). */
const MULTIPART_SLACK = 2 * 1024 * 1024;

/** 503 for a storage failure (logged with its cause); anything else unchanged. */
function storageError(deps: Pick<FilesDeps, "logger">, error: unknown): unknown {
  if (!(error instanceof StorageUnavailable)) return error;
  deps.logger.warn({ err: error.cause }, "file storage unavailable");
  return new AppError("STORAGE_UNAVAILABLE");
}

/**
 * Streams the part named `file` of a multipart request into storage, then records it. Whatever
 * fails (too large, empty, malformed, the database), the stored bytes are removed again.
 */
export async function uploadFile(deps: FilesDeps, request: Request, uploaderId: number, maxBytes: number): Promise<FileUploadResponse> {
  // A declared length that cannot fit is refused before a byte of the body is read.
  if (Number(request.headers.get("content-length")) > maxBytes + MULTIPART_SLACK) throw new AppError("PAYLOAD_TOO_LARGE");
  let name: string | undefined;
  const { withFilePart } = await loadMultipart();
  try {
    const upload = await withFilePart(request, "file", async (part) => {
      const originalName = cleanOriginalName(part.fileName);
      name = storedNameFor(originalName);
      const stored = await deps.files.put(name, part.stream, maxBytes);
      return { originalName, contentType: cleanContentType(part.mimeType), ...stored };
    });
    if (upload.size === 0) throw new Violations("body", [{ path: "file", key: "field.file.empty" }]);
    const createdAt = new Date(deps.now());
    await insertFileRow(deps.db, {
      id: name!,
      originalName: upload.originalName,
      contentType: upload.contentType,
      size: upload.size,
      sha256: upload.sha256,
      uploadedBy: uploaderId,
      createdAt,
    });
    return {
      fileName: name!,
      id: name!,
      originalName: upload.originalName,
      fileSize: upload.size,
      contentType: upload.contentType,
      uploadTime: createdAt.toISOString(),
    };
  } catch (error) {
    if (name) {
      await deps.files.delete(name).catch((cleanup) => deps.logger.warn({ err: cleanup, name }, "could not remove a failed upload"));
    }
    if (error instanceof SizeLimitExceeded) throw new AppError("PAYLOAD_TOO_LARGE");
    throw storageError(deps, error);
  }
}

/** An upload between its bytes and its row is never this old; anything older without a row was cut off by a crash. */
export const ORPHAN_AGE_MS = 15 * 60 * 1000;

/**
 * Removes stored bytes that have no row: the leftovers of a process killed between `put` and
 * the insert (or while removing a failed upload). Objects stored between a restored backup's
 * snapshot and its restore have no row either, but were real uploads: those are kept and counted.
 */
export async function sweepOrphanedFiles(deps: Pick<FilesDeps, "db" | "files">, now = Date.now()): Promise<{ removed: number; kept: number }> {
  let removed = 0;
  let kept = 0;
  const windows = await restoreWindows(deps.db);
  for await (const object of deps.files.list()) {
    const modified = object.modified.getTime();
    if (now - modified < ORPHAN_AGE_MS) continue;
    if (await fileRowExists(deps.db, object.name)) continue;
    if (windows.some((w) => modified >= w.from && modified <= w.to)) {
      kept++;
      continue;
    }
    await deps.files.delete(object.name);
    removed++;
  }
  return { removed, kept };
}

/**
 * From each BACKUP_RESTORED audit entry: the time between the snapshot (less ORPHAN_AGE_MS: an
 * upload then in flight got its row only after it) and the restore.
 */
async function restoreWindows(db: Database): Promise<{ from: number; to: number }[]> {
  return (await restoreRecords(db)).flatMap(({ backupCreatedAt, restoredAt }) => {
    const from = Date.parse(backupCreatedAt ?? "") - ORPHAN_AGE_MS;
    const to = Date.parse(restoredAt ?? "");
    return Number.isNaN(from) || Number.isNaN(to) ? [] : [{ from, to }];
  });
}

export async function fileInfo(deps: Pick<FilesDeps, "db">, name: string): Promise<FileInfo> {
  // Only generated names are stored: any other is missing, and never reaches storage or the database.
  if (!isStoredName(name)) throw new AppError("FILE_NOT_FOUND", { name });
  const row = await fileRow(deps.db, name);
  if (!row) throw new AppError("FILE_NOT_FOUND", { name });
  return toFileInfo(row);
}

/** One page of every stored file's info, newest first (upload order breaks ties), and the total. */
export async function listFiles(deps: Pick<FilesDeps, "db">, query: FileListQuery): Promise<{ files: FileInfo[]; total: number }> {
  const { rows, total } = await readFiles(deps.db, pageOf(query));
  return { files: rows.map(toFileInfo), total };
}

function toFileInfo(row: FileRow): FileInfo {
  return {
    id: row.id,
    fileName: row.id,
    originalName: row.originalName,
    fileSize: row.size,
    contentType: row.contentType,
    sha256: row.sha256,
    uploadedBy: row.uploadedBy,
    uploadTime: row.createdAt.toISOString(),
  };
}

/**
 * The single range of a `Range: bytes=…` header within `size` bytes. Undefined: serve the whole
 * file (no header, another unit, several ranges or a malformed one, as RFC 9110 allows).
 * Throws 416 for a well-formed range that starts past the end.
 */
export function parseRange(header: string | null, size: number): ByteRange | undefined {
  const match = /^bytes=\s*(\d*)-(\d*)\s*$/.exec(header ?? "");
  if (!match || (match[1] === "" && match[2] === "")) return undefined;
  const unsatisfiable = () => new AppError("RANGE_NOT_SATISFIABLE", {}, { headers: { "content-range": `bytes */${size}` } });
  if (match[1] === "") {
    const suffix = Number(match[2]);
    if (suffix === 0) throw unsatisfiable();
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(match[1]);
  const end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (match[2] !== "" && Number(match[2]) < start) return undefined;
  if (start >= size) throw unsatisfiable();
  return { start, end };
}

/** `attachment` with an ASCII fallback and the exact UTF-8 name (RFC 6266 / RFC 8187). */
export function contentDisposition(originalName: string): string {
  const fallback = originalName.replace(/[^\x20-\x7e]|["\\%]/gu, "_");
  const encoded = encodeURIComponent(originalName).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

/** The download as a streamed Response: the whole file, or one range of it. */
export async function downloadFile(deps: Pick<FilesDeps, "db" | "files" | "logger">, name: string, rangeHeader: string | null): Promise<Response> {
  const info = await fileInfo(deps, name);
  const stat = await deps.files.stat(name).catch((error) => {
    throw storageError(deps, error);
  });
  if (!stat) throw new AppError("FILE_NOT_FOUND", { name });
  const range = parseRange(rangeHeader, stat.size);
  const headers: Record<string, string> = {
    "content-type": "application/octet-stream",
    "content-disposition": contentDisposition(info.originalName),
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'none'; sandbox; frame-ancestors 'none'",
    "accept-ranges": "bytes",
    "content-length": String(range ? range.end - range.start + 1 : stat.size),
  };
  if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${stat.size}`;
  return new Response(deps.files.get(name, range), { status: range ? 206 : 200, headers });
}
