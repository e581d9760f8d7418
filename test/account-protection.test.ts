/**
 * Account protection's throttle and sign-in notices through app.handle on every leg, with an
 * injected clock and client addresses given by X-Forwarded-For (TRUST_PROXY=1): failures count per
 * e-mail and client network, so a guesser elsewhere never locks the owner out; a global count per
 * e-mail locks it out everywhere, for a window that doubles; the owner's deviceToken gets in during
 * a lockout (through the second step too, which then counts only the device's failures); LOGIN_LOCKED once per lockout; an ADMIN's unlock; NEW_SIGN_IN for a device label and
 * network the account does not know.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { and, eq } from "drizzle-orm";
import { auditLog, knownDevices, outbox } from "../src/db/schema";
import { renderMail } from "../src/features/notifications/templates";
import { startOutboxSender } from "../src/features/notifications/sender";
import { createLogging } from "../src/logging/logger";
import { resolvePasswordResets } from "../src/store/account-tokens";
import { ISO_Z, makeTestApp, type TestApp, timeless, uniqueEmail, validRegistration } from "./helpers";
import { DENIED, expectFailure, scenarios } from "./scenario";
import { STEP_MS, totpAt } from "./support/totp";

const PASSWORD = "Passw0rd!";
const WRONG = "Wrong0rd!";
const GLOBAL = 8;
const CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36";
const FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:145.0) Gecko/20100101 Firefox/145.0";
const minutes = (n: number) => n * 60_000;

let clock = Date.parse("2026-11-26T01:00:00Z");
let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp({ TRUST_PROXY: "1", LOGIN_MAX_FAILURES_GLOBAL: String(GLOBAL), PUBLIC_URL: "https://id.example.com", BASE_PATH: "/svc" }, { now: () => clock });
});
afterAll(() => t.close());

interface Attempt {
  from: string;
  password?: string;
  deviceToken?: string;
  userAgent?: string;
}
const login = (email: string, { from, password = PASSWORD, deviceToken, userAgent = CHROME }: Attempt) =>
  t.request("POST", "/api/auth/login", {
    body: { email, password, ...(deviceToken === undefined ? {} : { deviceToken }) },
    headers: { "x-forwarded-for": from, "user-agent": userAgent },
  });

/** `n` wrong passwords for the e-mail from the address: their statuses. */
async function fail(email: string, from: string, n: number, deviceToken?: string) {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await login(email, { from, password: WRONG, deviceToken })).status);
  return statuses;
}

/** The e-mail's failures across GLOBAL networks, one each (none of them reaches the per-network limit): the last one locks it out. */
async function lockOutEverywhere(email: string, round: number, networks = GLOBAL) {
  const statuses: number[] = [];
  for (let i = 0; i < networks; i++) statuses.push(...(await fail(email, `100.${64 + round}.${i}.7`, 1)));
  return statuses;
}

const mailsOf = async (email: string, kind: string) =>
  t.db
    .select()
    .from(outbox)
    .where(and(eq(outbox.recipient, email), eq(outbox.kind, kind)));

describe("failures per e-mail and client network", () => {
  test("six failures from one address: the right password there is 429, from another network 200", async () => {
    const { email } = await t.createUser({ password: PASSWORD });
    // The seed's LOGIN_MAX_FAILURES (5) for that e-mail from that network; the sixth is refused already.
    expect(await fail(email, "198.51.100.7", 6)).toEqual([401, 401, 401, 401, 401, 429]);
    clock += minutes(5);
    const refused = await login(email, { from: "198.51.100.7" });
    expectFailure(refused, 429, { errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(10 * 60) } });
    // The same /24 is the same network.
    expect((await login(email, { from: "198.51.100.200" })).status).toBe(429);
    const elsewhere = await login(email, { from: "203.0.113.9" });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.data.deviceToken).toMatch(/^[\w-]{43}$/);
    // The owner's success clears nothing of the guesser's network.
    expect((await login(email, { from: "198.51.100.7" })).status).toBe(429);
    clock += minutes(10);
    expect((await login(email, { from: "198.51.100.7" })).status).toBe(200);
  });

  test("IPv6 clients count per /48", async () => {
    const { email } = await t.createUser({ password: PASSWORD });
    expect(await fail(email, "2001:db8:aa:1::5", 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(email, { from: "2001:db8:aa:ffff::9" })).status).toBe(429);
    expect((await login(email, { from: "2001:db8:ab::9" })).status).toBe(200);
  });
});

describe("global lockout", () => {
  test("the global count locks the e-mail out everywhere: 15 minutes, then 30 within a day; one LOGIN_LOCKED each; the deviceToken still gets in", async () => {
    clock += minutes(60);
    const { email, id } = await t.createUser({ password: PASSWORD });
    const home = await login(email, { from: "192.0.2.10" });
    const { deviceToken } = home.body.data;

    // The failure that locks the e-mail out answers as every wrong password does.
    const first = await login(email, { from: "100.63.0.1", password: WRONG });
    expect(await lockOutEverywhere(email, 0, GLOBAL - 2)).toEqual(Array(GLOBAL - 2).fill(401));
    expect(await mailsOf(email, "LOGIN_LOCKED")).toEqual([]);
    const locking = await login(email, { from: "100.63.1.1", password: WRONG });
    expectFailure(locking, 401, { errorCode: "INVALID_CREDENTIALS" });
    expect(timeless(locking.body)).toEqual(timeless(first.body));
    expect([...locking.headers.keys()].sort()).toEqual([...first.headers.keys()].sort());
    const fresh = await login(email, { from: "203.0.113.50" });
    expectFailure(fresh, 429, { errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(15 * 60) } });
    // Further guesses are refused before any password check and lock nothing again.
    expect(await fail(email, "100.99.0.1", 3)).toEqual([429, 429, 429]);

    // The owner's device, even from the guessers' own network.
    const device = await login(email, { from: "100.64.3.7", deviceToken });
    expect(device.status).toBe(200);
    expect(device.body.data.deviceToken).toBe(deviceToken);

    const [mail] = await mailsOf(email, "LOGIN_LOCKED");
    expect((await mailsOf(email, "LOGIN_LOCKED")).length).toBe(1);
    expect(mail.payload).toEqual({ userId: id, lockedUntil: clock + minutes(15) });

    clock += minutes(15);
    expect((await login(email, { from: "203.0.113.50" })).status).toBe(200);
    expect(await lockOutEverywhere(email, 1)).toEqual(Array(GLOBAL).fill(401));
    const second = await login(email, { from: "203.0.113.51" });
    expectFailure(second, 429, { errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(30 * 60) } });
    expect((await mailsOf(email, "LOGIN_LOCKED")).length).toBe(2);

    // A lockout a day after the last one ended starts again at 15 minutes.
    clock += minutes(30) + minutes(24 * 60);
    expect(await lockOutEverywhere(email, 2)).toEqual(Array(GLOBAL).fill(401));
    expect((await login(email, { from: "203.0.113.52" })).headers.get("retry-after")).toBe(String(15 * 60));
    expect((await mailsOf(email, "LOGIN_LOCKED")).length).toBe(3);
  });

  test("an unknown e-mail locks out alike (the same answers) and mails no one", async () => {
    clock += minutes(60);
    const email = uniqueEmail("ghost");
    expect(await lockOutEverywhere(email, 3)).toEqual(Array(GLOBAL).fill(401));
    expect((await login(email, { from: "203.0.113.60" })).headers.get("retry-after")).toBe(String(15 * 60));
    expect(await mailsOf(email, "LOGIN_LOCKED")).toEqual([]);
  });

  test("LOGIN_LOCKED reads in English and zh-TW, with the lockout's end and a link to /account/security", () => {
    const payload = { userId: 1, lockedUntil: Date.parse("2026-11-26T03:15:00Z") };
    const en = renderMail({ kind: "LOGIN_LOCKED", lang: "en", name: "", payload, publicBase: "https://id.example.com/svc" });
    expect(en.subject).toBe("Sign-ins to your account are paused");
    expect(en.text).toContain("paused until 2026-11-26 03:15 UTC");
    expect(en.text).toContain("https://id.example.com/svc/account/security");
    const zh = renderMail({ kind: "LOGIN_LOCKED", lang: "zh-TW", name: "", payload });
    expect(zh.subject).toBe("您帳號的登入已暫停");
    expect(zh.text).toContain("暫停至 2026-11-26 03:15 UTC");
  });
});

describe("deviceToken", () => {
  const GUESSERS = "100.72.0.1";
  /** An account whose e-mail is blocked from the guessers' network, and a deviceToken of it. */
  async function blockedWithDevice() {
    clock += minutes(60);
    const user = await t.createUser({ password: PASSWORD });
    const { deviceToken } = (await login(user.email, { from: "192.0.2.20" })).body.data;
    expect(await fail(user.email, GUESSERS, 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(user.email, { from: GUESSERS })).status).toBe(429);
    return { ...user, deviceToken: deviceToken as string };
  }

  test("it counts only its own failures; five of them void it, fewer are cleared by a success", async () => {
    const { email, deviceToken } = await blockedWithDevice();
    expect(await fail(email, GUESSERS, 4, deviceToken)).toEqual([401, 401, 401, 401]);
    expect((await login(email, { from: GUESSERS })).status).toBe(429);
    // Its success clears its own failures and the network's count, as any success there does.
    expect((await login(email, { from: GUESSERS, deviceToken })).status).toBe(200);
    expect(await fail(email, GUESSERS, 5, deviceToken)).toEqual([401, 401, 401, 401, 401]);
    // 14 failures in all, past the global limit of 8: the token's own never counted there.
    expect(await mailsOf(email, "LOGIN_LOCKED")).toEqual([]);
    // Void: it is ignored (the network's count, cleared by the success before, decides; a new token is handed out).
    const voided = await login(email, { from: GUESSERS, deviceToken });
    expect(voided.status).toBe(200);
    expect(voided.body.data.deviceToken).not.toBe(deviceToken);
  });

  test("a password reset voids it", async () => {
    const { email, deviceToken } = await blockedWithDevice();
    expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email }, headers: { "x-forwarded-for": "192.0.2.20" } })).status).toBe(200);
    await resolvePasswordResets(t.database, 10, () => clock);
    const [row] = await mailsOf(email, "PASSWORD_RESET");
    const body = { token: row.token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" };
    expect((await t.request("POST", "/api/auth/password-reset/confirm", { body })).status).toBe(200);
    expect((await login(email, { from: GUESSERS, password: "N3wPassw0rd!", deviceToken })).status).toBe(429);
    expect((await login(email, { from: "203.0.113.71", password: "N3wPassw0rd!", deviceToken })).body.data.deviceToken).not.toBe(deviceToken);
  });

  test("it lives 90 days", async () => {
    const { email, deviceToken } = await blockedWithDevice();
    expect((await login(email, { from: GUESSERS, deviceToken })).status).toBe(200);
    clock += 90 * 24 * 60 * minutes(1);
    expect(await fail(email, GUESSERS, 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(email, { from: GUESSERS, deviceToken })).status).toBe(429);
  });

  test("another account's deviceToken is no good", async () => {
    const { deviceToken } = await blockedWithDevice();
    const other = await t.createUser({ password: PASSWORD });
    expect(await fail(other.email, GUESSERS, 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(other.email, { from: GUESSERS, deviceToken })).status).toBe(429);
  });
});

describe("deviceToken and a second factor", () => {
  const GUESSERS = "100.73.0.1";
  const secondStep = (body: { mfaToken: string; code: string }, from: string) =>
    t.request("POST", "/api/auth/login/mfa", { body, headers: { "x-forwarded-for": from, "user-agent": CHROME } });
  const mfaFailures = async (id: number) =>
    (
      await t.db
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.action, "MFA_FAILED"), eq(auditLog.subjectId, String(id))))
    ).length;

  /** An account with an authenticator app and a deviceToken, blocked from the guessers' network: its secret and a wrong code. */
  async function blockedWithTotp() {
    clock += minutes(60);
    const user = await t.createUser({ password: PASSWORD });
    const home = await login(user.email, { from: "192.0.2.21" });
    const { token, deviceToken } = home.body.data;
    const started = await t.request("POST", "/api/account/mfa/totp", { token });
    const secret = started.body.secret as string;
    const confirmed = await t.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, clock) } });
    expect(confirmed.status).toBe(200);
    // Past the step the enrolment used (each step counts once).
    clock += STEP_MS;
    expect(await fail(user.email, GUESSERS, 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(user.email, { from: GUESSERS })).status).toBe(429);
    const wrong = totpAt(secret, clock) === "000000" ? "111111" : "000000";
    return { ...user, deviceToken: deviceToken as string, secret, wrong };
  }

  /** The password step with the deviceToken from `from`: its mfaToken. */
  async function firstStep(email: string, deviceToken: string, from: string) {
    const res = await login(email, { from, deviceToken });
    expect([res.status, res.body.data.mfaRequired]).toEqual([200, true]);
    return res.body.data.mfaToken as string;
  }

  test("behind the guessers' network the device completes the second step; its wrong codes count as its own, and it is answered back", async () => {
    const { id, email, deviceToken, secret, wrong } = await blockedWithTotp();
    const mfaToken = await firstStep(email, deviceToken, GUESSERS);
    // A wrong TOTP code and wrong recovery codes: the device's failures, not the network's (already full) or the e-mail's (5 + 4 > 8).
    const codes = [wrong, "aaaaa-bbbbb", "ccccc-ddddd", wrong];
    const statuses = [];
    for (const code of codes) statuses.push((await secondStep({ mfaToken, code }, GUESSERS)).status);
    expect(statuses).toEqual([401, 401, 401, 401]);
    expect(await mfaFailures(id)).toBe(4);
    expect(await mailsOf(email, "LOGIN_LOCKED")).toEqual([]);
    expect((await login(email, { from: "203.0.113.72" })).status).toBe(200);
    const done = await secondStep({ mfaToken, code: totpAt(secret, clock) }, GUESSERS);
    expect(done.status).toBe(200);
    expect(done.body.data.deviceToken).toBe(deviceToken);
  });

  test("during a global lockout the device completes the second step", async () => {
    const { email, deviceToken, secret } = await blockedWithTotp();
    expect(await lockOutEverywhere(email, 5, GLOBAL - 5)).toEqual(Array(GLOBAL - 5).fill(401));
    expect((await login(email, { from: "203.0.113.73" })).status).toBe(429);
    const mfaToken = await firstStep(email, deviceToken, "203.0.113.73");
    const done = await secondStep({ mfaToken, code: totpAt(secret, clock) }, "203.0.113.73");
    expect([done.status, done.body.data?.deviceToken]).toEqual([200, deviceToken]);
  });

  test("five wrong codes of the device's void it (and burn the mfaToken): the guessers' network stays blocked for it", async () => {
    const { id, email, deviceToken, secret, wrong } = await blockedWithTotp();
    const mfaToken = await firstStep(email, deviceToken, GUESSERS);
    const statuses = [];
    for (const code of [wrong, "aaaaa-bbbbb", wrong, "ccccc-ddddd", wrong]) statuses.push((await secondStep({ mfaToken, code }, GUESSERS)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect(await mfaFailures(id)).toBe(5);
    expect((await secondStep({ mfaToken, code: totpAt(secret, clock) }, GUESSERS)).status).toBe(401);
    expect(await mailsOf(email, "LOGIN_LOCKED")).toEqual([]);
    expect((await login(email, { from: GUESSERS, deviceToken })).status).toBe(429);
  });
});

describe("POST /api/users/{id}/unlock", () => {
  test("an ADMIN lifts the lockout and every network's count at once, audited", async () => {
    clock += minutes(60);
    const { email, id } = await t.createUser({ password: PASSWORD });
    const admin = await t.admin();
    await lockOutEverywhere(email, 4);
    expect(await fail(email, "198.51.100.80", 5)).toEqual([429, 429, 429, 429, 429]);
    expect((await login(email, { from: "203.0.113.80" })).status).toBe(429);

    const res = await t.request("POST", `/api/users/${id}/unlock`, { token: admin.token });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect((await login(email, { from: "203.0.113.80" })).status).toBe(200);
    const audited = await t.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.action, "USER_UNLOCKED"), eq(auditLog.subjectId, String(id))));
    expect(audited.map((row) => row.actor)).toEqual([admin.email]);
  });

  test("unlock clears the per-network counts", async () => {
    clock += minutes(60);
    const { email, id } = await t.createUser({ password: PASSWORD });
    const admin = await t.admin();
    expect(await fail(email, "198.51.100.90", 5)).toEqual([401, 401, 401, 401, 401]);
    expect((await login(email, { from: "198.51.100.90" })).status).toBe(429);
    expect((await t.request("POST", `/api/users/${id}/unlock`, { token: admin.token })).status).toBe(204);
    expect((await login(email, { from: "198.51.100.90" })).status).toBe(200);
  });

  scenarios([
    {
      name: "unlock by a USER",
      send: async () => {
        const { id, token } = await t.createUser();
        return t.request("POST", `/api/users/${id}/unlock`, { token });
      },
      status: 403,
      failure: DENIED,
    },
    {
      name: "unlock of an unknown user",
      send: async () => t.request("POST", "/api/users/987654/unlock", { token: (await t.admin()).token }),
      status: 404,
      failure: { errorCode: "USER_NOT_FOUND" },
    },
  ]);
});

describe("NEW_SIGN_IN", () => {
  test("none for the first sign-in after registration nor a known device; one for a new device label, one for a new network", async () => {
    clock += minutes(60);
    const email = uniqueEmail("signin");
    const registered = await t.request("POST", "/api/auth/register", { body: validRegistration(email), headers: { "x-forwarded-for": "192.0.2.30" } });
    expect(registered.status).toBe(201);
    expect((await login(email, { from: "192.0.2.30" })).status).toBe(200);
    expect((await login(email, { from: "192.0.2.31" })).status).toBe(200);
    expect(await mailsOf(email, "NEW_SIGN_IN")).toEqual([]);

    clock += minutes(1);
    expect((await login(email, { from: "192.0.2.30", userAgent: FIREFOX })).status).toBe(200);
    const mails = await mailsOf(email, "NEW_SIGN_IN");
    expect(mails.map((m) => m.payload)).toEqual([{ userId: registered.body.data.id, device: "Firefox 145 on Linux", address: "192.0.2.30", signedInAt: clock }]);
    expect((await login(email, { from: "192.0.2.99", userAgent: FIREFOX })).status).toBe(200);
    expect((await mailsOf(email, "NEW_SIGN_IN")).length).toBe(1);

    expect((await login(email, { from: "203.0.113.30" })).status).toBe(200);
    expect((await mailsOf(email, "NEW_SIGN_IN")).length).toBe(2);
  });

  test("a device unused for 90 days is forgotten by the sender's housekeeping, and mails again", async () => {
    clock += minutes(60);
    const { email, id } = await t.createUser({ password: PASSWORD });
    expect((await login(email, { from: "192.0.2.40" })).status).toBe(200);
    expect((await login(email, { from: "203.0.113.40" })).status).toBe(200);
    expect((await mailsOf(email, "NEW_SIGN_IN")).length).toBe(1);
    clock += 91 * 24 * 60 * minutes(1);
    const sender = startOutboxSender({ db: t.database, logger: createLogging("silent", "json").get("outbox"), channels: [], now: () => clock, pollIntervalMs: 10 });
    try {
      for (let i = 0; i < 500 && (await t.db.select().from(knownDevices).where(eq(knownDevices.userId, id))).length > 0; i++) await Bun.sleep(10);
    } finally {
      await sender.stop();
    }
    expect(await t.db.select().from(knownDevices).where(eq(knownDevices.userId, id))).toEqual([]);
    expect((await login(email, { from: "192.0.2.40" })).status).toBe(200);
    expect((await mailsOf(email, "NEW_SIGN_IN")).length).toBe(2);
  });

  test("NEW_SIGN_IN reads in English and zh-TW: device, address, time, a link to /account/security", () => {
    const payload = { userId: 1, device: "Firefox 145 on Linux", address: "192.0.2.30", signedInAt: Date.parse("2026-11-26T02:01:00Z") };
    const en = renderMail({ kind: "NEW_SIGN_IN", lang: "en", name: "Mei", payload, publicBase: "https://id.example.com/svc" });
    expect(en.subject).toBe("A new sign-in to your account");
    expect(en.text).toContain("Firefox 145 on Linux, address 192.0.2.30, at 2026-11-26 02:01 UTC");
    expect(en.text).toContain("Review your sessions: https://id.example.com/svc/account/security");
    expect(en.html).toContain('<a href="https://id.example.com/svc/account/security">');
    const zh = renderMail({ kind: "NEW_SIGN_IN", lang: "zh-TW", name: "", payload: { ...payload, device: "" } });
    expect(zh.subject).toBe("您的帳號有新的登入");
    expect(zh.text).toContain("未知的裝置，位址 192.0.2.30，時間 2026-11-26 02:01 UTC");
    expect(zh.text).not.toContain("account/security");
  });
});

test("every login answers a deviceToken, timestamps as ISO", async () => {
  const { email } = await t.createUser({ password: PASSWORD });
  const res = await login(email, { from: "192.0.2.50" });
  expect(res.body.data).toEqual(
    expect.objectContaining({ deviceToken: expect.stringMatching(/^[\w-]{43}$/), user: expect.objectContaining({ lastLogin: expect.stringMatching(ISO_Z) }) }),
  );
});
