/**
 * First run: the one-time setup link that lets a newcomer create the first ADMIN.
 * Through app.handle on every leg: the link's token makes an ADMIN who is signed in (a session,
 * the login answer), works once, expires after an hour, is void once any ADMIN exists, and there is
 * one at a time (a start leaves another instance's live token alone; setup-link replaces it).
 * Then the real program on the native leg: a fresh data folder's stderr carries the link (outside
 * the JSON log on stdout), a second instance on the same database prints none, `usersvc
 * setup-link` prints a fresh one, the page and the API make the ADMIN who signs in to /admin, the
 * page then says setup is complete and a second use is 400; a restart, or ADMIN_EMAIL, prints no link.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AuditEntry } from "../src/features/audit/model";
import { outbox } from "../src/db/schema";
import { issueSetupLink } from "../src/features/auth/first-run";
import type { TokenResponse } from "../src/features/auth/model";
import type { Session } from "../src/features/sessions/model";
import { afterAll, beforeAll, describe, expect, leg, test } from "./legs";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { expectFailure, invalidBody } from "./scenario";
import { linesOf, serveProgram as serve, program, stderrLines } from "./support/program";

const PASSWORD = "Setup@Pass1!";
const INVALID_TOKEN = { message: "The link is invalid, used or expired; ask for a new one", errorCode: "INVALID_TOKEN" };
const HOUR = 60 * 60 * 1000;

const tokenOf = (link: string) => new URL(link).searchParams.get("token")!;

/** A fresh link's token for the app's database, as a start (or, with `replace`, `usersvc setup-link`) makes it. */
async function issue(t: TestApp, at = Date.now(), replace = false): Promise<string> {
  const issued = await issueSetupLink(t.database, t.config, new Date(at), replace);
  if (!("link" in issued)) throw new Error(`no link: ${JSON.stringify(issued)}`);
  return tokenOf(issued.link);
}

const ZH = { headers: { "accept-language": "zh-TW,zh;q=0.9" } };
const SPENT = "This setup link no longer works";
const COMPLETE = "Setup is complete: an administrator exists, so this link no longer works.";

/**
 * The setup page's answer when its link cannot make an ADMIN: the status, in the account pages'
 * style (their stylesheet under BASE_PATH, their CSP, no script at all), and its visible text.
 */
function pageWithout(res: Awaited<ReturnType<TestApp["request"]>>, status: 404 | 410, basePath = "") {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(res.headers.get("content-security-policy")).toContain("script-src 'self';");
  expect(res.text).not.toContain("<script");
  expect(res.text).toContain(`<link rel="stylesheet" href="${basePath}/account/assets/account.css" />`);
  return res.text
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .replaceAll("&#39;", "'");
}

const setup = (t: TestApp, token: string, email = "first-admin@example.com", extra: Record<string, unknown> = {}) =>
  t.request<{ data: TokenResponse }>("POST", "/api/account/setup", { body: { token, name: "First Admin", email, password: PASSWORD, ...extra } });

describe("the setup token through the API", () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await makeTestApp({ BASE_PATH: "/svc" });
  });
  afterAll(() => t.close());

  test("while no ADMIN exists the open status says so; the link names /account/setup under BASE_PATH", async () => {
    const status = await t.request("GET", "/api/account/setup");
    expect([status.status, status.body]).toEqual([200, { setupRequired: true }]);
    const issued = await issueSetupLink(t.database, t.config, new Date(), false);
    expect("link" in issued && issued.link).toMatch(/^http:\/\/localhost:8080\/svc\/account\/setup\?token=[A-Za-z0-9_-]{43}$/);
    token = tokenOf((issued as { link: string }).link);
    // One at a time: another start finds the live token and leaves it (nothing to print but its expiry).
    const again = await issueSetupLink(t.database, t.config, new Date(), false);
    expect(again).toEqual({ liveUntil: expect.any(Date) });
  });

  test("the link's page: a live token gets the setup page (looking spends nothing); no token is 404 saying how to get one", async () => {
    for (let look = 0; look < 2; look++) {
      const page = await t.request("GET", `/account/setup?token=${token}`);
      expect([page.status, /<title>([^<]+)<\/title>/.exec(page.text)?.[1]]).toEqual([200, "Create the first administrator"]);
    }
    const none = pageWithout(await t.request("GET", "/account/setup"), 404, "/svc");
    expect(none).toContain("This page needs the setup link's token.");
    expect(none).toContain("usersvc setup-link");
    expect(pageWithout(await t.request("GET", "/account/setup?token=", ZH), 404, "/svc")).toContain("usersvc setup-link");
  });

  test("the token makes the first ADMIN, verified and signed in: 201 with the login answer and a session", async () => {
    const res = await setup(t, token, "First-Admin@Example.com");
    expect(res.status).toBe(201);
    expect(res.body as unknown).toEqual({
      success: true,
      message: "Login successful",
      data: {
        token: expect.any(String),
        tokenType: "Bearer",
        expiresIn: 18000,
        refreshToken: expect.any(String),
        refreshExpiresIn: expect.any(Number),
        deviceToken: expect.stringMatching(/^[\w-]{43}$/),
        user: expect.objectContaining({ name: "First Admin", email: "first-admin@example.com", active: true, emailVerified: true, roles: ["ADMIN", "USER"] }),
      },
      timestamp: expect.stringMatching(ISO_Z),
    });
    const bearer = res.body.data.token;
    expect((await t.request("GET", "/api/users", { token: bearer })).status).toBe(200);
    const sessions = await t.request<Session[]>("GET", "/api/account/sessions", { token: bearer });
    expect(sessions.body).toEqual([expect.objectContaining({ amr: ["pwd"], current: true })]);
    // The setup's deviceToken is the device's at the next login: answered back, not replaced; the two answers carry the same fields.
    const { deviceToken } = res.body.data;
    const login = await t.request<{ data: TokenResponse }>("POST", "/api/auth/login", { body: { email: "first-admin@example.com", password: PASSWORD, deviceToken } });
    expect([login.status, login.body.data.deviceToken]).toEqual([200, deviceToken]);
    expect(Object.keys(res.body.data).sort()).toEqual(Object.keys(login.body.data).sort());
    // A sign-in like any other: audited LOGIN, and its device known, so the logins after it from there mail no NEW_SIGN_IN.
    const audit = await t.request<AuditEntry[]>("GET", "/api/audit?action=USER_CREATED", { token: bearer });
    expect(audit.body).toEqual([expect.objectContaining({ actor: "first-admin@example.com", details: { email: "first-admin@example.com", via: "setup" } })]);
    const logins = await t.request<AuditEntry[]>("GET", "/api/audit?action=LOGIN", { token: bearer });
    expect(logins.body).toHaveLength(2);
    expect((await t.db.select({ kind: outbox.kind }).from(outbox)).map((row) => row.kind)).not.toContain("NEW_SIGN_IN");
  });

  test("then the token is spent and void: its page is 410 (en, zh-TW), a second use is 400 INVALID_TOKEN, the status says no, no new link is made", async () => {
    const gone = pageWithout(await t.request("GET", `/account/setup?token=${token}`), 410, "/svc");
    expect(gone).toContain(COMPLETE);
    expect((await t.request("GET", `/account/setup?token=${token}`)).text).toContain('<a href="/svc/admin">Sign in to the admin console</a>');
    expect(pageWithout(await t.request("GET", `/account/setup?token=${token}`, ZH), 410, "/svc")).toContain("設定已完成");
    // Without a token too: there is nothing left to set up.
    expect(pageWithout(await t.request("GET", "/account/setup"), 410, "/svc")).toContain(COMPLETE);
    expectFailure(await setup(t, token, "second@example.com"), 400, INVALID_TOKEN);
    expect((await t.request("GET", "/api/account/setup")).body).toEqual({ setupRequired: false });
    expect(await issueSetupLink(t.database, t.config, new Date(), true)).toEqual({ adminExists: true });
    expect((await t.request("POST", "/api/auth/login", { body: { email: "second@example.com", password: PASSWORD } })).status).toBe(401);
  });
});

describe("refusals", () => {
  let t: TestApp;
  let clock = Date.now();
  beforeAll(async () => {
    t = await makeTestApp({}, { now: () => clock });
  });
  afterAll(() => t.close());

  test("an unknown token: 400 INVALID_TOKEN, nothing made", async () => {
    await issue(t, clock, true);
    expectFailure(await setup(t, "not-the-token"), 400, INVALID_TOKEN);
    expect((await t.request("GET", "/api/account/setup")).body).toEqual({ setupRequired: true });
  });

  test("a body that breaks registration's rules: 400 with each field, and the token still works", async () => {
    const token = await issue(t, clock, true);
    const res = await setup(t, token, "not-an-email", { name: "", password: "short" });
    expectFailure(
      res,
      400,
      invalidBody([
        "name: must not be blank",
        "email: must be a valid e-mail address",
        "password: must be between 8 and 20 characters",
        "password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
      ]),
    );
    expectFailure(await t.request("POST", "/api/account/setup", { body: {} }), 400, {
      errors: ["token: must not be blank", "name: must not be blank", "email: must not be blank", "password: must not be blank"],
    });
    const taken = await t.createUser({ email: "taken@example.com" });
    expectFailure(await setup(t, token, taken.email), 409, { message: "Email already exists: taken@example.com", errorCode: "DUPLICATE_EMAIL" });
    // Refused before spending it: the next try with the same link goes through (below, expired).
    expect((await t.request("GET", "/api/account/setup")).body).toEqual({ setupRequired: true });
  });

  test("a token older than an hour: its page is 410, saying how to get a fresh one; 400 INVALID_TOKEN; setup-link's fresh one voids the earlier one", async () => {
    const old = await issue(t, clock, true);
    expect((await t.request("GET", `/account/setup?token=${old}`)).status).toBe(200);
    clock += HOUR + 1;
    const expired = pageWithout(await t.request("GET", `/account/setup?token=${old}`), 410);
    expect(expired).toContain(SPENT);
    expect(expired).toContain("usersvc setup-link");
    expect(pageWithout(await t.request("GET", `/account/setup?token=${old}`, ZH), 410)).toContain("usersvc setup-link");
    expectFailure(await setup(t, old), 400, INVALID_TOKEN);
    // A start after the expiry makes a new one (the row is taken over, as an expired lease is).
    const first = await issue(t, clock);
    const fresh = await issue(t, clock, true);
    expect(pageWithout(await t.request("GET", `/account/setup?token=${first}`), 410)).toContain(SPENT);
    expect((await t.request("GET", `/account/setup?token=${fresh}`)).status).toBe(200);
    expectFailure(await setup(t, first), 400, INVALID_TOKEN);
    expect(fresh).not.toBe(first);
  });

  test("void as soon as any ADMIN exists, however it came to be: its page is 410", async () => {
    const token = await issue(t, clock, true);
    await t.admin();
    expect(pageWithout(await t.request("GET", `/account/setup?token=${token}`), 410)).toContain(COMPLETE);
    expectFailure(await setup(t, token), 400, INVALID_TOKEN);
    expect((await t.request("GET", "/api/account/setup")).body).toEqual({ setupRequired: false });
  });
});

test("with ADMIN_EMAIL set the service waits for no setup: the status says false", async () => {
  const t = await makeTestApp({ ADMIN_EMAIL: "boot@example.com", ADMIN_PASSWORD: PASSWORD });
  try {
    expect((await t.request("GET", "/api/account/setup")).body).toEqual({ setupRequired: false });
  } finally {
    await t.close();
  }
});

const SETUP_LINE = /^usersvc: no ADMIN yet\. Create the first one at (\S+) \(works once, for 1 hour; `usersvc setup-link` prints a fresh one\)$/;

describe.skipIf(leg !== "native")("the real program on a fresh data folder", () => {
  const dirs: string[] = [];
  const fresh = () => {
    const dir = mkdtempSync(join(tmpdir(), "usersvc-first-run-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const post = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  test("stderr carries one link, a second instance none; setup-link's fresh link makes the ADMIN, who signs in to /admin; then the link is refused", async () => {
    const dir = fresh();
    const first = await serve(dir, { BASE_PATH: "/svc" });
    const second = await serve(dir, { BASE_PATH: "/svc" });
    try {
      // One plain line, apart from the JSON log on stdout; localhost and the port without PUBLIC_URL.
      const [line, ...others] = await stderrLines(first.out);
      expect(others).toEqual([]);
      const link = SETUP_LINE.exec(line)?.[1];
      expect(link).toMatch(new RegExp(`^http://localhost:${first.port}/svc/account/setup\\?token=[A-Za-z0-9_-]{43}$`));
      const token = tokenOf(link!);
      for (const jsonLine of linesOf(first.out.stdout)) expect(JSON.parse(jsonLine)).toBeObject();
      expect(first.out.stdout).not.toContain(token);
      // The second instance on the same database leaves the live token alone and says so.
      expect(await stderrLines(second.out)).toEqual([expect.stringMatching(/^usersvc: no ADMIN yet\. A setup link was already issued, valid until \S+Z; `usersvc setup-link`/)]);

      // The page the link opens: the setup page, its own CSP, no inline script, the token not in it.
      const page = await fetch(`${first.url}/account/setup?token=${token}`);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(await page.text()).not.toContain(token);

      // For containers: a fresh link on stdout, which voids the one printed at the start.
      const cli = program(["setup-link"], { DATA_DIR: dir, DATABASE_URL: `file:${join(dir, "usersvc.db")}`, PUBLIC_URL: "https://id.example.com", BASE_PATH: "/svc" });
      expect(await cli.proc.exited).toBe(0);
      await cli.collected;
      expect(cli.out.stdout).toMatch(/^https:\/\/id\.example\.com\/svc\/account\/setup\?token=[A-Za-z0-9_-]{43}\n$/);
      const freshToken = tokenOf(cli.out.stdout.trim());
      const body = { name: "Root Admin", email: "root@example.com", password: PASSWORD };
      expect((await post(`${first.url}/api/account/setup`, { ...body, token })).status).toBe(400);
      expect((await fetch(`${first.url}/account/setup?token=${token}`)).status).toBe(410);

      // Either instance takes it: the ADMIN is made and signed in.
      const made = await post(`${second.url}/api/account/setup`, { ...body, token: freshToken });
      expect(made.status).toBe(201);
      expect(((await made.json()) as { data: TokenResponse }).data.user.roles).toContain("ADMIN");
      const login = await post(`${first.url}/api/auth/login`, { email: body.email, password: PASSWORD });
      const bearer = ((await login.json()) as { data: TokenResponse }).data.token;
      expect((await fetch(`${first.url}/api/users`, { headers: { authorization: `Bearer ${bearer}` } })).status).toBe(200);
      expect((await fetch(`${first.url}/admin`)).status).toBe(200);

      // The link is refused now: its page answers 410, the status says so, the API answers 400 to a second use.
      expect((await fetch(`${first.url}/account/setup?token=${freshToken}`)).status).toBe(410);
      expect(await (await fetch(`${first.url}/api/account/setup`)).json()).toEqual({ setupRequired: false });
      const again = await post(`${first.url}/api/account/setup`, { ...body, email: "other@example.com", token: freshToken });
      expect([again.status, ((await again.json()) as { errorCode: string }).errorCode]).toEqual([400, "INVALID_TOKEN"]);
      const cliAgain = program(["setup-link"], { DATA_DIR: dir, DATABASE_URL: `file:${join(dir, "usersvc.db")}` });
      expect(await cliAgain.proc.exited).toBe(1);
      await cliAgain.collected;
      expect([cliAgain.out.stdout, cliAgain.out.stderr]).toEqual(["", expect.stringContaining("an ADMIN exists already")]);
    } finally {
      await first.stop();
      await second.stop();
    }
    // A restart with an ADMIN: no link.
    const restarted = await serve(dir);
    await restarted.stop();
    expect(restarted.out.stderr).toBe("");
  }, 60_000);

  test("with ADMIN_EMAIL set no link is printed", async () => {
    const server = await serve(fresh(), { ADMIN_EMAIL: "boot@example.com", ADMIN_PASSWORD: PASSWORD });
    await server.stop();
    expect(server.out.stderr).toBe("");
  }, 30_000);
});
