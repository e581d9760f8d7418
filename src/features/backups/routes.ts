/** Feature folder backups/: backups and restores: archives, destinations, the schedule, the CLI commands and /api/admin/backups. */
/** /api/admin/backups: list, create, download (streamed) and delete archives; ADMIN only. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { ErrorEnvelope } from "../../envelope";
import { errorResponses } from "../../http/route-docs";
import { Backup, BackupNameParams } from "./model";
import { registerBackupMetrics } from "./operations";
import { createBackup, deleteBackup, downloadBackup, listBackups } from "./service";

const errors = errorResponses(400, 401, 403, 404);

export const backupsRoutes = (ctx: AppContext) => {
  registerBackupMetrics(ctx.metrics.registry, ctx.db);
  const deps = { config: ctx.config, db: ctx.db, logger: ctx.logging.get("backup"), now: ctx.now };
  return new Elysia({ prefix: "/api/admin/backups", tags: ["Backups"] }).use(ctx.auth).guard({ access: { allow: "ADMIN" } }, (admin) =>
    admin
      .get("", () => listBackups(ctx.config), {
        sample: () => ({ path: "/api/admin/backups", status: 200 }),
        response: { 200: t.Array(Backup), ...errorResponses(401, 403) },
        detail: { summary: "List backups", description: "Every archive in BACKUP_DIR, newest first." },
      })
      .post(
        "",
        async ({ caller, set, server, request }) => {
          // A large database takes longer than the idle timeout: this answer waits for the archive.
          server?.timeout(request, 0);
          const { location: _, ...created } = await createBackup(deps, { trigger: "manual", actor: caller.email });
          set.status = 201;
          return created;
        },
        {
          // A remote database is backed up by its server: the answer there is 400 BACKUP_UNSUPPORTED (a replica backs up its copy).
          sample: (walk: Walk) => ({ path: "/api/admin/backups", status: walk.backup ? 201 : 400 }),
          response: { 201: Backup, 400: ErrorEnvelope, ...errorResponses(401, 403), 409: ErrorEnvelope },
          detail: {
            summary: "Take a backup now",
            description:
              "A consistent online snapshot of the database (writers keep writing) and the uploads of folder storage, as one tar.gz in BACKUP_DIR; " +
              "with BACKUP_ENCRYPTION_KEY encrypted whole (…tar.gz.enc) and carrying the keys kept in the data folder, which a plain archive never holds. 409 BACKUP_IN_PROGRESS while another backup runs in any process; 400 BACKUP_UNSUPPORTED for a remote database. On an embedded replica the archive is of its local copy, pulled just before (the manifest says `source: replica`, its primary and the frame reached).",
          },
        },
      )
      .get("/:name", ({ params, caller }) => downloadBackup(deps, params.name, caller.email), {
        sample: (walk: Walk) => ({
          path: `/api/admin/backups/${walk.backup ?? "usersvc-20260101T000000Z.tar.gz"}`,
          status: walk.backup ? 200 : 404,
          // A backup archive is the database itself, password hashes included, by design (docs/operations.md, "Backups and restore": archives hold secrets).
          holdsPrivateData: "a backup archive holds the database, by design",
        }),
        params: BackupNameParams,
        response: { 200: t.File({ description: "The archive (application/gzip; an encrypted …tar.gz.enc: application/octet-stream)" }), ...errors },
        detail: { summary: "Download a backup", description: "Streamed as an attachment. It holds password hashes (and, encrypted, the keys): keep it safe." },
      })
      .delete(
        "/:name",
        async ({ params, caller, set }) => {
          await deleteBackup(deps, params.name, caller.email);
          set.status = 204;
        },
        {
          sample: () => ({ path: "/api/admin/backups/usersvc-20260101T000000Z.tar.gz", status: 404 }),
          params: BackupNameParams,
          response: { 204: t.Void({ description: "Deleted" }), ...errors },
          detail: { summary: "Delete a backup" },
        },
      ),
  );
};
