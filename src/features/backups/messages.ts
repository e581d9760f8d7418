/** The backups feature's own error codes and texts (English, and zh-TW). */
import { defineErrors } from "../../errors";
import { defineMessages } from "../../i18n";

defineErrors({
  BACKUP_NOT_FOUND: { status: 404, message: "backups.notFound" },
  BACKUP_IN_PROGRESS: { status: 409, message: "backups.inProgress" },
  BACKUP_UNSUPPORTED: { status: 400, message: "backups.unsupported" },
});

defineMessages({
  "backups.notFound": { en: (p) => `No backup named ${p.name}`, "zh-TW": (p) => `找不到備份: ${p.name}` },
  "backups.inProgress": { en: "A backup is already running; try again when it has finished", "zh-TW": "已有備份正在進行，請稍後再試" },
  "backups.unsupported": {
    en: "This service uses a remote database, which its own server backs up",
    "zh-TW": "此服務使用遠端資料庫，請由資料庫伺服器進行備份",
  },
});
