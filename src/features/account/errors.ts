/** The account e-mail feature's error codes and texts (English, and zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const accountErrors = defineErrors({
  INVALID_TOKEN: { status: 400, en: "The link is invalid, used or expired; ask for a new one", "zh-TW": "連結無效、已使用或已過期，請重新申請" },
  EMAIL_NOT_VERIFIED: { status: 403, en: "Confirm your e-mail address before signing in", "zh-TW": "請先確認您的 Email 地址再登入" },
});

const accountTexts = defineTexts({
  "account.verificationSent": { en: "A verification e-mail is on its way", "zh-TW": "驗證郵件已寄出" },
  "account.alreadyVerified": { en: "Your e-mail address is already verified", "zh-TW": "您的 Email 地址已完成驗證" },
  "account.verified": { en: "E-mail address verified", "zh-TW": "Email 地址已驗證" },
  "account.resetRequested": {
    en: "If an account uses this address, a password-reset e-mail is on its way",
    "zh-TW": "若此地址有對應的帳號，重設密碼郵件已寄出",
  },
  "account.passwordReset": { en: "Password changed; every earlier token is revoked", "zh-TW": "密碼已變更，先前的權杖皆已失效" },
  "field.token.blank": { en: "must not be blank", "zh-TW": "權杖不能為空" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const accountCatalogue = { errors: accountErrors, texts: accountTexts };
