/** The backups feature's error codes (English, and zh-TW). */
import { defineErrors } from "../../i18n";

const backupsErrors = defineErrors({
  BACKUP_NOT_FOUND: { status: 404, en: (p) => `No backup named ${p.name}`, "zh-TW": (p) => `找不到備份: ${p.name}` },
  BACKUP_IN_PROGRESS: { status: 409, en: "A backup is already running; try again when it has finished", "zh-TW": "已有備份正在進行，請稍後再試" },
  BACKUP_UNSUPPORTED: {
    status: 400,
    en: "This service uses a remote database, which its own server backs up",
    "zh-TW": "此服務使用遠端資料庫，請由資料庫伺服器進行備份",
  },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const backupsCatalogue = { errors: backupsErrors };
