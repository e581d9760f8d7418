/**
 * Sign-in with another provider in a real browser (Debian's Chromium driven by playwright-core),
 * against a real server process and a real OpenID Provider on loopback (oidc-provider, with a login
 * form of its own, test/support/openid-provider.ts): /account → "Sign in with Corp" → the
 * provider's form → back on /account/security, signed in, the Corp identity listed; in English and
 * Traditional Chinese. A cancelled sign-in comes back as a sentence, never a code or a stack. axe
 * finds no serious or critical issue, the pages' CSP is never tripped; screenshots in
 * test-artifacts/providers/.
 *
 * Runs under `npm run test:browser` (CONSOLE_BROWSER=1); without Chromium it reports itself skipped.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import AxeBuilder from "@axe-core/playwright";
import type { Browser, Page } from "playwright-core";
import { launchChromium, newWatchedPage, skippedBecause } from "./support";
import { startServer } from "../server-process";
import { type IdpUser, startOpenIdProvider } from "../support/openid-provider";

setDefaultTimeout(60_000);

const ARTIFACTS = resolve(import.meta.dir, "../../test-artifacts/providers");

if (skippedBecause) {
  console.warn(`sign-in with another provider in a real browser: skipped (${skippedBecause})`);
  test.skip(`sign-in with another provider in a real browser: ${skippedBecause}`, () => {});
} else {
  const users: Record<string, IdpUser> = {
    "mei.lin": { email: `mei-${crypto.randomUUID().slice(0, 8)}@corp.example.com`, email_verified: true, name: "Mei Lin" },
    "wang.wei": { email: `wei-${crypto.randomUUID().slice(0, 8)}@corp.example.com`, email_verified: true, name: "王偉" },
  };
  // The provider learns our callback once the server's port is known (it is made at its first request).
  const redirectUris: string[] = [];
  const idp = await startOpenIdProvider({ redirectUris, users, form: "Corp sign-in" });
  // localhost, as PUBLIC_URL names it: the redirect URI registered at the provider is PUBLIC_URL's.
  const server = await startServer((origin) => ({
    PUBLIC_URL: origin.replace("127.0.0.1", "localhost"),
    OIDC_PROVIDERS: "corp",
    OIDC_CORP_ISSUER: idp.issuer,
    OIDC_CORP_CLIENT_ID: idp.clientId,
    OIDC_CORP_CLIENT_SECRET: idp.clientSecret,
    OIDC_CORP_LABEL: "Corp",
  }));
  const base = server.url.replace("127.0.0.1", "localhost");
  redirectUris.push(`${base}/api/auth/oidc/corp/callback`);
  let browser: Browser;
  const cspViolations: string[] = [];

  const newPage = (locale: string) => newWatchedPage(browser, locale, cspViolations);

  /** The page as it is: its screenshot, and axe finds nothing serious or critical (our pages only). */
  async function check(page: Page, name: string, axe = true) {
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    if (!axe) return;
    const results = await new AxeBuilder({ page }).analyze();
    const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    expect(serious.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
  }

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server.stop();
    await idp.stop();
    expect(cspViolations).toEqual([]);
  });

  const texts = {
    en: {
      button: "Sign in with Corp",
      sessions: "Sessions",
      linked: "Linked sign-ins",
      method: "another provider",
      denied: "You cancelled the sign-in at the provider; nothing changed.",
    },
    "zh-TW": { button: "使用 Corp 登入", sessions: "工作階段", linked: "已連結的登入方式", method: "其他登入服務", denied: "您已在登入服務取消登入，未做任何變更。" },
  };

  describe.each([
    ["en", "en-US", "mei.lin"],
    ["zh-TW", "zh-TW", "wang.wei"],
  ] as const)("in %s", (lang, locale, username) => {
    const say = texts[lang];

    test("the sign-in page → Sign in with Corp → Corp's own form → back on /account/security, signed in, Corp listed", async () => {
      const { context, page } = await newPage(locale);
      await page.goto(`${base}/account`);
      const button = page.getByRole("button", { name: say.button });
      await button.waitFor();
      expect(await page.locator("html").getAttribute("lang")).toBe(lang);
      await check(page, `1-sign-in-${lang}`);
      await button.click();

      await page.getByRole("heading", { name: "Corp sign-in" }).waitFor();
      expect(page.url().startsWith(idp.issuer)).toBe(true);
      await page.getByLabel("Username").fill(username);
      await page.getByLabel("Password").fill("anything");
      await check(page, `2-provider-form-${lang}`, false);
      await page.getByRole("button", { name: "Sign in", exact: true }).click();

      await page.getByRole("heading", { level: 2, name: say.sessions }).waitFor();
      await page.getByRole("heading", { level: 2, name: say.linked }).waitFor();
      // Signed in on /account, then handed on to /account/security; the one-time code is gone from the address.
      expect(page.url()).toBe(`${base}/account/security`);
      await page.locator("#identities tbody tr").first().waitFor();
      expect(await page.locator("#identities tbody td").first().textContent()).toBe("Corp");
      expect(await page.locator("#identities tbody td").nth(1).textContent()).toBe(users[username].email ?? "");
      expect(await page.locator("#sessions tbody td").nth(2).textContent()).toBe(say.method);
      await check(page, `3-signed-in-${lang}`);
      await context.close();
    });

    test("cancelled at the provider: back on the sign-in page with a sentence, nobody signed in", async () => {
      const { context, page } = await newPage(locale);
      await page.goto(`${base}/account`);
      await page.getByRole("button", { name: say.button }).click();
      await page.getByRole("heading", { name: "Corp sign-in" }).waitFor();
      await page.getByRole("button", { name: "Cancel" }).click();
      await page.getByRole("alert").getByText(say.denied).waitFor();
      // Back on the page the button was pressed on, the error taken off the address.
      expect(page.url()).toBe(`${base}/account`);
      expect(await page.evaluate(() => sessionStorage.getItem("usersvc.account.session"))).toBeNull();
      await check(page, `4-cancelled-${lang}`);
      await context.close();
    });
  });
}
