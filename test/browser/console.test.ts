/**
 * The admin console in a real browser (Debian's Chromium driven by playwright-core) against a
 * real server process run from source, so the bundle-on-demand path is what the browser gets.
 * The journeys an operator takes, axe on every screen (0 serious or critical violations), the
 * page's CSP never tripped, BASE_PATH, and a screenshot of every screen in test-artifacts/console/.
 *
 * Slow (a browser and ~15 s of chart sampling): it runs under `npm run test:browser`
 * (CONSOLE_BROWSER=1); `npm test` reports it skipped. Without Chromium it reports itself skipped.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import AxeBuilder from "@axe-core/playwright";
import type { Browser, Page } from "playwright-core";
import { launchChromium, skippedBecause } from "./support";
import { ADMIN, startServer, type ServerProcess } from "../server-process";
import { STEP_MS, totpAt } from "../support/totp";

setDefaultTimeout(60_000);

export const ARTIFACTS = resolve(import.meta.dir, "../../test-artifacts/console");
const PASSWORD = "Passw0rd!";

const skipped = skippedBecause;

/** JSON over the API, as the test's own ADMIN (or another token). */
async function call(server: ServerProcess, method: string, path: string, body?: unknown, token = server.token) {
  const res = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

async function login(server: ServerProcess, email: string, password = PASSWORD): Promise<string> {
  const res = await fetch(`${server.url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email, password }) });
  return ((await res.json()) as { data: { token: string } }).data.token;
}

if (skipped) {
  console.warn(`console in a real browser: skipped (${skipped})`);
  test.skip(`console in a real browser: ${skipped}`, () => {});
} else {
  // Started before the tests are declared: whether the backups API exists decides a skip.
  const server = await startServer({});
  const backupsApi = (await call(server, "GET", "/api/admin/backups")).status !== 404;
  let browser: Browser;
  let page: Page;
  const cspViolations: string[] = [];
  const seeded: Record<string, { id: number; email: string }> = {};

  const launch = launchChromium;

  async function newPage(locale = "en-US") {
    const ctx = await browser.newContext({ locale, viewport: { width: 1280, height: 860 }, acceptDownloads: true });
    const p = await ctx.newPage();
    p.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    return { ctx, page: p };
  }

  async function signIn(p: Page, base: string, email: string, password: string) {
    await p.goto(`${base}/admin`);
    await p.getByLabel(/^(E-mail|Email)$/).fill(email);
    await p.getByLabel(/^(Password|密碼)$/).fill(password);
    await p.getByRole("button", { name: /^(Sign in|登入)$/ }).click();
  }

  /** Axe on the screen as it is (0 serious or critical), and its screenshot. */
  async function screen(name: string, p = page) {
    await p.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    const results = await new AxeBuilder({ page: p }).analyze();
    const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    expect(serious.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
  }

  const heading = (name: string | RegExp, p = page) => p.getByRole("heading", { level: 1, name }).waitFor();

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    for (const [key, name, department] of [
      ["mei", "Mei Lin", "Sales"],
      ["wei", "Lin Wei", "Ops"],
      ["plain", "Plain User", "Ops"],
    ]) {
      const res = await call(server, "POST", "/api/users", { name, email: `${key}@console.example.com`, department, password: PASSWORD });
      expect(res.status).toBe(201);
      seeded[key] = res.body;
    }
    const product = await call(server, "POST", "/api/products", { name: "Desk lamp", code: "LAMP-1", price: 19.99, stock: 10 });
    await call(server, "POST", "/api/orders", { userId: seeded.wei.id, items: [{ productId: product.body.id, quantity: 2 }] });
    const form = new FormData();
    form.append("file", new File(["quarterly numbers\n"], "report 第一季.txt", { type: "text/plain" }));
    const upload = await fetch(`${server.url}/api/files/upload`, { method: "POST", headers: { authorization: `Bearer ${server.token}` }, body: form });
    expect(upload.status).toBe(201);
    browser = await launch();
    ({ page } = await newPage());
  });

  afterAll(async () => {
    await browser?.close();
    await server.stop();
    expect(cspViolations).toEqual([]);
  });

  describe("console journeys", () => {
    test("a USER's sign-in is refused with a clear message, and no token is kept", async () => {
      await signIn(page, server.url, seeded.plain.email, PASSWORD);
      await page.getByText("This account is not an administrator").waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      await screen("sign-in-refused");
    });

    test("an ADMIN signs in: the users screen with every user and the total; the token is in sessionStorage", async () => {
      await page.getByLabel("Password").fill(ADMIN.password);
      await page.getByLabel("E-mail").fill(ADMIN.email);
      await page.getByRole("button", { name: "Sign in" }).click();
      await heading("Users");
      await page.getByText("4 in total").waitFor();
      expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual(["usersvc.console.token"]);
      await screen("users");
    });

    test("search a seeded user by name: one row, the total says 1", async () => {
      await page.getByLabel("Name").fill("mei");
      await page.getByRole("button", { name: "Search" }).click();
      await page.getByText("1 in total").waitFor();
      expect(await page.locator("tbody tr").allInnerTexts()).toEqual([expect.stringContaining("Mei Lin")]);
      await screen("users-filtered");
    });

    test("an answer the screen cannot show is an error state with its reasons and a retry", async () => {
      await page.goto(`${server.url}/admin#/users?size=500`);
      const alert = page.getByRole("alert");
      await alert.getByText("Could not load: Parameter validation failed").waitFor();
      await alert.getByText("size: must be at most 100").waitFor();
      await alert.getByRole("button", { name: "Try again" }).waitFor();
      await screen("users-error");
      await page.goto(`${server.url}/admin#/users?name=mei`);
      await page.getByText("1 in total").waitFor();
    });

    test("edit with a concurrent change: the 409 is shown, reload brings the new data, then the change saves", async () => {
      await page.getByRole("link", { name: "Mei Lin" }).click();
      await heading("User Mei Lin");
      await page.getByLabel("Department").fill("Research");
      // Someone else renames her meanwhile: the form's version is now stale.
      expect((await call(server, "PATCH", `/api/users/${seeded.mei.id}`, { name: "Mei Lin-Chen" })).status).toBe(200);
      await page.getByRole("button", { name: "Save", exact: true }).click();
      await page.getByText("This user was changed by someone else").waitFor();
      await screen("user-detail-conflict");
      expect((await call(server, "GET", `/api/users/${seeded.mei.id}`)).body.department).toBe("Sales");

      await page.getByRole("button", { name: "Reload the current data" }).click();
      await heading("User Mei Lin-Chen");
      expect(await page.getByLabel("Name", { exact: true }).inputValue()).toBe("Mei Lin-Chen");
      await page.getByLabel("Department").fill("Research");
      await page.getByRole("button", { name: "Save", exact: true }).click();
      await page.getByText("Version 2").waitFor();
      expect((await call(server, "GET", `/api/users/${seeded.mei.id}`)).body).toMatchObject({ name: "Mei Lin-Chen", department: "Research", version: 2 });
      await screen("user-detail");
    });

    test("change roles: make her an ADMIN", async () => {
      await page.getByRole("checkbox", { name: /ADMIN/ }).check();
      await page.getByRole("button", { name: "Save roles" }).click();
      await page.getByText("Version 3").waitFor();
      expect((await call(server, "GET", `/api/users/${seeded.mei.id}`)).body.roles).toEqual(["ADMIN", "USER"]);
    });

    test("deactivate: her token is refused at once (401), and the screen says Disabled", async () => {
      const token = await login(server, seeded.mei.email);
      expect((await call(server, "GET", `/api/users/${seeded.mei.id}`, undefined, token)).status).toBe(200);
      await page.getByRole("button", { name: "Deactivate", exact: true }).click();
      await page.getByRole("button", { name: "Activate", exact: true }).waitFor();
      await screen("user-detail-deactivated");
      expect(
        await page
          .locator(".panel", { has: page.getByRole("heading", { name: "Access" }) })
          .locator(".badge")
          .innerText(),
      ).toBe("Disabled");
      expect((await call(server, "GET", `/api/users/${seeded.mei.id}`, undefined, token)).status).toBe(401);
    });

    test("revoke tokens: the user's earlier token is refused, the user may sign in again", async () => {
      const token = await login(server, seeded.wei.email);
      await page.goto(`${server.url}/admin#/users/${seeded.wei.id}`);
      await heading("User Lin Wei");
      await page.getByRole("button", { name: "Revoke tokens" }).click();
      await page.getByText("Every token of this user was revoked.").waitFor();
      expect((await call(server, "GET", `/api/users/${seeded.wei.id}`, undefined, token)).status).toBe(401);
      expect(await login(server, seeded.wei.email)).toBeTruthy();
    });

    test("sessions: the user's signed-in devices are listed (device, address, last seen, how); End signs that one device out", async () => {
      const signInFrom = async (userAgent: string) => {
        const res = await fetch(`${server.url}/api/auth/login`, {
          method: "POST",
          headers: { "content-type": "application/json", "user-agent": userAgent },
          body: JSON.stringify({ email: seeded.wei.email, password: PASSWORD }),
        });
        return ((await res.json()) as { data: { token: string } }).data.token;
      };
      const laptop = await signInFrom("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36");
      const phone = await signInFrom("Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:128.0) Gecko/20100101 Firefox/128.0");
      await page.goto(`${server.url}/admin#/users/${seeded.wei.id}`);
      // The journey before may have left this very screen open: a hash change alone loads nothing anew.
      await page.reload();
      await heading("User Lin Wei");
      const devices = page.getByRole("table", { name: "Signed-in devices" });
      await devices.getByRole("cell", { name: "Firefox 128 on macOS", exact: true }).waitFor();
      await devices.getByRole("cell", { name: "Chrome 142 on Linux", exact: true }).waitFor();
      expect(await devices.getByRole("cell", { name: "pwd", exact: true }).count()).toBeGreaterThanOrEqual(2);
      await screen("user-detail-sessions");
      await page.getByRole("button", { name: "End the session on Firefox 128 on macOS" }).click();
      await page.getByText("The session was ended: that device is signed out.").waitFor();
      await devices.getByRole("cell", { name: "Firefox 128 on macOS", exact: true }).waitFor({ state: "detached" });
      expect((await call(server, "GET", `/api/users/${seeded.wei.id}`, undefined, phone)).status).toBe(401);
      expect((await call(server, "GET", `/api/users/${seeded.wei.id}`, undefined, laptop)).status).toBe(200);
    });

    test("delete asks first: Escape keeps the user, confirming deletes and returns to the list", async () => {
      const temp = (await call(server, "POST", "/api/users", { name: "Temp Person", email: "temp@console.example.com" })).body;
      await page.goto(`${server.url}/admin#/users/${temp.id}`);
      await heading("User Temp Person");
      await page.getByRole("button", { name: "Delete", exact: true }).click();
      const dialog = page.getByRole("dialog", { name: "Delete user" });
      await dialog.getByText("Delete Temp Person (temp@console.example.com)? This cannot be undone.").waitFor();
      await screen("user-delete-confirm");
      await page.keyboard.press("Escape");
      await dialog.waitFor({ state: "hidden" });
      expect((await call(server, "GET", `/api/users/${temp.id}`)).status).toBe(200);

      await page.getByRole("button", { name: "Delete", exact: true }).click();
      await dialog.getByRole("button", { name: "Delete" }).click();
      await heading("Users");
      expect((await call(server, "GET", `/api/users/${temp.id}`)).status).toBe(404);
    });

    test("the audit log shows the deactivation, by whom", async () => {
      await page.getByRole("link", { name: "Audit log" }).click();
      await heading("Audit log");
      await page.getByLabel("Action").fill("USER_DEACTIVATED");
      await page.getByRole("button", { name: "Search" }).click();
      await page.getByText("1 in total").waitFor();
      const row = await page.locator("tbody tr").first().innerText();
      expect(row).toContain("USER_DEACTIVATED");
      expect(row).toContain(ADMIN.email);
      expect(row).toContain(`User #${seeded.mei.id}`);
      await screen("audit");
    });

    test("by keyboard alone: Tab reaches the navigation with a visible focus ring; Enter opens the screen", async () => {
      await page.getByRole("link", { name: "Users" }).focus();
      await page.keyboard.press("Tab");
      expect(await page.evaluate("document.activeElement?.textContent")).toBe("Departments");
      const ring = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle");
      expect(ring).not.toBe("none");
      await page.keyboard.press("Enter");
      await heading("Departments");
      // The screen's heading takes focus, so the next Tab continues inside the screen.
      for (const until = Date.now() + 2000; (await page.evaluate("document.activeElement?.tagName")) !== "H1" && Date.now() < until; ) await Bun.sleep(50);
      expect(await page.evaluate("document.activeElement?.tagName")).toBe("H1");
      await page.getByRole("cell", { name: "Ops", exact: true }).waitFor();
      await screen("departments");
    });

    test("products and orders", async () => {
      await page.getByRole("link", { name: "Products" }).click();
      await page.getByRole("cell", { name: "Desk lamp", exact: true }).waitFor();
      await screen("products");
      await page.getByRole("link", { name: "Orders" }).click();
      await page.getByRole("cell", { name: "Desk lamp × 2" }).waitFor();
      await page.getByLabel("Status").selectOption("PAID");
      await page.getByText("No results match these filters.").waitFor();
      await page.getByLabel("Status").selectOption("PENDING");
      await page.getByRole("cell", { name: "Desk lamp × 2" }).waitFor();
      await screen("orders");
    });

    test("files: listed, and downloaded under their original name", async () => {
      await page.getByRole("link", { name: "Files" }).click();
      await page.getByRole("cell", { name: "report 第一季.txt", exact: true }).waitFor();
      await screen("files");
      const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download report 第一季.txt" }).click()]);
      expect(download.suggestedFilename()).toBe("report 第一季.txt");
      expect(readFileSync((await download.path())!, "utf8")).toBe("quarterly numbers\n");
    });

    test.skipIf(!backupsApi)("backups: create one, see it listed, download it, delete it after confirmation", async () => {
      await page.getByRole("link", { name: "Backups" }).click();
      await heading("Backups");
      await page.getByRole("button", { name: "Create a backup now" }).click();
      const name = (await page.locator("tbody tr code").first().innerText()).trim();
      expect(name).toMatch(/^usersvc-\d{8}T\d{6}Z.*\.tar\.gz$/);
      await screen("backups");
      const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: `Download ${name}` }).click()]);
      expect(download.suggestedFilename()).toBe(name);
      const bytes = readFileSync((await download.path())!);
      expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b]); // gzip

      await page.getByRole("button", { name: `Delete ${name}` }).click();
      await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
      await page.getByText("Nothing here yet.").waitFor();
      expect((await call(server, "GET", "/api/admin/backups")).body).toEqual([]);
    });

    if (!backupsApi) {
      test("backups: without the backups API the screen says so", async () => {
        console.warn("backups journey skipped: this branch has no /api/admin/backups yet (issue 17)");
        await page.getByRole("link", { name: "Backups" }).click();
        await page.getByText("This server has no backups API.").waitFor();
        await screen("backups");
      });
    }

    test("operations: health with details, and the charts gain points within 15 s", async () => {
      await page.getByRole("link", { name: "Operations" }).click();
      await heading("Operations");
      await page.getByRole("cell", { name: "db" }).waitFor();
      await page.getByText("userCount").waitFor();
      // Every chart gains a point from two samples 5 s apart. (Polled from here: the page's CSP forbids eval.)
      const charts = await page.locator("figure.chart").all();
      expect(charts).toHaveLength(3);
      const pointsOf = () => Promise.all(charts.map(async (chart) => Number(await chart.getAttribute("data-points"))));
      for (const deadline = Date.now() + 15_000; (await pointsOf()).some((n) => n < 1) && Date.now() < deadline; ) await Bun.sleep(250);
      expect((await pointsOf()).every((n) => n >= 1)).toBe(true);
      // Active users: the ADMIN and three seeded users, less the one deactivated above.
      expect(await page.getByTestId("active-users").innerText()).toBe("3");
      await screen("operations");
    });

    test("an ADMIN with an authenticator app signs in with password + code; sees a user's second factors and removes them all", async () => {
      /** A user with TOTP on, through the API: the secret and the token it was enrolled with. */
      async function withTotp(name: string, email: string, roles = ["USER"]) {
        const made = await call(server, "POST", "/api/users", { name, email, password: PASSWORD });
        expect((await call(server, "PUT", `/api/users/${made.body.id}/roles`, { roles })).status).toBe(200);
        const token = await login(server, email);
        const started = await call(server, "POST", "/api/account/mfa/totp", undefined, token);
        expect(started.status).toBe(200);
        // The previous step's code (accepted: ±1 step), so the current step's is still unused for the sign-in.
        const confirmed = await call(server, "POST", "/api/account/mfa/totp/confirm", { code: totpAt(started.body.secret, Date.now() - STEP_MS) }, token);
        expect(confirmed.status).toBe(200);
        return { id: made.body.id as number, secret: started.body.secret as string, token };
      }
      const guarded = await withTotp("Guarded Admin", "guarded@console.example.com", ["USER", "ADMIN"]);
      const holder = await withTotp("Lost Phone", "lost-phone@console.example.com");

      const p = await newPage();
      await signIn(p.page, server.url, "guarded@console.example.com", PASSWORD);
      // The password alone is not enough: the second step asks for the code, and no token is kept yet.
      await p.page.getByLabel("Code").waitFor();
      expect(await p.page.evaluate(() => sessionStorage.length)).toBe(0);
      await screen("sign-in-second-step", p.page);
      await p.page.getByLabel("Code").fill(totpAt(guarded.secret, Date.now()));
      await p.page.getByRole("button", { name: "Sign in" }).click();
      await heading("Users", p.page);

      await p.page.goto(`${server.url}/admin#/users/${holder.id}`);
      await heading("User Lost Phone", p.page);
      const panel = p.page.getByRole("region", { name: "Second factors" });
      await panel.getByText(/^Authenticator app: Authenticator app · /).waitFor();
      await panel.getByText(/^Recovery codes: 10 of 10 left · /).waitFor();
      await screen("user-detail-factors", p.page);
      await panel.getByRole("button", { name: "Remove all second factors" }).click();
      const dialog = p.page.getByRole("dialog", { name: "Remove all second factors" });
      await dialog.getByText("Remove every second factor of Lost Phone (lost-phone@console.example.com)?", { exact: false }).waitFor();
      await dialog.getByRole("button", { name: "Remove all second factors" }).click();
      await panel.getByText("No second factor: a password alone signs in.").waitFor();
      await p.page.getByText("Every second factor of this user was removed.").waitFor();
      // The user's sessions ended with the factors.
      expect((await call(server, "GET", "/api/account/mfa", undefined, holder.token)).status).toBe(401);
      expect((await call(server, "GET", `/api/users/${holder.id}/mfa`)).body).toEqual([]);
      await screen("user-detail-factors-removed", p.page);
      await p.ctx.close();
    });

    test("sign out; and a 401 ends the session: back to sign-in, saying why", async () => {
      const other = await call(server, "POST", "/api/users", { name: "Second Admin", email: "second@console.example.com", password: PASSWORD });
      await call(server, "PUT", `/api/users/${other.body.id}/roles`, { roles: ["USER", "ADMIN"] });
      const second = await newPage();
      // Signing out first: back to the form, nothing kept.
      await signIn(second.page, server.url, "second@console.example.com", PASSWORD);
      await heading("Users", second.page);
      await second.page.getByRole("button", { name: "Sign out" }).click();
      await heading("Sign in to the console", second.page);
      expect(await second.page.evaluate(() => sessionStorage.length)).toBe(0);

      await signIn(second.page, server.url, "second@console.example.com", PASSWORD);
      // Loaded, so no request of this screen is still in flight when the token dies.
      await second.page.getByText(/\d+ in total/).waitFor();
      expect((await call(server, "POST", `/api/users/${other.body.id}/revoke-tokens`)).status).toBe(204);
      await second.page.getByRole("link", { name: "Departments" }).click();
      await second.page.getByText("Your session has ended. Please sign in again.").waitFor();
      expect(await second.page.evaluate(() => sessionStorage.length)).toBe(0);
      await screen("sign-in-expired", second.page);
      await second.ctx.close();
    });

    test("Traditional Chinese by the browser's language, with the API's words", async () => {
      const zh = await newPage("zh-TW");
      await zh.page.goto(`${server.url}/admin`);
      await heading("登入管理主控台", zh.page);
      await screen("sign-in-zh-TW", zh.page);
      await signIn(zh.page, server.url, ADMIN.email, ADMIN.password);
      await heading("使用者", zh.page);
      await zh.page.getByRole("link", { name: "Lin Wei" }).click();
      await zh.page.getByRole("heading", { name: "帳號存取" }).waitFor();
      await zh.page.getByRole("button", { name: "撤銷權杖" }).waitFor();
      await screen("user-detail-zh-TW", zh.page);
      // The API's own messages arrive in the same language.
      await zh.page.getByLabel("Email").fill(seeded.plain.email);
      await zh.page.getByRole("button", { name: "儲存", exact: true }).click();
      await zh.page.getByText(`Email 已存在: ${seeded.plain.email}`).waitFor();
      await zh.ctx.close();
    });
  });

  describe("under BASE_PATH=/svc", () => {
    let prefixed: ServerProcess;
    beforeAll(async () => {
      prefixed = await startServer({ BASE_PATH: "/svc" });
    });
    afterAll(() => prefixed?.stop());

    test("the console loads from /svc/admin and signs in", async () => {
      const p = await newPage();
      await signIn(p.page, prefixed.url, ADMIN.email, ADMIN.password);
      await heading("Users", p.page);
      await p.page.getByText("1 in total").waitFor();
      expect(p.page.url()).toStartWith(`${prefixed.url}/admin`);
      await screen("users-base-path", p.page);
      await p.ctx.close();
    });
  });
}
