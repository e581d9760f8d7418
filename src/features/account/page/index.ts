/**
 * The two small open pages that complete the e-mail flows in a browser: plain HTML in the
 * browser's language (Accept-Language), one embedded script and one stylesheet, nothing from
 * anywhere else. Every text is escaped on the way in, the token is read by the script from
 * the page's own address and never written into the HTML.
 */
import type { Lang } from "../../../i18n";
import type { PasswordPolicy } from "../../../security/password-policy";
import { pagePolicy } from "../../../http/security-headers";
import { escapeHtml } from "../../../http/html";
import type { PageAssets } from "../../../http/page-bundle";
import script from "./account.js" with { type: "text" };
import styles from "./account.css" with { type: "text" };

export { script, styles };

/** The pages' complete policy: their own script and stylesheet, calls to this service, and the empty data: icon (no /favicon.ico request). */
export const ACCOUNT_PAGE_POLICY = pagePolicy({ script: ["'self'"], style: ["'self'"], img: ["data:"], connect: ["'self'"], form: ["'self'"] });

export type AccountPage = "verify-email" | "reset-password";

type Field = { name: string; label: string; hint?: string };
type PageTexts = { title: string; intro: string; button: string; done: string; fields: Field[] };
type Common = { noToken: string; failed: string };

const COMMON: Record<Lang, Common> = {
  en: { noToken: "This link has no token. Open the link from your e-mail again.", failed: "The service could not be reached. Try again." },
  "zh-TW": { noToken: "此連結缺少權杖，請重新開啟郵件中的連結。", failed: "無法連線到服務，請再試一次。" },
};

const PAGES: Record<AccountPage, Record<Lang, PageTexts>> = {
  "verify-email": {
    en: {
      title: "Confirm your e-mail address",
      intro: "Confirm that this e-mail address is yours.",
      button: "Confirm my address",
      done: "Your e-mail address is confirmed. You can close this page.",
      fields: [],
    },
    "zh-TW": { title: "確認您的 Email 地址", intro: "請確認這個 Email 地址屬於您。", button: "確認我的地址", done: "您的 Email 地址已確認，可以關閉此頁面。", fields: [] },
  },
  "reset-password": {
    en: {
      title: "Choose a new password",
      intro: "Choose the new password of your account.",
      button: "Set the new password",
      done: "Your password is changed. Sign in with the new password.",
      fields: [
        { name: "newPassword", label: "New password", hint: "8 to 20 characters, with a lowercase and an uppercase letter, a digit and one of @$!%*?&" },
        { name: "confirmNewPassword", label: "Repeat the new password" },
      ],
    },
    "zh-TW": {
      title: "設定新密碼",
      intro: "請設定您帳號的新密碼。",
      button: "設定新密碼",
      done: "您的密碼已變更，請使用新密碼登入。",
      fields: [
        { name: "newPassword", label: "新密碼", hint: "8-20 個字元，需包含大小寫字母、數字及 @$!%*?& 其中之一" },
        { name: "confirmNewPassword", label: "再次輸入新密碼" },
      ],
    },
  },
};

/** The new-password hint under PASSWORD_POLICY=strict, instead of the seed's rules in PAGES. */
const STRICT_HINT: Record<Lang, string> = {
  en: "8 to 128 characters; a phrase of several words is best. Common passwords and ones containing your e-mail address are refused.",
  "zh-TW": "8-128 個字元，建議使用由數個詞組成的句子；常見的密碼及包含您 Email 的密碼無法使用。",
};

const API: Record<AccountPage, string> = { "verify-email": "/api/auth/verify-email/confirm", "reset-password": "/api/auth/password-reset/confirm" };

/** Every account page's document start: its language and title, no referrer, the empty icon, then `assets` (already escaped). */
const pageHead = (lang: Lang, title: string, assets: string) => `<!DOCTYPE html>
<html lang="${lang}">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <meta name="referrer" content="no-referrer" />
  <title>${escapeHtml(title)}</title>
  <link rel="icon" href="data:," />
  ${assets}
</head>`;

/** The account pages' stylesheet, under BASE_PATH. */
const stylesheet = (basePath: string) => `<link rel="stylesheet" href="${escapeHtml(basePath)}/account/assets/account.css" />`;

export function renderAccountPage(page: AccountPage, lang: Lang, basePath: string, policy: PasswordPolicy = "seed"): string {
  const texts = PAGES[page][lang];
  const common = COMMON[lang];
  const e = escapeHtml;
  // The strict policy's schema bounds a password at 256 UTF-16 units (128 characters).
  const maxLength = policy === "strict" ? 256 : 20;
  const fields = texts.fields.map((field) => {
    const text = field.hint && policy === "strict" ? STRICT_HINT[lang] : field.hint;
    const hint = text ? `\n    <p class="hint" id="${field.name}-hint">${e(text)}</p>` : "";
    const described = text ? ` aria-describedby="${field.name}-hint"` : "";
    return `    <label for="${field.name}">${e(field.label)}</label>
    <input id="${field.name}" name="${field.name}" type="password" autocomplete="new-password" required maxlength="${maxLength}"${described} />${hint}`;
  });
  return `${pageHead(lang, texts.title, stylesheet(basePath))}
<body>
  <main>
  <h1>${e(texts.title)}</h1>
  <p>${e(texts.intro)}</p>
  <form data-api="${e(basePath + API[page])}" data-done="${e(texts.done)}" data-failed="${e(common.failed)}" data-no-token="${e(common.noToken)}" novalidate>
${fields.join("\n")}
    <button type="submit">${e(texts.button)}</button>
  </form>
  <div id="status" tabindex="-1" hidden></div>
  </main>
  <script src="${e(basePath)}/account/assets/account.js"></script>
</body>
</html>`;
}

/** Why the setup link's page cannot make an ADMIN: no token given (404), a dead token (410), or an ADMIN exists (410, whatever the token). */
export type SetupUnavailable = "none" | "dead" | "done";

type UnavailableTexts = { title: string; lines: string[]; signIn?: string };

/** `{command}` stands for the command that prints a fresh link. */
const SETUP_UNAVAILABLE: Record<SetupUnavailable, Record<Lang, UnavailableTexts>> = {
  none: {
    en: {
      title: "This page needs the setup link",
      lines: [
        "This page needs the setup link's token.",
        "Open the link the server wrote to its standard error when it started, or run {command} on the server for a fresh one (it works once, for 1 hour).",
      ],
    },
    "zh-TW": {
      title: "此頁面需要設定連結",
      lines: ["此頁面需要設定連結中的權杖。", "請開啟伺服器啟動時輸出到標準錯誤（stderr）的連結，或在伺服器上執行 {command} 取得新連結（僅能使用一次，有效 1 小時）。"],
    },
  },
  dead: {
    en: {
      title: "This setup link no longer works",
      lines: [
        "This setup link no longer works: it was used already, has expired (a link lasts 1 hour), or a newer link replaced it.",
        "Run {command} on the server for a fresh one (it works once, for 1 hour).",
      ],
    },
    "zh-TW": {
      title: "此設定連結已失效",
      lines: ["此設定連結已失效：它已被使用、已過期（連結有效 1 小時），或已被較新的連結取代。", "請在伺服器上執行 {command} 取得新連結（僅能使用一次，有效 1 小時）。"],
    },
  },
  done: {
    en: { title: "Setup is complete", lines: ["Setup is complete: an administrator exists, so this link no longer works."], signIn: "Sign in to the admin console" },
    "zh-TW": { title: "設定已完成", lines: ["設定已完成：已有管理員，因此此連結已失效。"], signIn: "登入管理主控台" },
  },
};

/** The setup link's page when it cannot make an ADMIN: why, and what to do instead (a fresh link, or the console's sign-in). No script. */
export function renderSetupUnavailable(reason: SetupUnavailable, lang: Lang, basePath: string): string {
  const e = escapeHtml;
  const texts = SETUP_UNAVAILABLE[reason][lang];
  const lines = texts.lines.map((line) => `  <p>${e(line).replace("{command}", "<code>usersvc setup-link</code>")}</p>`);
  if (texts.signIn) lines.push(`  <p><a href="${e(basePath)}/admin">${e(texts.signIn)}</a></p>`);
  return `${pageHead(lang, texts.title, stylesheet(basePath))}
<body>
  <main>
  <h1>${e(texts.title)}</h1>
${lines.join("\n")}
  </main>
</body>
</html>`;
}

/** The pages the bundled script draws (ui/main.tsx): first-run setup, the sign-in (/account), the security page, and an app's sign-in and consent. */
export type AppPage = "setup" | "security" | "sign-in" | "authorize";

const APP_TEXTS: Record<AppPage, Record<Lang, { title: string; noScript: string }>> = {
  setup: {
    en: { title: "Create the first administrator", noScript: "This page needs JavaScript." },
    "zh-TW": { title: "建立第一位管理員", noScript: "此頁面需要啟用 JavaScript。" },
  },
  security: {
    en: { title: "Account security", noScript: "This page needs JavaScript." },
    "zh-TW": { title: "帳號安全", noScript: "此頁面需要啟用 JavaScript。" },
  },
  "sign-in": {
    en: { title: "Sign in", noScript: "This page needs JavaScript." },
    "zh-TW": { title: "登入", noScript: "此頁面需要啟用 JavaScript。" },
  },
  authorize: {
    en: { title: "Sign in", noScript: "This page needs JavaScript." },
    "zh-TW": { title: "登入", noScript: "此頁面需要啟用 JavaScript。" },
  },
};

/**
 * The shell of a bundled page: its assets (linked by hash), the base path, page and policy in data
 * attributes (and `data-provider` where the server is an OpenID Provider: Apps with access); no inline script.
 */
export function renderAppShell(page: AppPage, lang: Lang, basePath: string, assets: PageAssets, policy: PasswordPolicy = "seed", provider = false): string {
  const e = escapeHtml;
  const texts = APP_TEXTS[page][lang];
  const href = (name: keyof PageAssets) => e(`${basePath}/account/assets/${name}?v=${assets[name].hash}`);
  return `${pageHead(lang, texts.title, `<link rel="stylesheet" href="${href("app.css")}" />\n  <script type="module" src="${href("app.js")}"></script>`)}
<body>
  <div id="app" data-page="${page}" data-base-path="${e(basePath)}" data-policy="${policy}"${provider ? ' data-provider="on"' : ""}></div>
  <noscript>${e(texts.noScript)}</noscript>
</body>
</html>`;
}
