/** TypeBox shapes of the files API. */
import { t, type Static } from "elysia";
import { MAX_PAGE } from "../../validation";

/**
 * The generated name from the upload. Any other text is a name no stored file has: the service
 * answers 404 FILE_NOT_FOUND for it before any storage or database call (isStoredName), so the
 * schema holds no pattern that would make it a 400.
 */
const StoredName = t.String({ description: "The generated name from the upload: `<uuid><.ext>`" });

export const FileNameParams = t.Object({ fileName: StoredName });
export const FileIdParams = t.Object({ id: StoredName });

export const FileUploadResponse = t.Object(
  {
    fileName: t.String({ description: "The generated name; download and info take it" }),
    id: t.String({ description: "The same value as fileName" }),
    originalName: t.String(),
    fileSize: t.Integer({ description: "Bytes" }),
    contentType: t.String({ description: "As the client declared it (downloads are always application/octet-stream)" }),
    uploadTime: t.String({ format: "date-time" }),
  },
  { title: "FileUploadResponse" },
);
export type FileUploadResponse = Static<typeof FileUploadResponse>;

export const FileInfo = t.Object(
  {
    id: t.String(),
    fileName: t.String(),
    originalName: t.String(),
    fileSize: t.Integer(),
    contentType: t.String(),
    sha256: t.String({ description: "Hex SHA-256 of the bytes" }),
    uploadedBy: t.Union([t.Integer(), t.Null()], { description: "The uploader's user id (null once that user is deleted)" }),
    uploadTime: t.String({ format: "date-time" }),
  },
  { title: "FileInfo" },
);
export type FileInfo = Static<typeof FileInfo>;

/** GET /api/files: one page, newest first (page from 0, size 20 unless given). */
export const FileListQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100 })),
});
export type FileListQuery = Static<typeof FileListQuery>;

/** The multipart body, for the OpenAPI page (the route reads the stream itself). */
export const UploadBody = t.Object({ file: t.File({ description: "The file (one part named `file`)" }) });
