/** Feature folder files/: uploads and downloads of files (/api/files), with the orphan sweep. */
/** /api/files: streamed upload and download, and file info, for any authenticated caller; the list of every file, for ADMIN. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { ErrorEnvelope } from "../../envelope";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { FileIdParams, FileInfo, FileListQuery, FileNameParams, FileUploadResponse, UploadBody } from "./model";
import { downloadFile, fileInfo, listFiles, uploadFile } from "./service";

/** The upload reads its own body as a stream; the global body parser lets this route through. */
export const UPLOAD_PATH = "/api/files/upload";

// Storage may be unavailable (503) on every route; any name no stored file has is 404.
const errors = errorResponses(401, 404, 503);

export const filesRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/files", tags: ["Files"] })
    .use(ctx.auth)
    .get(
      "",
      async ({ query, set }) => {
        const { files, total } = await listFiles(ctx, query);
        set.headers["x-total-count"] = String(total);
        return files;
      },
      {
        access: { allow: "ADMIN", scope: "files:read" },
        sample: () => ({ path: "/api/files", status: 200 }),
        query: FileListQuery,
        response: { 200: t.Array(FileInfo), ...errorResponses(400, 401, 403, 503) },
        detail: {
          summary: "List stored files",
          description: "Every stored file's info, newest first, one page at a time (page from 0, size 20 unless given, at most 100). Total in X-Total-Count.",
          ...documentedHeaders({ 200: ["X-Total-Count"] }),
        },
      },
    )
    .post(
      "/upload",
      async ({ request, caller, set }) => {
        const uploaded = await uploadFile(ctx, request, caller.id, ctx.config.maxUploadBytes);
        set.status = 201;
        return uploaded;
      },
      {
        access: { allow: "authenticated", scope: "files:write" },
        sample: (walk: Walk) => ({ path: "/api/files/upload", raw: walk.upload(), status: 201 }),
        response: { 201: FileUploadResponse, ...errorResponses(400, 401, 413, 503) },
        detail: {
          summary: "Upload a file",
          description: "multipart/form-data with one part named `file`, streamed to storage. Larger than MAX_UPLOAD_BYTES: 413.",
          requestBody: { content: { "multipart/form-data": { schema: UploadBody } } },
        },
      },
    )
    .get("/download/:fileName", ({ params, request }) => downloadFile(ctx, params.fileName, request.headers.get("range")), {
      access: { allow: "authenticated", scope: "files:read", withoutUser: true },
      sample: (walk: Walk) => ({ path: `/api/files/download/${walk.file.fileName}`, status: 200 }),
      params: FileNameParams,
      response: { 200: t.File({ description: "The bytes" }), 206: t.File({ description: "One byte range (Content-Range)" }), 416: ErrorEnvelope, ...errors },
      detail: {
        summary: "Download a file",
        description: "Streamed as an attachment under its original name; supports one `Range: bytes=…`.",
        ...documentedHeaders({ 200: ["Content-Disposition"], 206: ["Content-Disposition", "Content-Range"], 416: ["Content-Range"] }),
      },
    })
    .get(
      "/info/:id",
      async ({ params, set }) => {
        const info = await fileInfo(ctx, params.id);
        set.headers["x-file-version"] = info.sha256;
        set.headers["x-last-modified"] = new Date(info.uploadTime).toUTCString();
        // The seed's hour, for the caller's own cache only: every other authenticated answer is no-store (src/http/cache-control.ts).
        set.headers["cache-control"] = "private, max-age=3600";
        return info;
      },
      {
        access: { allow: "authenticated", scope: "files:read", withoutUser: true },
        sample: (walk: Walk) => ({ path: `/api/files/info/${walk.file.id}`, status: 200 }),
        params: FileIdParams,
        response: { 200: FileInfo, ...errors },
        detail: {
          summary: "File info",
          description: "X-File-Version is the SHA-256 of the bytes (a stored file never changes); X-Last-Modified its upload time.",
          ...documentedHeaders({ 200: ["X-File-Version", "X-Last-Modified"] }),
        },
      },
    );
