/**
 * Every e-mail the service sends, in English and zh-TW, as plain text and HTML made from one
 * description: a subject, paragraphs and at most one link. Values from users (names) only ever
 * enter the HTML through `escapeHtml`, so a name with `<script>` arrives as text: there is no
 * way to write raw markup into a mail.
 */
import { escapeHtml } from "../../../http/html";
import type { Lang } from "../../../i18n";
import type { NotificationKind } from "../../../store/outbox";

export interface MailInput {
  kind: NotificationKind;
  lang: Lang;
  /** The recipient's name, as stored; empty for an unverified address (the mail greets without it). */
  name: string;
  /** The row's payload (order id, amounts, payment id…). */
  payload: Record<string, unknown>;
  /** The raw verify/reset token, or the code, for the kinds that carry one. */
  token?: string;
  /** PUBLIC_URL + BASE_PATH, when configured: links point there; without it the mail gives the token. */
  publicBase?: string;
}

export interface Mail {
  subject: string;
  text: string;
  html: string;
}

/**
 * A link carries the mail's token, unless `open` (a page that needs none, e.g. /account/security);
 * without PUBLIC_URL, or without a link, the mail gives the token after `codeLabel`.
 */
type Texts = { subject: string; paragraphs: string[]; link?: { label: string; path: string; open?: boolean }; codeLabel?: string };
type Values = {
  name: string;
  orderId: string;
  amount: string;
  paymentId: string;
  reason: string;
  /** Sign-ins: when the lockout ends, when and from where (device label, address) a sign-in came. */
  lockedUntil: string;
  signedInAt: string;
  /** IDENTITY_LINKED: the provider's label ("Google"). */
  provider: string;
  device: string;
  address: string;
  /** API_KEY_CREATED: the key's name, public prefix and scopes (never the key). */
  keyName: string;
  keyPrefix: string;
  scopes: string;
};
type Template = Record<Lang, (v: Values) => Texts>;

/** The greeting, by name when there is one (never for an address nobody has confirmed: the name is the registrant's free text). */
const hello: Record<Lang, (v: Values) => string> = {
  en: (v) => (v.name ? `Hello ${v.name},` : "Hello,"),
  "zh-TW": (v) => (v.name ? `${v.name} 您好：` : "您好："),
};

const SECURITY_PAGE = "/account/security";

const TEMPLATES: Record<NotificationKind, Template> = {
  LOGIN_LOCKED: {
    en: (v) => ({
      subject: "Sign-ins to your account are paused",
      paragraphs: [
        hello.en(v),
        `Many wrong passwords were tried for your account from several networks, so sign-ins with a password are paused until ${v.lockedUntil}.`,
        "Devices you have signed in from before can still sign in. If these attempts were not yours, your password is still safe; consider making it longer and unique.",
      ],
      link: { label: "Review your account's security", path: SECURITY_PAGE, open: true },
    }),
    "zh-TW": (v) => ({
      subject: "您帳號的登入已暫停",
      paragraphs: [
        hello["zh-TW"](v),
        `有人從多個網路以錯誤的密碼多次嘗試登入您的帳號，因此以密碼登入已暫停至 ${v.lockedUntil}。`,
        "您先前登入過的裝置仍可登入。如果這些嘗試不是您本人，您的密碼仍然安全；建議改用更長且獨一無二的密碼。",
      ],
      link: { label: "檢視帳號安全性", path: SECURITY_PAGE, open: true },
    }),
  },
  NEW_SIGN_IN: {
    en: (v) => ({
      subject: "A new sign-in to your account",
      paragraphs: [
        hello.en(v),
        `Your account was just signed in to from a device or network it had not used before: ${v.device || "an unknown device"}, address ${v.address}, at ${v.signedInAt}.`,
        "If this was you, there is nothing to do. If not, end that session and change your password now.",
      ],
      link: { label: "Review your sessions", path: SECURITY_PAGE, open: true },
    }),
    "zh-TW": (v) => ({
      subject: "您的帳號有新的登入",
      paragraphs: [
        hello["zh-TW"](v),
        `您的帳號剛剛從先前未使用過的裝置或網路登入：${v.device || "未知的裝置"}，位址 ${v.address}，時間 ${v.signedInAt}。`,
        "如果是您本人，無須採取任何行動；如果不是，請立即結束該工作階段並變更密碼。",
      ],
      link: { label: "檢視您的工作階段", path: SECURITY_PAGE, open: true },
    }),
  },
  WELCOME: {
    en: (v) => ({ subject: "Welcome to usersvc", paragraphs: [hello.en(v), "Your account has been created. You can sign in with this e-mail address."] }),
    "zh-TW": (v) => ({ subject: "歡迎加入 usersvc", paragraphs: [hello["zh-TW"](v), "您的帳號已建立，可以使用這個 Email 地址登入。"] }),
  },
  VERIFY_EMAIL: {
    en: (v) => ({
      subject: "Confirm your e-mail address",
      paragraphs: [
        hello.en(v),
        "Please confirm that this address belongs to you. The link works once and expires in 24 hours.",
        "If you did not create an account, ignore this message.",
      ],
      link: { label: "Confirm my address", path: "/account/verify-email" },
      codeLabel: "Your verification code",
    }),
    "zh-TW": (v) => ({
      subject: "請確認您的 Email 地址",
      paragraphs: [hello["zh-TW"](v), "請確認這個地址屬於您。連結只能使用一次，24 小時後失效。", "如果您沒有建立帳號，請忽略這封郵件。"],
      link: { label: "確認我的地址", path: "/account/verify-email" },
      codeLabel: "您的驗證碼",
    }),
  },
  PASSWORD_RESET: {
    en: (v) => ({
      subject: "Reset your password",
      paragraphs: [
        hello.en(v),
        "Someone asked to reset the password of your account. The link works once and expires in 30 minutes.",
        "If it was not you, ignore this message: your password stays as it is.",
      ],
      link: { label: "Choose a new password", path: "/account/reset-password" },
      codeLabel: "Your reset code",
    }),
    "zh-TW": (v) => ({
      subject: "重設您的密碼",
      paragraphs: [hello["zh-TW"](v), "有人要求重設您帳號的密碼。連結只能使用一次，30 分鐘後失效。", "如果不是您本人，請忽略這封郵件，您的密碼不會變更。"],
      link: { label: "設定新密碼", path: "/account/reset-password" },
      codeLabel: "您的重設碼",
    }),
  },
  PASSWORD_CHANGED: {
    en: (v) => ({
      subject: "Your password was changed",
      paragraphs: [
        hello.en(v),
        "The password of your account was just changed, and every earlier sign-in has ended.",
        "If you did not do this, reset your password now and tell your administrator.",
      ],
    }),
    "zh-TW": (v) => ({
      subject: "您的密碼已變更",
      paragraphs: [hello["zh-TW"](v), "您帳號的密碼剛剛已變更，先前的登入皆已失效。", "如果不是您本人操作，請立即重設密碼並通知管理員。"],
    }),
  },
  EMAIL_CHANGED: {
    en: (v) => ({
      subject: "Your e-mail address was changed",
      paragraphs: [
        hello.en(v),
        "The e-mail address of your account was just changed; this address no longer signs in to it, and every earlier sign-in has ended.",
        "If you did not do this, tell your administrator now.",
      ],
    }),
    "zh-TW": (v) => ({
      subject: "您的 Email 地址已變更",
      paragraphs: [hello["zh-TW"](v), "您帳號的 Email 地址剛剛已變更，這個地址已無法再登入該帳號，先前的登入皆已失效。", "如果不是您本人操作，請立即通知管理員。"],
    }),
  },
  USER_UPDATED: {
    en: (v) => ({
      subject: "Your account details were changed",
      paragraphs: [hello.en(v), "The details of your account (name, e-mail address or department) were just changed."],
    }),
    "zh-TW": (v) => ({ subject: "您的帳號資料已變更", paragraphs: [hello["zh-TW"](v), "您帳號的資料（姓名、Email 或部門）剛剛已變更。"] }),
  },
  ORDER_CREATED: {
    en: (v) => ({
      subject: `Order ${v.orderId} received`,
      paragraphs: [hello.en(v), `We received your order ${v.orderId} for a total of ${v.amount}. It waits for payment.`],
    }),
    "zh-TW": (v) => ({ subject: `已收到訂單 ${v.orderId}`, paragraphs: [hello["zh-TW"](v), `我們已收到您的訂單 ${v.orderId}，總金額 ${v.amount}，等待付款中。`] }),
  },
  PAYMENT_SUCCESS: {
    en: (v) => ({
      subject: `Order ${v.orderId} is paid`,
      paragraphs: [hello.en(v), `Your payment of ${v.amount} for order ${v.orderId} succeeded. Payment reference: ${v.paymentId}.`],
    }),
    "zh-TW": (v) => ({ subject: `訂單 ${v.orderId} 已付款`, paragraphs: [hello["zh-TW"](v), `您的訂單 ${v.orderId} 已成功付款 ${v.amount}。付款編號：${v.paymentId}。`] }),
  },
  PAYMENT_FAILED: {
    en: (v) => ({
      subject: `Order ${v.orderId} was not paid`,
      paragraphs: [hello.en(v), `Your order ${v.orderId} for ${v.amount} was cancelled (${v.reason}); its items went back in stock. You may order again.`],
    }),
    "zh-TW": (v) => ({
      subject: `訂單 ${v.orderId} 未付款`,
      paragraphs: [hello["zh-TW"](v), `您的訂單 ${v.orderId}（${v.amount}）已取消（${v.reason === "payment timeout" ? "付款逾時" : v.reason}），商品已退回庫存，您可以重新下單。`],
    }),
  },
  API_KEY_CREATED: {
    en: (v) => ({
      subject: "A new API key was created",
      paragraphs: [
        hello.en(v),
        `An API key "${v.keyName}" (usk_${v.keyPrefix}_…, scopes ${v.scopes}) was just created for your account.`,
        "If you did not do this, revoke it on your account's security page and change your password.",
      ],
    }),
    "zh-TW": (v) => ({
      subject: "已建立新的 API 金鑰",
      paragraphs: [
        hello["zh-TW"](v),
        `您的帳號剛剛建立了 API 金鑰「${v.keyName}」（usk_${v.keyPrefix}_…，權限範圍 ${v.scopes}）。`,
        "如果不是您本人操作，請到帳號的安全性頁面撤銷它並變更密碼。",
      ],
    }),
  },
  MFA_ENABLED: {
    en: (v) => ({
      subject: "Two-step sign-in is on",
      paragraphs: [
        hello.en(v),
        "An authenticator app was just set up for your account: signing in now takes your password and a code from it. Keep your recovery codes somewhere safe.",
        "If you did not do this, reset your password now and tell your administrator.",
      ],
      link: { label: "Review your account's security", path: "/account/security", open: true },
    }),
    "zh-TW": (v) => ({
      subject: "兩步驟登入已啟用",
      paragraphs: [
        hello["zh-TW"](v),
        "您的帳號剛剛設定了驗證器 App：登入時需要密碼以及 App 產生的驗證碼。請妥善保存您的復原碼。",
        "如果不是您本人操作，請立即重設密碼並通知管理員。",
      ],
      link: { label: "檢視帳號安全性", path: "/account/security", open: true },
    }),
  },
  MFA_DISABLED: {
    en: (v) => ({
      subject: "A second factor was removed from your account",
      paragraphs: [
        hello.en(v),
        v.reason === "admin"
          ? "An administrator removed every second factor of your account and ended its sign-ins. Sign in with your password and set up a new one."
          : "A second factor (an authenticator app or a passkey) was just removed from your account.",
        "If you did not expect this, reset your password now and tell your administrator.",
      ],
      link: { label: "Review your account's security", path: "/account/security", open: true },
    }),
    "zh-TW": (v) => ({
      subject: "您帳號的第二步驟驗證已移除",
      paragraphs: [
        hello["zh-TW"](v),
        v.reason === "admin" ? "管理員已移除您帳號的所有第二步驟驗證，並結束所有登入。請使用密碼登入後重新設定。" : "您帳號的一項第二步驟驗證（驗證器 App 或通行金鑰）剛剛已移除。",
        "如果這不在您的預期之中，請立即重設密碼並通知管理員。",
      ],
      link: { label: "檢視帳號安全性", path: "/account/security", open: true },
    }),
  },
  PASSKEY_ADDED: {
    en: (v) => ({
      subject: "A passkey was added to your account",
      paragraphs: [hello.en(v), "A new passkey can now sign in to your account.", "If you did not add it, remove it and reset your password now."],
      link: { label: "Review your account's security", path: "/account/security", open: true },
    }),
    "zh-TW": (v) => ({
      subject: "您的帳號已新增通行金鑰",
      paragraphs: [hello["zh-TW"](v), "一把新的通行金鑰現在可以登入您的帳號。", "如果不是您本人新增，請立即移除它並重設密碼。"],
      link: { label: "檢視帳號安全性", path: "/account/security", open: true },
    }),
  },
  MFA_ENROL_CODE: {
    en: (v) => ({
      subject: "Your code to set up two-step sign-in",
      paragraphs: [
        hello.en(v),
        "Your account must have a second factor. To set up the first one (an authenticator app or a passkey) on your account's security page, enter the code below. It works once and expires in 10 minutes.",
        "If you did not ask for it, someone who knows your password is trying to set one up: change your password now and tell your administrator.",
      ],
      codeLabel: "Your code",
    }),
    "zh-TW": (v) => ({
      subject: "設定兩步驟登入的驗證碼",
      paragraphs: [
        hello["zh-TW"](v),
        "您的帳號必須設定第二步驟驗證。在帳號的安全性頁面設定第一個（驗證器 App 或通行金鑰）時，請輸入下方的驗證碼。驗證碼只能使用一次，10 分鐘後失效。",
        "如果不是您本人索取，代表知道您密碼的人正嘗試設定：請立即變更密碼並通知管理員。",
      ],
      codeLabel: "您的驗證碼",
    }),
  },
  RECOVERY_CODE_USED: {
    en: (v) => ({
      subject: "A recovery code was used",
      paragraphs: [
        hello.en(v),
        "One of your recovery codes was just used to sign in; it no longer works. When few are left, make new ones.",
        "If it was not you, reset your password now and tell your administrator.",
      ],
      link: { label: "Review your account's security", path: "/account/security", open: true },
    }),
    "zh-TW": (v) => ({
      subject: "已使用一組復原碼",
      paragraphs: [hello["zh-TW"](v), "剛剛有人使用您的一組復原碼登入，該組復原碼已失效。剩餘不多時，請產生新的復原碼。", "如果不是您本人，請立即重設密碼並通知管理員。"],
      link: { label: "檢視帳號安全性", path: "/account/security", open: true },
    }),
  },
  IDENTITY_LINKED: {
    en: (v) => ({
      subject: `${v.provider} can now sign in to your account`,
      paragraphs: [
        hello.en(v),
        `Your ${v.provider} account was linked to this account: signing in with ${v.provider} now opens it.`,
        "If you did not do this, unlink it from your account's security page and reset your password now.",
      ],
      link: { label: "Review your account's security", path: "/account/security", open: true },
    }),
    "zh-TW": (v) => ({
      subject: `現在可以使用 ${v.provider} 登入您的帳號`,
      paragraphs: [
        hello["zh-TW"](v),
        `您的 ${v.provider} 帳號已連結到此帳號：使用 ${v.provider} 登入即會進入此帳號。`,
        "如果不是您本人操作，請從帳號安全性頁面取消連結，並立即重設密碼。",
      ],
      link: { label: "檢視帳號安全性", path: "/account/security", open: true },
    }),
  },
};

const text = (value: unknown) => (value === undefined || value === null ? "" : String(value));
/** An instant (epoch ms) as "2026-11-26 03:15 UTC". */
const instant = (value: unknown) => (typeof value === "number" ? `${new Date(value).toISOString().slice(0, 16).replace("T", " ")} UTC` : text(value));

export function renderMail(input: MailInput): Mail {
  const amount = typeof input.payload.totalAmount === "number" ? input.payload.totalAmount.toFixed(2) : text(input.payload.totalAmount);
  const texts = TEMPLATES[input.kind][input.lang]({
    name: input.name,
    orderId: text(input.payload.orderId),
    amount,
    paymentId: text(input.payload.paymentId),
    reason: text(input.payload.reason),
    lockedUntil: instant(input.payload.lockedUntil),
    signedInAt: instant(input.payload.signedInAt),
    device: text(input.payload.device),
    address: text(input.payload.address),
    keyName: text(input.payload.name),
    keyPrefix: text(input.payload.prefix),
    scopes: Array.isArray(input.payload.scopes) ? input.payload.scopes.join(", ") : "",
    provider: text(input.payload.provider),
  });
  const paragraphs = [...texts.paragraphs];
  let link: { label: string; url: string } | undefined;
  if (texts.link?.open) {
    if (input.publicBase) link = { label: texts.link.label, url: `${input.publicBase}${texts.link.path}` };
  } else if (texts.link && input.token && input.publicBase) {
    link = { label: texts.link.label, url: `${input.publicBase}${texts.link.path}?token=${encodeURIComponent(input.token)}` };
  } else if (texts.codeLabel && input.token) {
    paragraphs.push(`${texts.codeLabel}: ${input.token}`);
  }
  const textBody = [...paragraphs, ...(link ? [`${link.label}: ${link.url}`] : []), "", "— usersvc"].join("\n\n");
  const htmlBody = [
    "<!DOCTYPE html>",
    `<html lang="${input.lang}"><head><meta charset="utf-8"><title>${escapeHtml(texts.subject)}</title></head><body>`,
    ...paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`),
    ...(link ? [`<p><a href="${escapeHtml(link.url)}">${escapeHtml(link.label)}</a></p>`, `<p>${escapeHtml(link.url)}</p>`] : []),
    "<p>— usersvc</p>",
    "</body></html>",
  ].join("\n");
  return { subject: texts.subject, text: textBody, html: htmlBody };
}
