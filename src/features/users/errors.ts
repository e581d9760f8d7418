/** The users feature's error codes and field texts (English, and zh-TW as the original service wrote them); registration reuses the field texts. */
import { defineErrors, defineTexts } from "../../i18n";

const usersErrors = defineErrors({
  USER_NOT_FOUND: { status: 404, en: (p) => `User not found, ID: ${p.id}`, "zh-TW": (p) => `找不到使用者，ID: ${p.id}` },
  DUPLICATE_EMAIL: { status: 409, en: (p) => `Email already exists: ${p.email}`, "zh-TW": (p) => `Email 已存在: ${p.email}` },
  OPTIMISTIC_LOCK_CONFLICT: { status: 409, en: "The record was changed by someone else; reload it and try again", "zh-TW": "資料已被他人修改，請重新載入後再試" },
  LAST_ADMIN: { status: 409, en: "At least one active ADMIN must remain", "zh-TW": "至少需保留一位啟用中的管理員" },
});

const usersTexts = defineTexts({
  "field.name.blank": { en: "must not be blank", "zh-TW": "姓名不能為空" },
  "field.name.length.user": { en: "must be between 2 and 100 characters", "zh-TW": "姓名長度必須在 2-100 字元之間" },
  "field.name.length.registration": { en: "must be between 2 and 50 characters", "zh-TW": "姓名長度必須在 2-50 字元之間" },
  "field.email.blank": { en: "must not be blank", "zh-TW": "Email 不能為空" },
  "field.email.format": { en: "must be a valid e-mail address", "zh-TW": "Email 格式不正確" },
  "field.email.length": { en: "must be at most 255 characters", "zh-TW": "Email 長度不能超過 255 字元" },
  "field.phone.pattern": { en: "must contain only digits, spaces, +, -, ( and ), at most 20 characters", "zh-TW": "電話號碼格式不正確" },
  "field.department.length": { en: "must be at most 50 characters", "zh-TW": "部門名稱不能超過 50 字元" },
  "field.password.blank": { en: "must not be blank", "zh-TW": "密碼不能為空" },
  "field.password.adminOnly": { en: "only an ADMIN sets it here; use POST /api/auth/change-password", "zh-TW": "僅管理員可在此設定密碼，請使用 POST /api/auth/change-password" },
  "field.currentPassword.required": { en: "is required to change your e-mail address", "zh-TW": "變更 Email 需要輸入目前密碼" },
  "field.password.length": { en: "must be between 8 and 20 characters", "zh-TW": "密碼長度必須在 8-20 字元之間" },
  "field.password.pattern": {
    en: "must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
    "zh-TW": "密碼必須包含大小寫字母、數字和特殊字元",
  },
  // PASSWORD_POLICY=strict (src/security/password-policy.ts).
  "field.password.length.strict": { en: "must be between 8 and 128 characters", "zh-TW": "密碼長度必須在 8-128 字元之間" },
  "field.password.common": { en: "is too common", "zh-TW": "密碼過於常見" },
  "field.password.email": { en: "must not contain your e-mail", "zh-TW": "密碼不能包含您的 Email" },
  "field.sort": {
    en: "must be <field>,asc|desc with field one of id, name, email, createdAt, updatedAt, lastLogin, active",
    "zh-TW": "排序格式應為 欄位,asc|desc，欄位為 id, name, email, createdAt, updatedAt, lastLogin, active 之一",
  },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const usersCatalogue = { errors: usersErrors, texts: usersTexts };
