/** The operations feature's error codes (English, and zh-TW). */
import { defineErrors } from "../../i18n";

const actuatorErrors = defineErrors({
  METRIC_NOT_FOUND: { status: 404, en: (p) => `No metric named ${p.name}`, "zh-TW": (p) => `找不到指標: ${p.name}` },
  LOGGER_NOT_FOUND: { status: 404, en: (p) => `No logger named ${p.name}`, "zh-TW": (p) => `找不到記錄器: ${p.name}` },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const actuatorCatalogue = { errors: actuatorErrors };
