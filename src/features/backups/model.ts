/** TypeBox shapes of the backups API. */
import { t } from "elysia";

export const Backup = t.Object(
  {
    name: t.String({ description: "usersvc-<YYYYMMDDTHHMMSSZ>[-N].tar.gz, or ….tar.gz.enc when encrypted (BACKUP_ENCRYPTION_KEY)" }),
    size: t.Integer({ description: "Bytes" }),
    createdAt: t.String({ format: "date-time" }),
  },
  { title: "Backup" },
);

export const BackupNameParams = t.Object({ name: t.String({ maxLength: 100 }) });
