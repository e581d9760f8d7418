/** The sessions feature's error codes (English, and zh-TW). */
import { defineErrors } from "../../i18n";

export const sessionsErrors = defineErrors({
  SESSION_NOT_FOUND: { status: 404, en: "Session not found", "zh-TW": "找不到此工作階段" },
});
