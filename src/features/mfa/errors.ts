/** The second-factor feature's error codes (English, and zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const mfaErrors = defineErrors({
  INVALID_CODE: { status: 400, en: "The code is not right", "zh-TW": "驗證碼不正確" },
  TOTP_ALREADY_ENABLED: { status: 409, en: "An authenticator app is already set up; remove it first", "zh-TW": "已設定驗證器 App，請先移除" },
  TOTP_NOT_PENDING: { status: 409, en: "Start the authenticator app's setup first", "zh-TW": "請先開始設定驗證器 App" },
  TOTP_NOT_ENABLED: { status: 404, en: "No authenticator app is set up", "zh-TW": "尚未設定驗證器 App" },
  MFA_NOT_ENABLED: { status: 409, en: "Set up a second factor first", "zh-TW": "請先設定第二步驟驗證" },
  PASSKEY_REJECTED: { status: 400, en: "The passkey could not be registered; try again", "zh-TW": "無法註冊此通行金鑰，請再試一次" },
  PASSKEY_EXISTS: { status: 409, en: "This passkey is already registered", "zh-TW": "此通行金鑰已註冊" },
  PASSKEY_NOT_FOUND: { status: 404, en: "Passkey not found", "zh-TW": "找不到此通行金鑰" },
  ENROL_CODE_REQUIRED: {
    status: 403,
    en: "Your first second factor needs the code sent to your e-mail address (or given by an administrator)",
    "zh-TW": "設定第一個第二步驟驗證需要寄到您 Email 的驗證碼（或由管理員提供）",
  },
  INVALID_ENROL_CODE: { status: 400, en: "The enrolment code is not right, or has expired: ask for a new one", "zh-TW": "設定驗證碼不正確或已過期，請重新索取" },
  ENROL_CODE_NOT_NEEDED: { status: 409, en: "Your account needs no enrolment code", "zh-TW": "您的帳號不需要設定驗證碼" },
  ENROL_CODE_FROM_OPERATOR: {
    status: 409,
    en: "This service sends no e-mail: ask an administrator for your enrolment code",
    "zh-TW": "此服務不寄送 Email，請向管理員索取設定驗證碼",
  },
  EMAIL_VERIFICATION_REQUIRED: {
    status: 403,
    en: "Confirm your e-mail address first: the enrolment code is sent there",
    "zh-TW": "請先確認您的 Email 地址，設定驗證碼會寄到該地址",
  },
});

const mfaTexts = defineTexts({
  "field.code.blank": { en: "must not be blank", "zh-TW": "驗證碼不能為空" },
  "field.oneProof": { en: (p) => `give exactly one of ${p.fields}`, "zh-TW": (p) => `請提供 ${p.fields} 其中之一` },
  "field.enrolCode.length": { en: "must be at most 64 characters", "zh-TW": "設定驗證碼不能超過 64 字元" },
  "field.passkeyName.blank": { en: "must not be blank", "zh-TW": "通行金鑰名稱不能為空" },
  "field.passkeyName.length": { en: "must be at most 100 characters", "zh-TW": "通行金鑰名稱不能超過 100 字元" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const mfaCatalogue = { errors: mfaErrors, texts: mfaTexts };
