/** The API keys' error codes (English, and zh-TW), the guard's refusals of a key among them. */
import { defineErrors, defineTexts } from "../../i18n";

const apiKeysErrors = defineErrors({
  API_KEY_NOT_ALLOWED: { status: 403, en: "API keys are not accepted on this route", "zh-TW": "此路徑不接受 API 金鑰" },
  INSUFFICIENT_SCOPE: { status: 403, en: "The API key lacks the scope this route needs", "zh-TW": "API 金鑰缺少此路徑所需的權限範圍" },
  API_KEY_NOT_FOUND: { status: 404, en: "API key not found", "zh-TW": "找不到此 API 金鑰" },
  TOO_MANY_API_KEYS: { status: 409, en: (p) => `At most ${p.max} API keys per user: revoke one first`, "zh-TW": (p) => `每位使用者最多 ${p.max} 把 API 金鑰，請先撤銷一把` },
});

const apiKeysTexts = defineTexts({
  "field.expiresAt.past": { en: "must be in the future", "zh-TW": "必須是未來的時間" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const apiKeysCatalogue = { errors: apiKeysErrors, texts: apiKeysTexts };
