/** Sign-in with other providers: its error codes and texts (English, zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const federationErrors = defineErrors({
  PROVIDER_NOT_FOUND: { status: 404, en: "No sign-in provider of that name is configured", "zh-TW": "未設定此名稱的登入服務" },
  INVALID_RETURN_URL: {
    status: 400,
    en: "returnTo must be a page under /account or /admin, or one listed in OIDC_RETURN_URLS",
    "zh-TW": "returnTo 必須是 /account 或 /admin 之下的頁面，或列於 OIDC_RETURN_URLS 的網址",
  },
  PROVIDER_UNAVAILABLE: { status: 502, en: "The sign-in provider could not be reached; try again later", "zh-TW": "無法連線到登入服務，請稍後再試" },
  PROVIDER_DENIED: { status: 401, en: "The sign-in was cancelled at the provider", "zh-TW": "已在登入服務取消登入" },
  INVALID_OIDC_STATE: { status: 400, en: "This sign-in has expired or was already used: start again", "zh-TW": "此次登入已逾時或已使用，請重新開始" },
  PROVIDER_REJECTED: { status: 401, en: "The provider's answer could not be verified: nobody was signed in", "zh-TW": "無法驗證登入服務的回應，未登入任何帳號" },
  INVALID_OIDC_CODE: { status: 401, en: "The sign-in code is wrong, used or expired: start again", "zh-TW": "登入代碼錯誤、已使用或已過期，請重新開始" },
  ACCOUNT_EXISTS: {
    status: 409,
    en: "An account with this e-mail exists: sign in with its own method, then link this provider from the security page",
    "zh-TW": "已有使用此 Email 的帳號：請以該帳號原本的方式登入，再從安全性頁面連結此登入服務",
  },
  SIGNUP_DISABLED: { status: 403, en: "New accounts cannot be made by signing in with a provider here", "zh-TW": "此處無法透過登入服務建立新帳號" },
  IDENTITY_IN_USE: { status: 409, en: "This provider account is linked to another account", "zh-TW": "此登入服務帳號已連結到其他帳號" },
  IDENTITY_NOT_FOUND: { status: 404, en: "No such linked sign-in", "zh-TW": "找不到此連結的登入方式" },
  LAST_SIGN_IN_METHOD: {
    status: 409,
    en: "This is the account's last way to sign in: set a password or add a passkey first",
    "zh-TW": "這是此帳號最後的登入方式，請先設定密碼或新增通行金鑰",
  },
  STEP_UP_NOT_SUPPORTED: {
    status: 400,
    en: "This provider cannot confirm a fresh sign-in: confirm it is you with your password, an authenticator code, a passkey or another provider",
    "zh-TW": "此登入服務無法確認重新登入，請改用密碼、驗證器代碼、通行金鑰或其他登入服務確認身分",
  },
  IDENTITY_NOT_LINKED: {
    status: 403,
    en: "You signed in at the provider with an account that is not linked to this one",
    "zh-TW": "您在登入服務使用的帳號並未連結到此帳號",
  },
  VERIFICATION_SENT: {
    status: 403,
    en: "Confirm your e-mail address first: we sent you a link",
    "zh-TW": "請先確認您的 Email 地址：我們已寄出確認連結",
  },
});

const federationTexts = defineTexts({
  "federation.signedIn": { en: "Signed in", "zh-TW": "登入成功" },
  "federation.identities": { en: "Linked sign-ins", "zh-TW": "已連結的登入方式" },
  "federation.linkStarted": { en: "Continue at the provider", "zh-TW": "請在登入服務繼續" },
  "federation.unlinked": { en: "Unlinked", "zh-TW": "已取消連結" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const federationCatalogue = { errors: federationErrors, texts: federationTexts };
