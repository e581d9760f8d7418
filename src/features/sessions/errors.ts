/** The sessions feature's error codes (English, and zh-TW). */
import { defineErrors } from "../../i18n";

const sessionsErrors = defineErrors({
  SESSION_NOT_FOUND: { status: 404, en: "Session not found", "zh-TW": "找不到此工作階段" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const sessionsCatalogue = { errors: sessionsErrors };
