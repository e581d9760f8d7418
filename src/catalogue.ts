/**
 * Every errorCode and text a client can read: the service-wide ones here, each feature's from
 * its own errors.ts. A feature adds its one export to FEATURES below (better-auth's model:
 * `keyof typeof` a const catalogue), so `new AppError("MISSPELT")` or a field message key that
 * does not exist fails tsc instead of becoming a 500 at run time.
 */
import { defineErrors, defineTexts, render, type Lang, type TextParams } from "./i18n";
import { accountCatalogue } from "./features/account/errors";
import { actuatorCatalogue } from "./features/actuator/errors";
import { apiKeysCatalogue } from "./features/api-keys/errors";
import { authCatalogue } from "./features/auth/errors";
import { backupsCatalogue } from "./features/backups/errors";
import { federationCatalogue } from "./features/federation/errors";
import { filesCatalogue } from "./features/files/errors";
import { mfaCatalogue } from "./features/mfa/errors";
import { oauthServerCatalogue } from "./features/oauth-server/errors";
import { ordersCatalogue } from "./features/orders/errors";
import { peopleCatalogue } from "./features/people/errors";
import { productsCatalogue } from "./features/products/errors";
import { searchCatalogue } from "./features/search/errors";
import { sessionsCatalogue } from "./features/sessions/errors";
import { usersCatalogue } from "./features/users/errors";

/**
 * Each feature's part: `{ errors?, texts? }`, one export of its errors.ts. A new feature adds its
 * import above and its entry here, nothing else.
 */
const FEATURES = [
  usersCatalogue,
  authCatalogue,
  productsCatalogue,
  ordersCatalogue,
  filesCatalogue,
  peopleCatalogue,
  searchCatalogue,
  actuatorCatalogue,
  accountCatalogue,
  backupsCatalogue,
  sessionsCatalogue,
  apiKeysCatalogue,
  mfaCatalogue,
  federationCatalogue,
  oauthServerCatalogue,
] as const;

/** Codes any feature (or the HTTP plumbing) answers. */
const serviceErrors = defineErrors({
  ACCESS_DENIED: { status: 403, en: "You do not have permission to perform this operation", "zh-TW": "沒有權限執行此操作" },
  INVALID_HOST: { status: 400, en: "The request's Host header is missing or is not a valid host", "zh-TW": "請求的 Host 標頭缺少或不是有效的主機" },
  UNAUTHORIZED: { status: 401, en: "Authentication is required to access this resource", "zh-TW": "需要登入才能存取此資源" },
  REAUTHENTICATION_REQUIRED: { status: 403, en: "Sign in again to do this: it needs a sign-in within the last 10 minutes", "zh-TW": "此操作需要在 10 分鐘內重新登入" },
  INVALID_STEP_UP: {
    status: 403,
    en: "Confirm it is you again: the confirmation is wrong, used, expired or from another session",
    "zh-TW": "請再次確認您的身分：此確認錯誤、已使用、已過期或來自其他工作階段",
  },
  /** Also a per-user resource's unknown id, or another user's (whose existence does not show). */
  NOT_FOUND: { status: 404, en: "No resource at this path", "zh-TW": "找不到此路徑的資源" },
  METHOD_NOT_ALLOWED: { status: 405, en: "Method not allowed on this path", "zh-TW": "此路徑不支援此方法" },
  PAYLOAD_TOO_LARGE: { status: 413, en: "Request body is too large", "zh-TW": "請求內容過大" },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, en: "Unsupported content type", "zh-TW": "不支援的內容類型" },
  TOO_MANY_REQUESTS: { status: 429, en: "Too many requests, try again later", "zh-TW": "請求過於頻繁，請稍後再試" },
  SERVICE_UNAVAILABLE: { status: 503, en: "The service is busy, please try again shortly", "zh-TW": "服務忙碌中，請稍後再試" },
  /** A per-user resource's cap (docs/contributing.md, "A per-user resource with a table"): `{max}` of them per user. */
  LIMIT_REACHED: { status: 409, en: (p) => `At most ${p.max} of these per user: delete one first`, "zh-TW": (p) => `每位使用者最多 ${p.max} 筆，請先刪除一筆` },
  DATA_INTEGRITY_VIOLATION: { status: 409, en: "Data operation failed", "zh-TW": "資料操作失敗" },
  INTERNAL_ERROR: { status: 500, en: "Internal server error, please try again later", "zh-TW": "系統內部錯誤，請稍後再試" },
});

/** Envelope messages and the generic field messages, for rules without a text of their own. */
const serviceTexts = defineTexts({
  "validation.body": { en: "Data validation failed", "zh-TW": "資料驗證失敗" },
  "validation.params": { en: "Parameter validation failed", "zh-TW": "參數驗證失敗" },
  "error.malformedJson": { en: "Malformed JSON request", "zh-TW": "Malformed JSON request" },
  "error.integrity.duplicate": { en: "Duplicate data, the operation cannot be performed", "zh-TW": "資料重複，無法執行操作" },
  "error.integrity.foreignKey": { en: "The data is referenced by other records, the operation cannot be performed", "zh-TW": "資料存在關聯，無法執行操作" },
  "field.instant": { en: "must be a date (yyyy-MM-dd) or an ISO 8601 date-time", "zh-TW": "日期格式不正確，應為 yyyy-MM-dd 或 ISO 8601 日期時間" },
  "field.required": { en: "is required", "zh-TW": "為必填欄位" },
  "field.type": { en: (p) => `must be ${p.expected}`, "zh-TW": (p) => `格式不正確，應為 ${p.expected}` },
  "field.invalid": { en: "is invalid", "zh-TW": "格式不正確" },
  "field.url": { en: "must be an http or https URL", "zh-TW": "必須是 http 或 https 網址" },
  "field.minLength": { en: (p) => `must be at least ${p.limit} characters`, "zh-TW": (p) => `長度不能少於 ${p.limit} 字元` },
  "field.maxLength": { en: (p) => `must be at most ${p.limit} characters`, "zh-TW": (p) => `長度不能超過 ${p.limit} 字元` },
  "field.minimum": { en: (p) => `must be at least ${p.limit}`, "zh-TW": (p) => `不能小於 ${p.limit}` },
  "field.maximum": { en: (p) => `must be at most ${p.limit}`, "zh-TW": (p) => `不能大於 ${p.limit}` },
  "field.minItems": { en: (p) => `must have at least ${p.limit} entries`, "zh-TW": (p) => `至少需要 ${p.limit} 個項目` },
  "field.maxItems": { en: (p) => `must have at most ${p.limit} entries`, "zh-TW": (p) => `最多只能有 ${p.limit} 個項目` },
  "field.enum": { en: (p) => `must be one of ${p.allowed}`, "zh-TW": (p) => `必須是 ${p.allowed} 之一` },
});

/** The intersection of a union's members: every feature's keys in one type. */
type Merged<U> = (U extends object ? (k: U) => void : never) extends (k: infer I) => void ? I : never;
type Feature = (typeof FEATURES)[number];
type ErrorsOf<F> = F extends { errors: infer E } ? E : never;
type TextsOf<F> = F extends { texts: infer T } ? T : never;

/** One catalogue out of many; a key two parts both define is a start-up failure, never a silent override. */
function merge(parts: readonly (object | undefined)[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part ?? {})) {
      if (key in out) throw new Error(`catalogue: ${key} is defined twice`);
      out[key] = value;
    }
  }
  return out;
}

export const ERRORS = merge([serviceErrors, ...FEATURES.map((part) => ("errors" in part ? part.errors : undefined))]) as typeof serviceErrors & Merged<ErrorsOf<Feature>>;
const TEXTS = merge([serviceTexts, ...FEATURES.map((part) => ("texts" in part ? part.texts : undefined))]) as typeof serviceTexts & Merged<TextsOf<Feature>>;

export type ErrorCode = keyof typeof ERRORS;
export type MessageKey = keyof typeof TEXTS;

/** The envelope message of an errorCode. */
export const messageOf = (code: ErrorCode, lang: Lang, params?: TextParams): string => render(ERRORS[code], lang, params);

export const translate = (key: MessageKey, lang: Lang, params?: TextParams): string => render(TEXTS[key], lang, params);
