/** The files feature's error codes and texts (English, and zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const filesErrors = defineErrors({
  FILE_NOT_FOUND: { status: 404, en: (p) => `File not found: ${p.name}`, "zh-TW": (p) => `找不到檔案: ${p.name}` },
  RANGE_NOT_SATISFIABLE: { status: 416, en: "The requested range is outside the file", "zh-TW": "請求的範圍超出檔案大小" },
  STORAGE_UNAVAILABLE: { status: 503, en: "File storage is unavailable; nothing was stored, try again later", "zh-TW": "檔案儲存空間無法使用，未儲存任何內容，請稍後再試" },
});

const filesTexts = defineTexts({
  "field.file.required": { en: "is required: send one multipart part named file", "zh-TW": "請選擇要上傳的檔案" },
  "field.file.empty": { en: "must not be empty", "zh-TW": "檔案不能為空" },
  "field.file.multipart": { en: "must be sent as multipart/form-data", "zh-TW": "請使用 multipart/form-data 上傳檔案" },
  "field.file.malformed": { en: "is not a well-formed multipart body", "zh-TW": "上傳內容格式不正確" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const filesCatalogue = { errors: filesErrors, texts: filesTexts };
