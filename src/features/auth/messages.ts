/** The accounts feature's own error codes and texts (English, and zh-TW as the original service wrote them). */
import { defineErrors } from "../../errors";
import { defineMessages } from "../../i18n";

defineErrors({
  INVALID_CREDENTIALS: { status: 401, message: "auth.invalidCredentials" },
  ACCOUNT_DISABLED: { status: 403, message: "auth.accountDisabled" },
});

export const authText = defineMessages({
  "auth.registered": { en: "Registration successful", "zh-TW": "註冊成功" },
  "auth.emailAvailable": { en: "Email is available", "zh-TW": "Email 可用" },
  "auth.emailTaken": { en: "Email already exists", "zh-TW": "Email 已存在" },
  "auth.loggedIn": { en: "Login successful", "zh-TW": "登入成功" },
  "auth.refreshed": { en: "Token refreshed", "zh-TW": "權杖已更新" },
  "auth.loggedOut": { en: "Logged out; every earlier token is revoked", "zh-TW": "已登出，先前的權杖皆已失效" },
  "auth.passwordChanged": { en: "Password changed; every earlier token is revoked", "zh-TW": "密碼已變更，先前的權杖皆已失效" },
  "auth.invalidCredentials": { en: "Invalid e-mail or password", "zh-TW": "帳號或密碼錯誤" },
  "auth.accountDisabled": { en: "This account is disabled", "zh-TW": "帳號已停用" },
  "field.birthDate.format": { en: "must be a date (yyyy-MM-dd)", "zh-TW": "生日格式不正確" },
  "field.currentPassword.wrong": { en: "is not the current password", "zh-TW": "目前密碼不正確" },
});
