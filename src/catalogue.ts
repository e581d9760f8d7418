/**
 * Every errorCode and text a client can read: the service-wide ones here, each feature's from
 * its own errors.ts. A feature adds its file to the two lists below (better-auth's model:
 * `keyof typeof` a const catalogue), so `new AppError("MISSPELT")` or a field message key that
 * does not exist fails tsc instead of becoming a 500 at run time.
 */
import { defineErrors, defineTexts, render, type Lang, type TextParams } from "./i18n";
import { accountErrors, accountTexts } from "./features/account/errors";
import { actuatorErrors } from "./features/actuator/errors";
import { authErrors, authTexts } from "./features/auth/errors";
import { backupsErrors } from "./features/backups/errors";
import { filesErrors, filesTexts } from "./features/files/errors";
import { ordersErrors, ordersTexts } from "./features/orders/errors";
import { peopleErrors } from "./features/people/errors";
import { productsErrors, productsTexts } from "./features/products/errors";
import { searchTexts } from "./features/search/errors";
import { sessionsErrors } from "./features/sessions/errors";
import { apiKeysErrors, apiKeysTexts } from "./features/api-keys/errors";
import { mfaErrors, mfaTexts } from "./features/mfa/errors";
import { federationErrors, federationTexts } from "./features/federation/errors";
import { oauthServerErrors } from "./features/oauth-server/errors";
import { usersErrors, usersTexts } from "./features/users/errors";

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
  NOT_FOUND: { status: 404, en: "No resource at this path", "zh-TW": "找不到此路徑的資源" },
  METHOD_NOT_ALLOWED: { status: 405, en: "Method not allowed on this path", "zh-TW": "此路徑不支援此方法" },
  PAYLOAD_TOO_LARGE: { status: 413, en: "Request body is too large", "zh-TW": "請求內容過大" },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, en: "Unsupported content type", "zh-TW": "不支援的內容類型" },
  TOO_MANY_REQUESTS: { status: 429, en: "Too many requests, try again later", "zh-TW": "請求過於頻繁，請稍後再試" },
  SERVICE_UNAVAILABLE: { status: 503, en: "The service is busy, please try again shortly", "zh-TW": "服務忙碌中，請稍後再試" },
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

type Merged<T extends readonly object[]> = (T[number] extends infer U ? (U extends object ? (k: U) => void : never) : never) extends (k: infer I) => void ? I : never;

/** One catalogue out of many; a key two features both define is a start-up failure, never a silent override. */
function merge<const T extends readonly object[]>(...parts: T): Merged<T> {
  const out: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if (key in out) throw new Error(`catalogue: ${key} is defined twice`);
      out[key] = value;
    }
  }
  return out as Merged<T>;
}

export const ERRORS = merge(
  serviceErrors,
  usersErrors,
  authErrors,
  productsErrors,
  ordersErrors,
  filesErrors,
  peopleErrors,
  actuatorErrors,
  accountErrors,
  backupsErrors,
  sessionsErrors,
  apiKeysErrors,
  mfaErrors,
  federationErrors,
  oauthServerErrors,
);
const TEXTS = merge(serviceTexts, usersTexts, authTexts, productsTexts, ordersTexts, filesTexts, searchTexts, accountTexts, apiKeysTexts, mfaTexts, federationTexts);

export type ErrorCode = keyof typeof ERRORS;
export type MessageKey = keyof typeof TEXTS;

/** The envelope message of an errorCode. */
export const messageOf = (code: ErrorCode, lang: Lang, params?: TextParams): string => render(ERRORS[code], lang, params);

export const translate = (key: MessageKey, lang: Lang, params?: TextParams): string => render(TEXTS[key], lang, params);
