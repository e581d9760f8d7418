/** The OpenID Provider's API error codes (English, and zh-TW); protocol errors keep the RFCs' own shape. */
import { defineErrors } from "../../i18n";

export const oauthServerErrors = defineErrors({
  OAUTH_CLIENT_NOT_FOUND: { status: 404, en: "Client not found", "zh-TW": "找不到此用戶端" },
  OAUTH_CLIENT_INVALID: { status: 400, en: (p) => `Invalid client: ${p.reason}`, "zh-TW": (p) => `用戶端設定無效：${p.reason}` },
  CLIENT_WITHOUT_USER: {
    status: 403,
    en: "This route acts for a user; a client's own token (client_credentials) has none",
    "zh-TW": "此路徑需代表使用者操作；用戶端本身的權杖（client_credentials）沒有使用者",
  },
  OAUTH_REQUEST_INVALID: { status: 400, en: (p) => `This sign-in cannot go on: ${p.reason}`, "zh-TW": (p) => `無法繼續此登入：${p.reason}` },
});
