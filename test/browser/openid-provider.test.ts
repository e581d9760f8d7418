/**
 * usersvc as an OpenID Provider in a real browser (Debian's Chromium driven by playwright-core):
 * a small app on loopback (openid-client 6: discovery, the code flow with PKCE, userinfo) signs a
 * user in through the real server process with password + authenticator code, the consent screen
 * shows once; a second sign-in (a new browser, password + code again) skips it; withdrawing the
 * app from "Apps with access" on /account/security makes the next sign-in ask again. Axe finds no
 * serious or critical issue on the sign-in and consent pages; no CSP violation; screenshots in
 * test-artifacts/openid-provider/.
 *
 * Runs under `npm run test:browser` (CONSOLE_BROWSER=1); without Chromium it reports itself skipped.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import AxeBuilder from "@axe-core/playwright";
import * as oidc from "openid-client";
import type { Browser, Page } from "playwright-core";
import { launchChromium, skippedBecause } from "./support";
import { ADMIN, freePort, startServer } from "../server-process";
import { codeSequence } from "../support/totp";

setDefaultTimeout(90_000);

const ARTIFACTS = resolve(import.meta.dir, "../../test-artifacts/openid-provider");
const PASSWORD = "Passw0rd!";

if (skippedBecause) {
  console.warn(`OpenID Provider in a real browser: skipped (${skippedBecause})`);
  test.skip(`OpenID Provider in a real browser: ${skippedBecause}`, () => {});
} else {
  const server = await startServer((origin) => ({ OAUTH_SERVER: "on", PUBLIC_URL: origin }));
  const email = `op-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const appPort = freePort();
  const appOrigin = `http://127.0.0.1:${appPort}`;
  let browser: Browser;
  let app: ReturnType<typeof Bun.serve>;
  /** The authenticator's codes, each from a later step than the last (a step is good once). */
  let nextCode: () => Promise<string>;
  const problems: string[] = [];

  const api = async (method: string, path: string, body?: unknown, token = server.token) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as Record<string, unknown> & { data?: Record<string, unknown> } };
  };

  async function newPage(locale = "en-US"): Promise<Page> {
    const context = await browser.newContext({ locale, viewport: { width: 1000, height: 800 } });
    const page = await context.newPage();
    page.on("console", (message) => {
      if (message.type() === "error" || /Content Security Policy/i.test(message.text())) problems.push(`${message.text()} (${message.location().url})`);
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    return page;
  }

  async function check(page: Page, name: string) {
    await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    const results = await new AxeBuilder({ page }).analyze();
    const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    expect(serious.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
  }

  /** On usersvc's sign-in page (reached from the app): password, then the authenticator's code. */
  async function signInWithCode(page: Page, shot?: string) {
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    await page.getByText("Sign in with your account to continue to Team dashboard.").waitFor();
    if (shot) await check(page, shot);
    await page.getByLabel("E-mail", { exact: true }).fill(email);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Second step" }).waitFor();
    await page.getByLabel("Code", { exact: true }).fill(await nextCode());
    await page.getByRole("button", { name: "Verify" }).click();
  }

  /** The app's own page after the callback. */
  const signedInToApp = (page: Page) => page.getByRole("heading", { name: "Team dashboard: signed in as Mei Lin" }).waitFor();

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    expect((await api("POST", "/api/users", { name: "Mei Lin", email, password: PASSWORD })).status).toBe(201);
    // The authenticator app, enrolled through the API (the security page's own test enrols on the page).
    const token = ((await api("POST", "/api/auth/login", { email, password: PASSWORD })).body.data as { token: string }).token;
    const { secret } = (await api("POST", "/api/account/mfa/totp", {}, token)).body as { secret: string };
    nextCode = codeSequence(secret);
    expect((await api("POST", "/api/account/mfa/totp/confirm", { code: await nextCode() }, token)).status).toBe(200);
    const client = (await api("POST", "/api/oauth/clients", { name: "Team dashboard", redirectUris: [`${appOrigin}/callback`], postLogoutRedirectUris: [`${appOrigin}/`] }))
      .body as { clientId: string; clientSecret: string };

    // The app: openid-client against usersvc over loopback (http, so allowInsecureRequests).
    const config = await oidc.discovery(new URL(server.url), client.clientId, client.clientSecret, undefined, { execute: [oidc.allowInsecureRequests] });
    const pending = new Map<string, { verifier: string; nonce: string }>();
    app = Bun.serve({
      port: appPort,
      hostname: "127.0.0.1",
      async fetch(request) {
        const url = new URL(request.url);
        if (url.pathname === "/") {
          const verifier = oidc.randomPKCECodeVerifier();
          const [state, nonce] = [oidc.randomState(), oidc.randomNonce()];
          pending.set(state, { verifier, nonce });
          const to = oidc.buildAuthorizationUrl(config, {
            redirect_uri: `${appOrigin}/callback`,
            scope: "openid profile email",
            code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
            code_challenge_method: "S256",
            state,
            nonce,
          });
          return Response.redirect(to.href, 302);
        }
        if (url.pathname === "/callback") {
          const state = url.searchParams.get("state") ?? "";
          const flow = pending.get(state);
          pending.delete(state);
          if (!flow) return new Response("unknown state", { status: 400 });
          const refused = url.searchParams.get("error");
          if (refused)
            return new Response(
              `<!doctype html><html lang="en"><link rel="icon" href="data:,"><title>Team dashboard</title><h1>Team dashboard: not signed in (${refused})</h1></html>`,
              { headers: { "content-type": "text/html" } },
            );
          const tokens = await oidc.authorizationCodeGrant(config, url, {
            pkceCodeVerifier: flow.verifier,
            expectedState: state,
            expectedNonce: flow.nonce,
            idTokenExpected: true,
          });
          const me = await oidc.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub);
          const html = `<!doctype html><html lang="en"><meta charset="utf-8"><link rel="icon" href="data:,"><title>Team dashboard</title><main><h1>Team dashboard: signed in as ${me.name}</h1><p>${me.email}, amr ${tokens.claims()!.amr}</p></main></html>`;
          return new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
        }
        return new Response("not found", { status: 404 });
      },
    });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    app?.stop(true);
    await server.stop();
    expect(problems).toEqual([]);
  });

  test("password + code, the consent screen once; a second sign-in skips it; withdrawn, the next one asks again", async () => {
    // 1. The first sign-in: the sign-in page, the second step, then the consent screen.
    const first = await newPage();
    await first.goto(appOrigin);
    await signInWithCode(first, "1-sign-in-en");
    await first.getByRole("heading", { level: 1, name: "Allow Team dashboard to use your account?" }).waitFor();
    for (const words of ["Know who you are (your account number)", "See your name", "See your e-mail address and whether it is confirmed"]) await first.getByText(words).waitFor();
    await check(first, "2-consent-en");
    await first.getByRole("button", { name: "Allow" }).click();
    await signedInToApp(first);
    await first.getByText("amr pwd,otp").waitFor();
    await first.screenshot({ path: join(ARTIFACTS, "3-app-signed-in.png") });
    await first.context().close();

    // 2. A second sign-in, in a browser that never signed in: password and code, no consent screen.
    const second = await newPage();
    await second.goto(appOrigin);
    await signInWithCode(second);
    await signedInToApp(second);
    await second.screenshot({ path: join(ARTIFACTS, "4-second-sign-in-no-consent.png") });

    // 3. Apps with access on the security page (the same tab: the sign-in is still its own), then withdraw.
    await second.goto(`${server.url}/account/security#apps`);
    await second.getByRole("heading", { level: 2, name: "Apps with access" }).waitFor();
    await second.getByRole("cell", { name: "Team dashboard", exact: true }).waitFor();
    await check(second, "5-apps-with-access-en");
    await second.getByRole("button", { name: "Withdraw the access of Team dashboard" }).click();
    await second.getByText("Access withdrawn").waitFor();
    await second.getByText("No app has access to your account.").waitFor();
    await second.screenshot({ path: join(ARTIFACTS, "6-withdrawn.png"), fullPage: true });

    // 4. The next sign-in (still signed in at usersvc: no sign-in page) asks again.
    await second.goto(appOrigin);
    await second.getByRole("heading", { level: 1, name: "Allow Team dashboard to use your account?" }).waitFor();
    await second.screenshot({ path: join(ARTIFACTS, "7-consent-asked-again.png") });
    await second.getByRole("button", { name: "Allow" }).click();
    await signedInToApp(second);
    await second.context().close();
  });

  test("in Traditional Chinese: the sign-in and consent screens", async () => {
    const page = await newPage("zh-TW");
    await page.goto(appOrigin);
    await page.getByRole("heading", { level: 1, name: "登入" }).waitFor();
    await page.getByLabel("Email", { exact: true }).fill(email);
    await page.getByLabel("密碼", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "登入", exact: true }).click();
    await page.getByLabel("代碼", { exact: true }).fill(await nextCode());
    await page.getByRole("button", { name: "驗證" }).click();
    // Consented already in English: remembered, straight back to the app.
    await signedInToApp(page);
    // Withdrawn on the security page, the consent screen shows in zh-TW.
    await page.goto(`${server.url}/account/security#apps`);
    await page.getByRole("button", { name: "撤回 Team dashboard 的存取權" }).click();
    await page.getByText("已撤回存取權").waitFor();
    await page.goto(appOrigin);
    await page.getByRole("heading", { level: 1, name: "允許 Team dashboard 使用您的帳號？" }).waitFor();
    await check(page, "8-consent-zh-TW");
    await page.getByRole("button", { name: "拒絕" }).click();
    // Denied: the app hears access_denied at its callback.
    await page.getByRole("heading", { name: "Team dashboard: not signed in (access_denied)" }).waitFor();
    await page.context().close();
  });

  test("the console's Apps screen: the registered app listed; a new one registered, its secret shown once; deleted", async () => {
    const page = await newPage();
    await page.goto(`${server.url}/admin`);
    await page.getByLabel("E-mail").fill(ADMIN.email);
    await page.getByLabel("Password").fill(ADMIN.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "Apps" }).click();
    await page.getByRole("heading", { level: 1, name: "Apps (OpenID Provider clients)" }).waitFor();
    await page.getByRole("cell", { name: "Team dashboard", exact: true }).waitFor();
    await page.getByLabel("Name", { exact: true }).fill("Reporting");
    await page.getByLabel("Redirect URIs", { exact: true }).fill("https://reports.example.com/callback");
    await page.getByRole("checkbox", { name: "users:read" }).check();
    await page.getByRole("button", { name: "Create" }).click();
    await page.getByRole("heading", { name: "Reporting is registered" }).waitFor();
    const shown = await page.locator("code.secret").textContent();
    expect(shown).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await check(page, "9-console-apps-en");
    await page.getByRole("button", { name: "I have copied it" }).click();
    expect(await page.getByText(shown!).count()).toBe(0);
    await page.getByRole("button", { name: "Delete Reporting" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await page.getByRole("cell", { name: "Reporting", exact: true }).waitFor({ state: "detached" });
    await page.context().close();
  });
}
