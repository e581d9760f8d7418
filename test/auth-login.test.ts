/**
 * Login, refresh, logout, password change and the caller's profile through app.handle on a
 * real libSQL file: success and failure parity, legacy BCrypt hashes rehashed to argon2id,
 * throttling per e-mail and per client address with an injected clock, and revocation.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { Algorithm, hash as argon2 } from "@node-rs/argon2";
import { eq } from "drizzle-orm";
import { loginThrottle, users } from "../src/db/schema";
import { clientAddress } from "../src/http/client-address";
import { freshUser, ISO_Z, makeTestApp, type TestApp, timeless } from "./helpers";
import { expectFailure, invalidBody, scenarios, UNAUTHORIZED } from "./scenario";

const PASSWORD = "Passw0rd!";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const login = (app: TestApp, email: string, password: string, lang?: string) =>
  app.request("POST", "/api/auth/login", { body: { email, password }, headers: lang ? { "accept-language": lang } : undefined });

/** The body without its timestamp, for comparing two answers. */

describe("login", () => {
  test("answers the token envelope, sets lastLogin, and the token opens protected routes", async () => {
    const user = await t.createUser({ password: PASSWORD, email: "Login.Ok@Example.com" });
    const res = await login(t, "LOGIN.OK@example.com", PASSWORD);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      message: "Login successful",
      data: {
        token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/),
        tokenType: "Bearer",
        expiresIn: 18000,
        refreshToken: expect.stringMatching(/^[\w-]{43}$/),
        refreshExpiresIn: 7 * 86_400,
        deviceToken: expect.stringMatching(/^[\w-]{43}$/),
        user: expect.objectContaining({ id: user.id, email: "login.ok@example.com", roles: ["USER"], lastLogin: expect.stringMatching(ISO_Z) }),
      },
      timestamp: expect.stringMatching(ISO_Z),
    });
    expect(res.text).not.toContain("passwordHash");
    const [row] = await t.db.select({ lastLogin: users.lastLogin }).from(users).where(eq(users.id, user.id));
    expect(row.lastLogin).toBeInstanceOf(Date);
    const users_ = await t.request("GET", "/api/users", { token: res.body.data.token });
    expect(users_.status).toBe(200);
  });

  test("a wrong password and an unknown e-mail get the identical 401 INVALID_CREDENTIALS", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const noPassword = await t.createUser();
    const wrong = await login(t, user.email, "Wrong0rd!");
    const unknown = await login(t, "nobody-here@example.com", PASSWORD);
    const passwordless = await login(t, noPassword.email, PASSWORD);
    for (const res of [wrong, unknown, passwordless]) {
      expectFailure(res, 401, { message: "Invalid e-mail or password", errorCode: "INVALID_CREDENTIALS" });
      expect([...res.headers.keys()].sort()).toEqual([...wrong.headers.keys()].sort());
    }
    expect(timeless(unknown.body)).toEqual(timeless(wrong.body));
    const zh = await login(t, "nobody-here@example.com", PASSWORD, "zh-TW");
    expect(zh.body.message).toBe("帳號或密碼錯誤");
  });

  test("an unknown e-mail costs a password hash too (similar time)", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const time = async (email: string) => {
      const started = performance.now();
      await login(t, email, "Wrong0rd!");
      return performance.now() - started;
    };
    await time("warm-up@example.com");
    // The least of three each: one answer delayed by a loaded machine or a remote round trip does not decide it.
    const least = async (email: string) => Math.min(await time(email), await time(email), await time(email));
    const known = await least(user.email);
    const unknown = await least("ghost@example.com");
    // Not a speed target: only that neither path skips the argon2 verification (~tens of ms).
    expect(unknown).toBeGreaterThan(known / 4);
    expect(known).toBeGreaterThan(unknown / 4);
  });

  test("an inactive account with the right password is 403 ACCOUNT_DISABLED", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const { token } = await t.admin();
    expect((await t.request("POST", `/api/users/${user.id}/deactivate`, { token })).status).toBe(200);
    const res = await login(t, user.email, PASSWORD, "zh-TW");
    expectFailure(res, 403, { message: "帳號已停用", errorCode: "ACCOUNT_DISABLED" });
  });

  scenarios([
    {
      name: "no body fields",
      send: () => t.request("POST", "/api/auth/login", { body: {} }),
      status: 400,
      failure: invalidBody(["email: must not be blank", "password: must not be blank"]),
    },
    {
      name: "empty strings",
      send: () => t.request("POST", "/api/auth/login", { body: { email: "", password: "" } }),
      status: 400,
      failure: invalidBody(["email: must not be blank", "password: must not be blank"]),
    },
  ]);
});

describe("legacy hashes (BCrypt, older argon2 parameters)", () => {
  async function legacyUser(hash: string) {
    const user = await t.createUser();
    // Raw write: a hash the service no longer writes, which no request can produce.
    await t.db.update(users).set({ passwordHash: hash }).where(eq(users.id, user.id));
    return user;
  }
  const storedHash = async (id: number) => (await t.db.select({ h: users.passwordHash }).from(users).where(eq(users.id, id)))[0].h!;

  test.each([
    ["$2b$ (as Bun writes it)", async () => Bun.password.hash(PASSWORD, { algorithm: "bcrypt", cost: 4 }), PASSWORD],
    ["$2a$ (Spring's BCryptPasswordEncoder)", async () => (await Bun.password.hash(PASSWORD, { algorithm: "bcrypt", cost: 4 })).replace(/^\$2b\$/, "$2a$"), PASSWORD],
    // PHP's own documentation example of password_verify, written by a different implementation.
    ["literal $2y$", async () => "$2y$07$BCryptRequires22Chrcte/VlQH0piJtjXl.0t1XkA8pw9dMXTpOq", "rasmuslerdorf"],
    // Spring's encoder read only the first 72 bytes of a longer password.
    [
      "$2a$ of a 100-byte password, truncated as Spring did",
      async () => (await Bun.password.hash("Lp1!".repeat(18), { algorithm: "bcrypt", cost: 4 })).replace(/^\$2b\$/, "$2a$"),
      "Lp1!".repeat(25),
    ],
    ["argon2id with weaker parameters", async () => argon2(PASSWORD, { algorithm: Algorithm.Argon2id, memoryCost: 4096, timeCost: 1, parallelism: 1 }), PASSWORD],
  ])("%s verifies, then is rehashed to today's argon2id", async (_, makeHash, password) => {
    const hash = await makeHash();
    const user = await legacyUser(hash);
    expect((await login(t, user.email, "Wrong0rd!")).status).toBe(401);
    expect(await storedHash(user.id)).toBe(hash);
    const res = await login(t, user.email, password);
    expect(res.status).toBe(200);
    const rehashed = await storedHash(user.id);
    expect(rehashed).toStartWith("$argon2id$v=19$m=19456,t=2,p=1$");
    expect((await login(t, user.email, password)).status).toBe(200);
    expect(await storedHash(user.id)).toBe(rehashed);
  });
});

describe("throttling (injected clock)", () => {
  let clock = Date.now();
  let th: TestApp;
  beforeAll(async () => {
    th = await makeTestApp({ LOGIN_MAX_FAILURES: "3", LOGIN_MAX_FAILURES_PER_IP: "8" }, { now: () => clock });
  });
  afterAll(() => th.close());
  const minutes = (n: number) => n * 60_000;
  const clearAddress = () => th.db.delete(loginThrottle).where(eq(loginThrottle.key, "ip:local"));

  test("after 3 failures for one e-mail: 429 with Retry-After even with the right password, until the window passes", async () => {
    await clearAddress();
    const user = await th.createUser({ password: PASSWORD });
    for (let i = 0; i < 3; i++) expect((await login(th, user.email, "Wrong0rd!")).status).toBe(401);
    clock += minutes(5);
    const blocked = await login(th, user.email.toUpperCase(), PASSWORD, "zh-TW");
    expectFailure(blocked, 429, { message: "請求過於頻繁，請稍後再試", errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(10 * 60) } });

    clock += minutes(10) - 1000;
    const stillBlocked = await login(th, user.email, PASSWORD);
    expect(stillBlocked.status).toBe(429);
    expect(stillBlocked.headers.get("retry-after")).toBe("1");

    clock += 1000;
    expect((await login(th, user.email, PASSWORD)).status).toBe(200);
  });

  test("a successful login clears the e-mail's count", async () => {
    await clearAddress();
    const user = await th.createUser({ password: PASSWORD });
    for (let i = 0; i < 2; i++) expect((await login(th, user.email, "Wrong0rd!")).status).toBe(401);
    expect((await login(th, user.email, PASSWORD)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await login(th, user.email, "Wrong0rd!")).status).toBe(401);
    expect((await login(th, user.email, PASSWORD)).status).toBe(200);
  });

  test("failures for one e-mail do not block another", async () => {
    await clearAddress();
    const victim = await th.createUser({ password: PASSWORD });
    const other = await th.createUser({ password: PASSWORD });
    for (let i = 0; i < 4; i++) await login(th, victim.email, "Wrong0rd!");
    expect((await login(th, victim.email, PASSWORD)).status).toBe(429);
    expect((await login(th, other.email, PASSWORD)).status).toBe(200);
  });

  test("parallel guesses cannot overrun the limit: attempts for one e-mail see each other's failures", async () => {
    await clearAddress();
    const user = await th.createUser({ password: PASSWORD });
    const results = await Promise.all(Array.from({ length: 8 }, () => login(th, user.email, "Wrong0rd!")));
    expect(results.map((r) => r.status).sort()).toEqual([401, 401, 401, 429, 429, 429, 429, 429]);
  });

  test("after 8 failures from one client address, every e-mail gets 429 there until the window passes", async () => {
    await clearAddress();
    clock += minutes(20);
    const user = await th.createUser({ password: PASSWORD });
    for (let i = 0; i < 8; i++) expect((await login(th, `stranger${i}@example.com`, "Wrong0rd!")).status).toBe(401);
    const blocked = await login(th, user.email, PASSWORD);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get("retry-after")).toBe(String(15 * 60));
    clock += minutes(15);
    expect((await login(th, user.email, PASSWORD)).status).toBe(200);
  });

  test("parallel logins with the right password are never throttled", async () => {
    await clearAddress();
    const user = await th.createUser({ password: PASSWORD });
    const results = await Promise.all(Array.from({ length: 10 }, () => login(th, user.email, PASSWORD)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
  });

  test("successful logins do not use up the address's budget", async () => {
    await clearAddress();
    const user = await th.createUser({ password: PASSWORD });
    for (let i = 0; i < 12; i++) expect((await login(th, user.email, PASSWORD)).status).toBe(200);
  });
});

describe("client address behind reverse proxies (TRUST_PROXY)", () => {
  test("the hop count picks the address the Nth proxy saw; 0 believes only the socket", () => {
    const request = new Request("http://x/", { headers: { "x-forwarded-for": "203.0.113.9, 198.51.100.7, 10.0.0.2" } });
    const server = { requestIP: () => ({ address: "10.0.0.1" }) };
    expect([0, 1, 2, 3, 4, 10].map((hops) => clientAddress(server, request, hops))).toEqual(["10.0.0.1", "10.0.0.2", "198.51.100.7", "203.0.113.9", "203.0.113.9", "203.0.113.9"]);
    expect(clientAddress(server, new Request("http://x/"), 1)).toBe("10.0.0.1");
  });

  /** Three failed logins from these forwarded addresses; the status of the third. */
  const thirdFailure = async (app: TestApp, email: string, from: string[]) => {
    const attempt = (address: string) => app.request("POST", "/api/auth/login", { body: { email, password: "Wrong@123" }, headers: { "x-forwarded-for": address } });
    for (const address of from.slice(0, 2)) expect((await attempt(address)).status).toBe(401);
    return (await attempt(from[2])).status;
  };

  test.each([
    ["0 (default): X-Forwarded-For is ignored, so a fresh value per attempt does not escape the limit", "0", ["1.1.1.1", "2.2.2.2", "3.3.3.3"], 429],
    ["1: each client behind the proxy has its own budget", "1", ["1.1.1.1", "1.1.1.1", "3.3.3.3"], 401],
    ["1: one client is still limited", "1", ["1.1.1.1", "1.1.1.1", "1.1.1.1"], 429],
  ])("TRUST_PROXY=%s", async (_, hops, from, third) => {
    const app = await makeTestApp({ TRUST_PROXY: hops, LOGIN_MAX_FAILURES_PER_IP: "2" });
    try {
      // One unknown e-mail, well under its own limit of 5: only the per-address count can refuse.
      expect(await thirdFailure(app, "nobody@example.com", from)).toBe(third);
    } finally {
      await app.close();
    }
  });
});

describe("refresh, logout and password change", () => {
  async function session(password = PASSWORD) {
    const user = await t.createUser({ password });
    const res = await login(t, user.email, password);
    return { ...user, token: res.body.data.token as string };
  }
  const profile = (token: string) => t.request("GET", "/api/search/profile", { token });

  test("refresh answers a working token in the login shape", async () => {
    const s = await session();
    const res = await t.request("POST", "/api/auth/refresh", { token: s.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      message: "Token refreshed",
      data: { token: expect.any(String), tokenType: "Bearer", expiresIn: 18000, user: expect.objectContaining({ id: s.id, email: s.email }) },
      timestamp: expect.stringMatching(ISO_Z),
    });
    expect((await profile(res.body.data.token)).status).toBe(200);
  });

  scenarios(
    ["refresh", "logout", "change-password"].map((path) => ({
      name: `${path} without a bearer`,
      send: () => t.request("POST", `/api/auth/${path}`, { body: {} }),
      status: 401,
      failure: UNAUTHORIZED,
    })),
  );

  test("logout ends the caller's session: its tokens and those refreshed from it; another sign-in's stays; a new login works", async () => {
    const s = await session();
    const second = (await login(t, s.email, PASSWORD)).body.data.token;
    const refreshed = (await t.request("POST", "/api/auth/refresh", { token: s.token })).body.data.token;
    const res = await t.request("POST", "/api/auth/logout", { token: s.token, headers: { "accept-language": "zh-TW" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: "已登出，此工作階段的權杖皆已失效", data: null, timestamp: expect.stringMatching(ISO_Z) });
    for (const token of [s.token, refreshed]) {
      expectFailure(await profile(token), 401, UNAUTHORIZED);
      expectFailure(await t.request("POST", "/api/auth/refresh", { token }), 401, UNAUTHORIZED);
    }
    expect((await profile(second)).status).toBe(200);
    const again = await login(t, s.email, PASSWORD);
    expect((await profile(again.body.data.token)).status).toBe(200);
  });

  test("logout with a token from before sessions revokes every token issued so far", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const signedIn = (await login(t, user.email, PASSWORD)).body.data.token;
    const res = await t.request("POST", "/api/auth/logout", { token: user.token, headers: { "accept-language": "zh-TW" } });
    expect(res.body).toEqual({ success: true, message: "已登出，先前的權杖皆已失效", data: null, timestamp: expect.stringMatching(ISO_Z) });
    for (const token of [user.token, signedIn]) expectFailure(await profile(token), 401, UNAUTHORIZED);
  });

  test("a password change revokes earlier tokens and answers a new one", async () => {
    const s = await session();
    const res = await t.request("POST", "/api/auth/change-password", {
      token: s.token,
      body: { currentPassword: PASSWORD, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      message: "Password changed; every earlier token is revoked",
      data: {
        token: expect.any(String),
        tokenType: "Bearer",
        expiresIn: 18000,
        refreshToken: expect.any(String),
        refreshExpiresIn: 7 * 86_400,
        user: expect.objectContaining({ id: s.id }),
      },
      timestamp: expect.stringMatching(ISO_Z),
    });
    expectFailure(await profile(s.token), 401, UNAUTHORIZED);
    expect((await profile(res.body.data.token)).status).toBe(200);
    expect((await login(t, s.email, PASSWORD)).status).toBe(401);
    expect((await login(t, s.email, "N3wPassw0rd!")).status).toBe(200);
  });

  test.each([
    [
      "a wrong current password",
      { currentPassword: "Wrong0rd!", newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
      ["currentPassword: is not the current password"],
    ],
    ["a mismatched confirmation", { currentPassword: PASSWORD, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd?" }, ["confirmNewPassword: must match password"]],
    [
      "a weak new password",
      { currentPassword: PASSWORD, newPassword: "weakpass", confirmNewPassword: "weakpass" },
      ["newPassword: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else"],
    ],
  ])("%s is 400 and changes nothing", async (_, body, errors) => {
    const s = await session();
    expectFailure(await t.request("POST", "/api/auth/change-password", { token: s.token, body }), 400, invalidBody(errors));
    expect((await profile(s.token)).status).toBe(200);
    expect((await login(t, s.email, PASSWORD)).status).toBe(200);
  });
});

describe("GET /api/search/profile", () => {
  test("answers the caller's bare User and echoes X-Client-Version (default 1.0)", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const plain = await t.request("GET", "/api/search/profile", { token: user.token });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("x-client-version")).toBe("1.0");
    expect(plain.body).toEqual(freshUser({ id: user.id, email: user.email }));
    const versioned = await t.request("GET", "/api/search/profile", { token: user.token, headers: { "x-client-version": "2.3.1" } });
    expect(versioned.headers.get("x-client-version")).toBe("2.3.1");
  });

  test("a malformed X-Client-Version is 400 parameter validation", async () => {
    const user = await t.createUser();
    const res = await t.request("GET", "/api/search/profile", { token: user.token, headers: { "x-client-version": "1.0; drop" } });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe("Parameter validation failed");
    expect(res.body.errorCode).toBeUndefined();
  });

  test("without a token it is 401 with WWW-Authenticate: Bearer", async () => {
    const res = await t.request("GET", "/api/search/profile");
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
  });
});
