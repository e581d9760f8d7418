/**
 * Every text a client can read, in English (default) and in the original service's
 * Traditional Chinese (../shared/spec/messages-zh-TW.md), chosen by Accept-Language.
 * Keys are type-checked, so a message that is used exists in both languages.
 */
export type Lang = "en" | "zh-TW";

type Text = string | ((p: Record<string, string | number>) => string);
type Entry = { en: Text; "zh-TW": Text };

const catalogue = {
  // envelope messages
  "ok": { en: "OK", "zh-TW": "成功" },
  "validation.body": { en: "Data validation failed", "zh-TW": "資料驗證失敗" },
  "validation.params": { en: "Parameter validation failed", "zh-TW": "參數驗證失敗" },
  "error.malformedJson": { en: "Malformed JSON request", "zh-TW": "Malformed JSON request" },
  "error.internal": { en: "Internal server error, please try again later", "zh-TW": "系統內部錯誤，請稍後再試" },
  "error.accessDenied": { en: "You do not have permission to perform this operation", "zh-TW": "沒有權限執行此操作" },
  "error.unauthorized": { en: "Authentication is required to access this resource", "zh-TW": "需要登入才能存取此資源" },
  "error.notFound": { en: "No resource at this path", "zh-TW": "找不到此路徑的資源" },
  "error.methodNotAllowed": { en: "Method not allowed on this path", "zh-TW": "此路徑不支援此方法" },
  "error.payloadTooLarge": { en: "Request body is too large", "zh-TW": "請求內容過大" },
  "error.unsupportedMediaType": { en: "Unsupported content type", "zh-TW": "不支援的內容類型" },
  "error.tooManyRequests": { en: "Too many requests, try again later", "zh-TW": "請求過於頻繁，請稍後再試" },
  "error.serviceUnavailable": { en: "The service is busy, please try again shortly", "zh-TW": "服務忙碌中，請稍後再試" },
  "error.integrity.duplicate": { en: "Duplicate data, the operation cannot be performed", "zh-TW": "資料重複，無法執行操作" },
  "error.integrity.foreignKey": { en: "The data is referenced by other records, the operation cannot be performed", "zh-TW": "資料存在關聯，無法執行操作" },
  "error.integrity.other": { en: "Data operation failed", "zh-TW": "資料操作失敗" },
  "error.optimisticLock": { en: "The record was changed by someone else; reload it and try again", "zh-TW": "資料已被他人修改，請重新載入後再試" },
  "error.userNotFound": { en: (p) => `User not found, ID: ${p.id}`, "zh-TW": (p) => `找不到使用者，ID: ${p.id}` },
  "error.duplicateEmail": { en: (p) => `Email already exists: ${p.email}`, "zh-TW": (p) => `Email 已存在: ${p.email}` },

  // field messages shared by User and registration
  "field.name.blank": { en: "must not be blank", "zh-TW": "姓名不能為空" },
  "field.name.length.user": { en: "must be between 2 and 100 characters", "zh-TW": "姓名長度必須在 2-100 字元之間" },
  "field.name.length.registration": { en: "must be between 2 and 50 characters", "zh-TW": "姓名長度必須在 2-50 字元之間" },
  "field.email.blank": { en: "must not be blank", "zh-TW": "Email 不能為空" },
  "field.email.format": { en: "must be a valid e-mail address", "zh-TW": "Email 格式不正確" },
  "field.email.length": { en: "must be at most 255 characters", "zh-TW": "Email 長度不能超過 255 字元" },
  "field.phone.pattern": { en: "must contain only digits, spaces, +, -, ( and ), at most 20 characters", "zh-TW": "電話號碼格式不正確" },
  "field.department.length": { en: "must be at most 50 characters", "zh-TW": "部門名稱不能超過 50 字元" },
  "field.password.blank": { en: "must not be blank", "zh-TW": "密碼不能為空" },
  "field.password.length": { en: "must be between 8 and 20 characters", "zh-TW": "密碼長度必須在 8-20 字元之間" },
  "field.password.pattern": {
    en: "must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
    "zh-TW": "密碼必須包含大小寫字母、數字和特殊字元",
  },
  "field.confirmPassword.blank": { en: "must not be blank", "zh-TW": "確認密碼不能為空" },
  "field.confirmPassword.mismatch": { en: "must match password", "zh-TW": "密碼與確認密碼不一致" },
  "field.age.missing": { en: "must not be null", "zh-TW": "年齡不能為空" },
  "field.age.min": { en: "must be at least 18", "zh-TW": "年齡不能小於 18 歲" },
  "field.age.max": { en: "must be at most 120", "zh-TW": "年齡不能大於 120 歲" },
  "field.birthDate.past": { en: "must be a date in the past", "zh-TW": "生日必須是過去的日期" },
  "field.salary.positive": { en: "must be greater than 0", "zh-TW": "薪資必須大於 0" },
  "field.salary.max": { en: "must be at most 999999.99", "zh-TW": "薪資不能超過 999,999.99" },
  "field.salary.digits": { en: "must have at most 6 integer and 2 fraction digits", "zh-TW": "薪資格式不正確" },
  "field.address.missing": { en: "must not be null", "zh-TW": "地址資訊不能為空" },
  "field.skills.max": { en: "must have at most 3 entries", "zh-TW": "最多只能選擇 3 個技能" },
  "field.skills.min": { en: "must have at least 1 entry", "zh-TW": "至少要選擇一個技能" },
  "field.skills.blank": { en: "must not be blank", "zh-TW": "技能名稱不能為空" },
  "field.city.blank": { en: "must not be blank", "zh-TW": "城市不能為空" },
  "field.district.blank": { en: "must not be blank", "zh-TW": "區域不能為空" },
  "field.detail.blank": { en: "must not be blank", "zh-TW": "詳細地址不能為空" },
  "field.detail.length": { en: "must be at most 200 characters", "zh-TW": "詳細地址不能超過 200 字元" },
  "field.zipCode.pattern": { en: "must be exactly 5 digits", "zh-TW": "郵遞區號必須是 5 位數字" },

  // generic field messages, for rules without a text of their own
  "field.required": { en: "is required", "zh-TW": "為必填欄位" },
  "field.type": { en: (p) => `must be ${p.expected}`, "zh-TW": (p) => `格式不正確，應為 ${p.expected}` },
  "field.unknown": { en: "is not a known field", "zh-TW": "不是可接受的欄位" },
  "field.invalid": { en: "is invalid", "zh-TW": "格式不正確" },
  "field.minLength": { en: (p) => `must be at least ${p.limit} characters`, "zh-TW": (p) => `長度不能少於 ${p.limit} 字元` },
  "field.maxLength": { en: (p) => `must be at most ${p.limit} characters`, "zh-TW": (p) => `長度不能超過 ${p.limit} 字元` },
  "field.minimum": { en: (p) => `must be at least ${p.limit}`, "zh-TW": (p) => `不能小於 ${p.limit}` },
  "field.maximum": { en: (p) => `must be at most ${p.limit}`, "zh-TW": (p) => `不能大於 ${p.limit}` },
  "field.minItems": { en: (p) => `must have at least ${p.limit} entries`, "zh-TW": (p) => `至少需要 ${p.limit} 個項目` },
  "field.maxItems": { en: (p) => `must have at most ${p.limit} entries`, "zh-TW": (p) => `最多只能有 ${p.limit} 個項目` },
  "field.enum": { en: (p) => `must be one of ${p.allowed}`, "zh-TW": (p) => `必須是 ${p.allowed} 之一` },
  "field.sort": {
    en: "must be <field>,asc|desc with field one of id, name, email, createdAt, updatedAt, lastLogin, active",
    "zh-TW": "排序格式應為 欄位,asc|desc，欄位為 id, name, email, createdAt, updatedAt, lastLogin, active 之一",
  },
} satisfies Record<string, Entry>;

export type MessageKey = keyof typeof catalogue;

/** Registers more texts (a feature's own catalogue) under new keys. */
const extra: Record<string, Entry> = {};
export function defineMessages<K extends string>(entries: Record<K, Entry>): (key: K, lang: Lang, params?: Record<string, string | number>) => string {
  Object.assign(extra, entries);
  return (key, lang, params) => translate(key as never, lang, params);
}

export function translate(key: MessageKey, lang: Lang, params: Record<string, string | number> = {}): string {
  const entry: Entry | undefined = (catalogue as Record<string, Entry>)[key] ?? extra[key];
  if (!entry) return key;
  const text = entry[lang];
  return typeof text === "function" ? text(params) : text;
}

/** zh, zh-TW, zh-Hant… pick the original service's texts; anything else English. Highest q wins. */
export function languageOf(acceptLanguage: string | null | undefined): Lang {
  if (!acceptLanguage) return "en";
  const ranked = acceptLanguage
    .split(",")
    .map((part) => {
      const [tag, ...params] = part.split(";");
      const q = params.map((p) => /^\s*q\s*=\s*([\d.]+)\s*$/.exec(p)?.[1]).find(Boolean);
      return { tag: tag.trim().toLowerCase(), q: q === undefined ? 1 : Number(q) };
    })
    .filter((entry) => entry.q > 0)
    .sort((a, b) => b.q - a.q); // stable: equal weights keep the client's order
  for (const { tag } of ranked) {
    if (tag.startsWith("zh")) return "zh-TW";
    if (tag.startsWith("en")) return "en";
  }
  return "en";
}
