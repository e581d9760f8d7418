/** The accounts feature's error codes and texts (English, and zh-TW as the original service wrote them). */
import { defineErrors, defineTexts } from "../../i18n";

const authErrors = defineErrors({
  INVALID_CREDENTIALS: { status: 401, en: "Invalid e-mail or password", "zh-TW": "帳號或密碼錯誤" },
  ACCOUNT_DISABLED: { status: 403, en: "This account is disabled", "zh-TW": "帳號已停用" },
  INVALID_MFA_CODE: { status: 401, en: "The code is wrong, or the sign-in has expired: sign in again", "zh-TW": "驗證碼錯誤，或登入已逾時，請重新登入" },
  INVALID_PASSKEY: { status: 401, en: "The passkey was not accepted", "zh-TW": "無法接受此通行金鑰" },
  PASSKEYS_NOT_CONFIGURED: { status: 400, en: "Passkeys are not configured on this server (PUBLIC_URL or RP_ID)", "zh-TW": "此伺服器尚未設定通行金鑰（PUBLIC_URL 或 RP_ID）" },
  MFA_ENROLMENT_REQUIRED: { status: 403, en: "Set up a second factor first", "zh-TW": "請先設定第二步驟驗證" },
});

const authTexts = defineTexts({
  "auth.registered": { en: "Registration successful", "zh-TW": "註冊成功" },
  "auth.emailAvailable": { en: "Email is available", "zh-TW": "Email 可用" },
  "auth.emailTaken": { en: "Email already exists", "zh-TW": "Email 已存在" },
  "auth.loggedIn": { en: "Login successful", "zh-TW": "登入成功" },
  "auth.refreshed": { en: "Token refreshed", "zh-TW": "權杖已更新" },
  "auth.loggedOut": { en: "Logged out; every earlier token is revoked", "zh-TW": "已登出，先前的權杖皆已失效" },
  "auth.loggedOutSession": { en: "Logged out; this session's tokens are revoked", "zh-TW": "已登出，此工作階段的權杖皆已失效" },
  "auth.passwordChanged": { en: "Password changed; every earlier token is revoked", "zh-TW": "密碼已變更，先前的權杖皆已失效" },
  "field.refreshToken.blank": { en: "must not be blank", "zh-TW": "更新權杖不能為空" },
  "field.confirmPassword.blank": { en: "must not be blank", "zh-TW": "確認密碼不能為空" },
  "field.confirmPassword.mismatch": { en: "must match password", "zh-TW": "密碼與確認密碼不一致" },
  "field.age.missing": { en: "must not be null", "zh-TW": "年齡不能為空" },
  "field.age.min": { en: "must be at least 18", "zh-TW": "年齡不能小於 18 歲" },
  "field.age.max": { en: "must be at most 120", "zh-TW": "年齡不能大於 120 歲" },
  "field.birthDate.format": { en: "must be a date (yyyy-MM-dd)", "zh-TW": "生日格式不正確" },
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
  "auth.passkeyOptions": { en: "Sign in with your passkey", "zh-TW": "請使用您的通行金鑰登入" },
  "auth.mfaRequired": { en: "Password accepted; the second step is required", "zh-TW": "密碼正確，請完成第二步驟驗證" },
  "field.mfa.oneOf": { en: "give either code or passkey", "zh-TW": "請提供驗證碼或通行金鑰其中之一" },
  "field.mfaToken.blank": { en: "must not be blank", "zh-TW": "mfaToken 不能為空" },
  "field.currentPassword.wrong": { en: "is not the current password", "zh-TW": "目前密碼不正確" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const authCatalogue = { errors: authErrors, texts: authTexts };
