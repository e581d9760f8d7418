/**
 * The account pages: their answers (one complete CSP, no inline script, nothing from elsewhere,
 * BASE_PATH in every link, the browser's language), and in headless Chromium against the real
 * program (src/main.ts with SMTP_URL, PUBLIC_URL and BASE_PATH): the links from real mails open
 * the pages, the address gets verified, a new password is set by keyboard alone, and the new
 * password logs in; with no CSP violation or failed load on the way.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium as playwright, type Browser, type Page } from "playwright-core";
import { issueSetupLink } from "../src/features/auth/first-run";
import type { TokenResponse } from "../src/features/auth/model";
import { jsonOf, makeTestApp, validRegistration, type TestApp } from "./helpers";
import { startServer, type ServerProcess } from "./server-process";
import { linkOf, smtpUnavailable, startMailbox, type Mailbox } from "./smtp-server";

setDefaultTimeout(60_000);

describe("the pages' answers", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await makeTestApp({ BASE_PATH: "/svc" });
  });
  afterAll(() => t.close());

  /** An open page: 200, HTML, with one complete policy of its own (its scripts 'self', framing denied, nothing unsafe). */
  async function page(path: string) {
    const res = await t.request("GET", path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const policy = res.headers.get("content-security-policy")!;
    expect(policy.split(", ")).toHaveLength(1);
    expect(policy).toContain("script-src 'self';");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toContain("unsafe");
    return res;
  }

  test("open, HTML with one complete policy of their own: script-src 'self', framing denied, no inline script", async () => {
    for (const path of ["/account/verify-email?token=abc", "/account/reset-password"]) {
      const res = await page(path);
      // Every script is a file of ours, under BASE_PATH; nothing is loaded from another host.
      expect([...res.text.matchAll(/<script([^>]*)>/g)].map((m) => m[1])).toEqual([' src="/svc/account/assets/account.js"']);
      expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
      expect(res.text).toContain('href="/svc/account/assets/account.css"');
      expect(res.text).toContain('data-api="/svc/api/auth/');
      // The token stays out of the HTML: the script reads it from the address.
      expect(res.text).not.toContain("abc");
    }
    const script = await t.request("GET", "/account/assets/account.js");
    expect([script.status, script.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"]);
    expect((await t.request("GET", "/account/assets/account.css")).status).toBe(200);
  });

  /** A bundled asset, straight from the app (assets are no operations of the API document). */
  const asset = (path: string) => t.app.handle(new Request(`http://localhost${path}`));

  /** The setup page's address with a live token (no ADMIN exists here): the page itself, not the one saying why not. */
  const setupPath = async () => {
    const issued = await issueSetupLink(t.database, t.config, new Date(), true);
    return `/account/setup?token=${"link" in issued && new URL(issued.link).searchParams.get("token")}`;
  };

  test("the setup and security pages: the bundled script and stylesheet by hash under BASE_PATH, one complete policy, no inline script", async () => {
    const setup = await setupPath();
    for (const path of ["/account/security", setup]) {
      const res = await page(path);
      const scripts = [...res.text.matchAll(/<script([^>]*)>([^<]*)<\/script>/g)];
      expect(scripts.map((m) => [m[1], m[2]])).toEqual([[expect.stringMatching(/^ type="module" src="\/svc\/account\/assets\/app\.js\?v=\w+"$/), ""]]);
      expect(res.text).toMatch(/href="\/svc\/account\/assets\/app\.css\?v=\w+"/);
      expect(res.text).toContain('data-base-path="/svc"');
      expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
      expect(res.text).not.toContain(setup.split("=")[1]);
    }
    const script = await asset(/src="(\/svc\/account\/assets\/app\.js\?v=\w+)"/.exec((await t.request("GET", "/account/security")).text)![1]);
    expect([script.status, script.headers.get("content-type"), script.headers.get("cache-control")]).toEqual([
      200,
      "text/javascript; charset=utf-8",
      "public, max-age=31536000, immutable",
    ]);
    expect((await asset("/svc/account/assets/app.css")).status).toBe(200);
    expect((await asset("/svc/account/assets/other.js")).status).toBe(404);
  });

  test("the setup and security pages in English and Traditional Chinese, by Accept-Language", async () => {
    const zh = { headers: { "accept-language": "zh-TW,zh;q=0.9" } };
    const titles = async (path: string, options = {}) => {
      const res = await t.request("GET", path, options);
      return [/<html lang="([^"]+)">/.exec(res.text)![1], /<title>([^<]+)<\/title>/.exec(res.text)![1]];
    };
    expect(await titles("/account/security")).toEqual(["en", "Account security"]);
    expect(await titles("/account/security", zh)).toEqual(["zh-TW", "帳號安全"]);
    const setup = await setupPath();
    expect(await titles(setup)).toEqual(["en", "Create the first administrator"]);
    expect(await titles(setup, zh)).toEqual(["zh-TW", "建立第一位管理員"]);
    // Both languages' texts are in the bundle the page runs.
    const bundle = await (await asset("/svc/account/assets/app.js")).text();
    for (const text of ["End all other sessions", "結束其他所有工作階段", "Add a passkey", "新增通行金鑰"]) expect(bundle).toContain(text);
  });

  test("labelled fields, in the browser's language", async () => {
    const en = await t.request("GET", "/account/reset-password");
    expect(en.text).toContain('<html lang="en">');
    expect(en.text).toContain('<label for="newPassword">New password</label>');
    expect(en.text).toContain('<label for="confirmNewPassword">Repeat the new password</label>');
    expect(en.text).toContain('aria-describedby="newPassword-hint"');
    const zh = await t.request("GET", "/account/reset-password", { headers: { "accept-language": "zh-TW,zh;q=0.9" } });
    expect(zh.text).toContain('<html lang="zh-TW">');
    expect(zh.text).toContain('<label for="newPassword">新密碼</label>');
  });
});

const chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(existsSync);
const unavailable = smtpUnavailable() ?? (chromium ? undefined : "chromium is not installed (Debian package chromium)");
if (unavailable) console.warn(`the account pages in Chromium: SKIPPED, ${unavailable}`);

describe.skipIf(Boolean(unavailable))("in Chromium, from real mails", () => {
  let mailbox: Mailbox;
  let server: ServerProcess;
  let browser: Browser;

  beforeAll(async () => {
    mailbox = await startMailbox();
    server = await startServer((origin) => ({ SMTP_URL: mailbox.url, PUBLIC_URL: origin, BASE_PATH: "/svc" }));
    browser = await playwright.launch({ executablePath: chromium, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await mailbox?.close();
  });

  const api = (path: string, body: unknown, token?: string) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  const mailWith = async (to: string, subject: string) => {
    for (let i = 0; i < 10; i++) {
      const mail = (await mailbox.waitFor(to, i + 1)).find((m) => m.subject === subject);
      if (mail) return mail;
    }
    throw new Error(`no mail "${subject}" for ${to}`);
  };

  /** The status region's text once it shows `kind` (success or error). */
  async function statusText(page: Page, kind: "success" | "error") {
    await page.locator(`#status.${kind}`).waitFor();
    return page.locator("#status").textContent();
  }

  /** A page that records every CSP violation, script error and failed load. */
  async function watchedPage(locale = "en-US"): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ locale });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("console", (message) => {
      // A 400 from the API is an answer the page shows (checked above); anything else is a problem.
      if (/^Failed to load resource: the server responded with a status of 400/.test(message.text())) return;
      if (message.type() === "error" || /Content Security Policy/i.test(message.text())) problems.push(message.text());
    });
    page.on("pageerror", (error) => problems.push(error.message));
    page.on("requestfailed", (request) => problems.push(`failed: ${request.url()}`));
    page.on("response", (response) => response.status() >= 400 && !response.url().includes("/api/") && problems.push(`${response.status()} ${response.url()}`));
    return { page, problems };
  }

  test("the verification link from the welcome mail verifies the address", async () => {
    const email = `pages-verify-${crypto.randomUUID().slice(0, 8)}@example.com`;
    expect((await api("/api/auth/register", validRegistration(email))).status).toBe(201);
    const link = linkOf(await mailWith(email, "Confirm your e-mail address"));
    expect(link).toStartWith(`${server.url}/account/verify-email?token=`);

    const { page, problems } = await watchedPage();
    await page.goto(link);
    await page.getByRole("button", { name: "Confirm my address" }).click();
    expect(await statusText(page, "success")).toBe("Your e-mail address is confirmed. You can close this page.");
    // The outcome has the focus, so a screen reader announces it.
    expect(await page.evaluate("document.activeElement?.id")).toBe("status");
    const login = await api("/api/auth/login", { email, password: "Passw0rd!" });
    expect((await jsonOf<{ data: TokenResponse }>(login)).data.user.emailVerified).toBe(true);
    // The link works once: opened again, the page says so.
    await page.goto(link);
    await page.getByRole("button", { name: "Confirm my address" }).click();
    expect(await statusText(page, "error")).toBe("The link is invalid, used or expired; ask for a new one");
    expect(problems).toEqual([]);
  });

  test("the reset link from a real mail: a new password set by keyboard alone, in zh-TW, then it logs in", async () => {
    const email = `pages-reset-${crypto.randomUUID().slice(0, 8)}@example.com`;
    expect((await api("/api/auth/register", validRegistration(email))).status).toBe(201);
    expect((await api("/api/auth/password-reset/request", { email })).status).toBe(200);
    const link = linkOf(await mailWith(email, "Reset your password"));
    expect(link).toStartWith(`${server.url}/account/reset-password?token=`);

    const { page, problems } = await watchedPage("zh-TW");
    await page.goto(link);
    expect(await page.locator("h1").textContent()).toBe("設定新密碼");
    // Keyboard only: Tab to each labelled field, type, Enter submits.
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement?.id")).toBe("newPassword");
    await page.keyboard.type("weak");
    await page.keyboard.press("Tab");
    await page.keyboard.type("weak");
    await page.keyboard.press("Enter");
    // A rule the password breaks is shown, in the page's language, and the form stays.
    expect(await statusText(page, "error")).toContain("密碼長度必須在 8-20 字元之間");
    await page.getByLabel("新密碼", { exact: true }).fill("Fresh@Start1!");
    await page.getByLabel("再次輸入新密碼").fill("Fresh@Start1!");
    await page.getByLabel("再次輸入新密碼").press("Enter");
    expect(await statusText(page, "success")).toBe("您的密碼已變更，請使用新密碼登入。");
    expect(problems).toEqual([]);

    expect((await api("/api/auth/login", { email, password: "Passw0rd!" })).status).toBe(401);
    expect((await api("/api/auth/login", { email, password: "Fresh@Start1!" })).status).toBe(200);
    expect((await mailWith(email, "Your password was changed")).to).toMatchObject({ value: [{ address: email }] });
  });
});
