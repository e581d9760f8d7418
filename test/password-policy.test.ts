/**
 * PASSWORD_POLICY and HIBP_RANGE_URL through the real HTTP surface: the default `seed` policy
 * keeps the seed's answers; `strict` (NIST SP 800-63B) takes 8-128 characters of any Unicode and
 * refuses common passwords and the e-mail's local part on every path that sets a password
 * (registration, change, reset, POST /api/users, `usersvc admin create`); Have I Been Pwned's
 * range API is asked by k-anonymity, against a local server answering in the real format, and
 * a hanging or failing one lets the password through with one warning.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { issueToken } from "../src/store/account-tokens";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { makeTestApp, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { expectFailure, invalidBody } from "./scenario";

const register = (t: TestApp, password: string, email = uniqueEmail("policy"), lang?: string) =>
  t.request("POST", "/api/auth/register", {
    body: { ...validRegistration(email), password, confirmPassword: password },
    headers: lang ? { "accept-language": lang } : {},
  });
const login = (t: TestApp, email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });
/** Letters and digits no list holds. */
const randomSuffix = () => crypto.randomUUID().replaceAll("-", "").replace(/^/, "x");
/** 40 characters: words, spaces and 漢字. */
const PASSPHRASE = "春眠不覺曉 處處聞啼鳥 in my quiet garden at dawn!!";

describe("the default policy (seed)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await makeTestApp();
  });
  afterAll(() => t.close());

  test("the seed's clients keep registering with list passwords such as Passw0rd! and Password1! (201)", async () => {
    for (const password of ["Passw0rd!", "Password1!"]) expect((await register(t, password)).status).toBe(201);
  });

  test("an ADMIN's PATCH sets a list password that the seed's rules accept (200)", async () => {
    const admin = await t.admin();
    const user = await t.createUser({ password: "Passw0rd!" });
    expect((await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { password: "Qwerty123!" } })).status).toBe(200);
    expect((await login(t, user.email, "Qwerty123!")).status).toBe(200);
  });

  test("the reset page states the seed's rules, at most 20 characters", async () => {
    const page = await t.request("GET", "/account/reset-password");
    expect(page.text).toContain("8 to 20 characters, with a lowercase and an uppercase letter");
    expect(page.text).toContain('maxlength="20"');
  });

  test("the seed's rules still apply, with the seed's texts: a passphrase is refused for its length and composition", async () => {
    expectFailure(
      await register(t, PASSPHRASE),
      400,
      invalidBody([
        "password: must be between 8 and 20 characters",
        "password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
      ]),
    );
  });
});

describe("PASSWORD_POLICY=strict", () => {
  let t: TestApp;
  let admin: { id: number; email: string; token: string };
  beforeAll(async () => {
    t = await makeTestApp({ PASSWORD_POLICY: "strict" });
    admin = await t.admin();
  });
  afterAll(() => t.close());

  test("a list password at registration: 400 'is too common' (en and zh-TW); the same with a long random suffix: 201", async () => {
    expectFailure(await register(t, "Passw0rd!"), 400, invalidBody(["password: is too common"]));
    expectFailure(await register(t, "Passw0rd!", uniqueEmail("policy"), "zh-TW"), 400, invalidBody(["password: 密碼過於常見"], "資料驗證失敗"));
    const email = uniqueEmail("policy");
    const password = `Passw0rd!${randomSuffix()}`;
    expect((await register(t, password, email)).status).toBe(201);
    expect((await login(t, email, password)).status).toBe(200);
  });

  test.each(["Password1!", "Qwerty123!", "P@ssw0rd", "PASSWORD", "iloveyou", "  dragon 2024 !!"])(
    "%p is refused as common (itself, or without leading and trailing digits and symbols)",
    async (password) => {
      expectFailure(await register(t, password), 400, invalidBody(["password: is too common"]));
    },
  );

  test("a 40-character passphrase with spaces and 漢字: 201, and it signs in", async () => {
    expect([...PASSPHRASE]).toHaveLength(40);
    const email = uniqueEmail("policy");
    expect((await register(t, PASSPHRASE, email)).status).toBe(201);
    expect((await login(t, email, PASSPHRASE)).status).toBe(200);
  });

  test("length in characters (code points) from 8 to 128, with no composition rule", async () => {
    const length = ["password: must be between 8 and 128 characters"];
    expectFailure(await register(t, "abc defg".slice(0, 7)), 400, invalidBody(length));
    expectFailure(await register(t, "🔑🗝🔐🔒"), 400, invalidBody(length)); // 8 UTF-16 units, 4 characters
    expect((await register(t, "🔑🗝🔐🔒🔑🗝🔐🔒")).status).toBe(201);
    expect((await register(t, "x".repeat(128))).status).toBe(201);
    expectFailure(await register(t, "x".repeat(129)), 400, invalidBody(length));
    expectFailure(await register(t, "🔑".repeat(129)), 400, invalidBody(length));
    expect((await register(t, "alllowercasenodigits")).status).toBe(201);
    // The body's other rules are the same: a mismatched confirmation is still named with the rest.
    const mismatch = await t.request("POST", "/api/auth/register", { body: { ...validRegistration(uniqueEmail("policy")), password: "x", confirmPassword: "y" } });
    expectFailure(mismatch, 400, invalidBody(["password: must be between 8 and 128 characters", "confirmPassword: must match password"]));
  });

  test("the e-mail's local part inside the password (any case): 400; a local part under 4 characters is not checked", async () => {
    const email = uniqueEmail("meilin");
    const local = email.slice(0, email.indexOf("@"));
    expectFailure(await register(t, `my ${local.toUpperCase()} secret`, email), 400, invalidBody(["password: must not contain your e-mail"]));
    expectFailure(await register(t, `x${local}x`, email, "zh-TW"), 400, invalidBody(["password: 密碼不能包含您的 Email"], "資料驗證失敗"));
    const short = `m${crypto.randomUUID().slice(0, 2)}@${crypto.randomUUID().slice(0, 8)}.example.com`;
    expect((await register(t, `${short.slice(0, 3)} likes long walks`, short)).status).toBe(201);
  });

  test("password change refuses a common password and the e-mail's local part; the old password stays", async () => {
    const user = await t.createUser({ password: "an old long passphrase" });
    const change = (newPassword: string) =>
      t.request("POST", "/api/auth/change-password", { token: user.token, body: { currentPassword: "an old long passphrase", newPassword, confirmNewPassword: newPassword } });
    expectFailure(await change("Qwerty123!"), 400, invalidBody(["newPassword: is too common"]));
    // Letters around the local part: stripped of its digits alone, a local part ending in digits can leave a listed word ("user").
    expectFailure(await change(`the ${user.email.slice(0, user.email.indexOf("@"))} passphrase`), 400, invalidBody(["newPassword: must not contain your e-mail"]));
    expect((await login(t, user.email, "an old long passphrase")).status).toBe(200);
    expect((await change("a newer, longer passphrase")).status).toBe(200);
    expect((await login(t, user.email, "a newer, longer passphrase")).status).toBe(200);
  });

  test("password reset refuses a common password (the token stays usable), then takes a good one", async () => {
    const user = await t.createUser({ password: "an old long passphrase" });
    const token = await issueToken(t.db, user.id, "PASSWORD_RESET", Date.now());
    const confirm = (newPassword: string) => t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword, confirmNewPassword: newPassword } });
    expectFailure(await confirm("Password1!"), 400, invalidBody(["newPassword: is too common"]));
    expect((await login(t, user.email, "an old long passphrase")).status).toBe(200);
    expect((await confirm("reset to something memorable")).status).toBe(200);
    expect((await login(t, user.email, "reset to something memorable")).status).toBe(200);
  });

  test("POST /api/users with a common password: 400; without a password or with a good one: 201", async () => {
    const create = (fields: Record<string, unknown>) =>
      t.request("POST", "/api/users", { token: admin.token, body: { name: "Policy User", email: uniqueEmail("policy"), ...fields } });
    expectFailure(await create({ password: "P@ssw0rd" }), 400, invalidBody(["password: is too common"]));
    expect((await create({})).status).toBe(201);
    expect((await create({ password: PASSPHRASE })).status).toBe(201);
  });

  test("the reset page states the strict policy (en, zh-TW) and lets a long passphrase be typed", async () => {
    const page = await t.request("GET", "/account/reset-password");
    expect(page.text).toContain("8 to 128 characters; a phrase of several words is best.");
    expect(page.text).not.toContain('maxlength="20"');
    expect(page.text).toContain('maxlength="256"');
    const zh = await t.request("GET", "/account/reset-password", { headers: { "accept-language": "zh-TW" } });
    expect(zh.text).toContain("8-128 個字元");
  });

  test("an ADMIN's PUT/PATCH with a password: a common one or one with the e-mail's local part (the new one, if it changes) is 400; a good one is set", async () => {
    const user = await t.createUser({ password: "an old long passphrase" });
    const patch = (body: Record<string, unknown>) => t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body });
    expectFailure(await patch({ password: "Qwerty123!" }), 400, invalidBody(["password: is too common"]));
    const local = user.email.slice(0, user.email.indexOf("@"));
    expectFailure(await patch({ password: `${local} and more words` }), 400, invalidBody(["password: must not contain your e-mail"]));
    const moved = uniqueEmail("moved");
    const put = (password: string) => t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "Policy User", email: moved, password } });
    expectFailure(await put(`${moved.slice(0, moved.indexOf("@"))} and more words`), 400, invalidBody(["password: must not contain your e-mail"]));
    expect((await login(t, user.email, "an old long passphrase")).status).toBe(200);
    expect((await patch({ password: PASSPHRASE })).status).toBe(200);
    expect((await login(t, user.email, PASSPHRASE)).status).toBe(200);
  });

  test("admin bootstrap: a common password is refused when it would be stored, never for an existing admin's restart", async () => {
    const policy = { config: t.config, logger: { warn() {} } };
    const email = uniqueEmail("boot");
    await expect(ensureAdmin(t.database, { email, password: "Qwerty123!" }, Date.now, policy)).rejects.toMatchObject({
      violations: [{ path: "password", key: "field.password.common" }],
    });
    expect((await login(t, email, "Qwerty123!")).status).toBe(401);
    await ensureAdmin(t.database, { email, password: PASSPHRASE }, Date.now, policy);
    // A restart with the same (good) password, and one whose ADMIN_PASSWORD is on the list: the stored password is kept.
    expect(await ensureAdmin(t.database, { email, password: "Qwerty123!" }, Date.now, policy)).toMatchObject({ created: false });
    expect((await login(t, email, PASSPHRASE)).status).toBe(200);
  });
});

test("`usersvc admin create` under PASSWORD_POLICY=strict: a common password exits 2 with one line; a passphrase creates the admin", () => {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-policy-cli-"));
  try {
    const run = (password: string) =>
      spawnSync(process.execPath, [resolve(import.meta.dir, "../src/main.ts"), "admin", "create", "--email", "root@policy.example.com", "--password", password], {
        cwd: dir,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, PASSWORD_POLICY: "strict", LOG_LEVEL: "error" },
        encoding: "utf8",
      });
    const refused = run("Password1!");
    expect([refused.status, refused.stderr]).toEqual([2, "usersvc: --password is too common (see usersvc --help)\n"]);
    const created = run(PASSPHRASE);
    expect([created.status, created.stdout]).toEqual([0, expect.stringMatching(/^created admin root@policy\.example\.com \(id \d+\)\n$/)]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

// ---------------------------------------------------------------- Have I Been Pwned

const sha1 = (text: string) => new Bun.CryptoHasher("sha1").update(text).digest("hex").toUpperCase();

/**
 * A range API as api.pwnedpasswords.com answers: `SUFFIX:COUNT` lines joined by CRLF for the
 * asked prefix, padded with count-0 lines (Add-Padding: true) among which `padded`'s own suffix.
 */
function rangeServer(breached: Record<string, number>, padded: string[]) {
  const asked: { path: string; padding: string | null }[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      const prefix = new URL(request.url).pathname.slice("/range/".length);
      asked.push({ path: new URL(request.url).pathname, padding: request.headers.get("add-padding") });
      const lines = Object.entries(breached)
        .filter(([password]) => sha1(password).startsWith(prefix))
        .map(([password, count]) => `${sha1(password).slice(5)}:${count}`);
      for (const password of padded) if (sha1(password).startsWith(prefix)) lines.push(`${sha1(password).slice(5)}:0`);
      for (let i = 0; i < 800; i++) lines.push(`${sha1(`padding ${prefix} ${i}`).slice(5)}:0`);
      lines.sort();
      return new Response(lines.join("\r\n"), { headers: { "content-type": "text/plain" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/range/`, asked, stop: () => server.stop(true) };
}

describe("HIBP_RANGE_URL (strict)", () => {
  const BREACHED = "a breached but long phrase";
  const PADDED = "only a padding line knows me";
  const range = rangeServer({ [BREACHED]: 37 }, [PADDED]);
  let t: TestApp;
  const logs: string[] = [];
  beforeAll(async () => {
    t = await makeTestApp({ PASSWORD_POLICY: "strict", HIBP_RANGE_URL: range.url, LOG_LEVEL: "warn" }, { logs: { write: (line) => logs.push(line) } });
  });
  afterAll(async () => {
    await t.close();
    range.stop();
  });

  test("a password the range lists: 400 'is too common'; only the 5-digit prefix travels, with Add-Padding", async () => {
    range.asked.length = 0;
    expectFailure(await register(t, BREACHED), 400, invalidBody(["password: is too common"]));
    expect(range.asked).toEqual([{ path: `/range/${sha1(BREACHED).slice(0, 5)}`, padding: "true" }]);
  });

  test("a suffix that appears only as a padding line (count 0) never matches: 201", async () => {
    expect((await register(t, PADDED)).status).toBe(201);
  });

  test("a password on the built-in list is refused without asking the range", async () => {
    range.asked.length = 0;
    expectFailure(await register(t, "Password1!"), 400, invalidBody(["password: is too common"]));
    expect(range.asked).toEqual([]);
    expect(logs).toEqual([]);
  });
});

/** Registration answers 201 with the range unusable, with one warning naming why and nothing of the password. */
async function failsOpen(handler: (request: Request) => Response | Promise<Response>, reason: string) {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handler });
  const logs: string[] = [];
  const t = await makeTestApp(
    { PASSWORD_POLICY: "strict", HIBP_RANGE_URL: `http://127.0.0.1:${server.port}/range/`, LOG_LEVEL: "warn" },
    { logs: { write: (line) => logs.push(line) } },
  );
  try {
    const password = `nobody knows ${randomSuffix()}`;
    const started = performance.now();
    const res = await register(t, password);
    const ms = performance.now() - started;
    expect(res.status).toBe(201);
    expect(logs).toHaveLength(1);
    expect(JSON.parse(logs[0])).toMatchObject({ level: "warn", reason, hibp: `http://127.0.0.1:${server.port}` });
    for (const secret of [password, sha1(password), sha1(password).slice(0, 5), sha1(password).slice(5)]) expect(logs[0].toUpperCase()).not.toContain(secret.toUpperCase());
    return ms;
  } finally {
    await t.close();
    server.stop(true);
  }
}

describe("HIBP_RANGE_URL that fails: the password is accepted (fail open)", () => {
  test("an answer of 500", async () => {
    await failsOpen(() => new Response("oops", { status: 500 }), "status 500");
  });

  test("a range that never answers: 201 after the 2 s timeout", async () => {
    const quick = await failsOpen(() => new Response("oops", { status: 500 }), "status 500");
    const hanging = await failsOpen(() => new Promise<Response>(() => {}), "TimeoutError");
    expect(hanging).toBeGreaterThanOrEqual(1990);
    expect(hanging - quick).toBeLessThan(2000 + Math.max(1500, 3 * quick));
  }, 20_000);
});
