/**
 * Second factors (issue 27 items 1-7), through HTTP on every leg: TOTP codes are computed here
 * with an implementation of the test's own (node:crypto HMAC, checked against RFC 6238's test
 * vectors), passkeys with a software authenticator (test/support/software-authenticator.ts).
 * Enrolment, the login's second step and its mfaToken, replay, recovery codes, passwordless
 * sign-in, counter regression, one user's passkey against another, MFA_REQUIRED_ROLES and an
 * ADMIN's removal.
 */
import { afterAll, beforeAll, describe, expect, leg, test } from "./legs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { decodeJwt } from "jose";
import { auditLog, mfaChallenges, outbox, users } from "../src/db/schema";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { issueEnrolCode } from "../src/features/mfa/enrol-code";
import { channelsFor } from "../src/features/notifications/channels";
import { startOutboxSender } from "../src/features/notifications/sender";
import { renderMail } from "../src/features/notifications/templates";
import { createLogging } from "../src/logging/logger";
import { sealedFor } from "../src/security/webauthn";
import { makeTestApp, TEST_SECRET, type TestApp, uniqueEmail } from "./helpers";
import { expectFailure, invalidBody } from "./scenario";
import { smtpUnavailable, startMailbox } from "./smtp-server";
import { serveProgram } from "./support/program";
import { SoftwareAuthenticator } from "./support/software-authenticator";
import { hotp, STEP_MS, totpAt } from "./support/totp";

const PASSWORD = "Passw0rd!";
const RP_ID = "id.example.test";
const ORIGIN = `https://${RP_ID}`;

test("the test's own TOTP matches RFC 6238's SHA-1 test vectors", () => {
  const key = Buffer.from("12345678901234567890");
  const vectors: [number, string][] = [
    [59, "94287082"],
    [1111111109, "07081804"],
    [1111111111, "14050471"],
    [1234567890, "89005924"],
    [2000000000, "69279037"],
    [20000000000, "65353130"],
  ];
  for (const [seconds, code] of vectors) expect(hotp(key, Math.floor(seconds / 30), 8)).toBe(code);
});

/* ---- The app, on a clock the tests move ---- */

// The middle of a step, so ±1 step around it is unambiguous.
let clock = Math.floor(Date.now() / STEP_MS) * STEP_MS + STEP_MS / 2;
let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp({ PUBLIC_URL: ORIGIN, LOGIN_MAX_FAILURES: "50" }, { now: () => clock });
});
afterAll(() => t.close());

const login = (email: string, app: TestApp = t) => app.request("POST", "/api/auth/login", { body: { email, password: PASSWORD } });
const secondStep = (body: Record<string, unknown>, app: TestApp = t) => app.request("POST", "/api/auth/login/mfa", { body });
const amrOf = (token: string) => decodeJwt(token).amr;

async function signedIn(app: TestApp = t, roles: ("USER" | "ADMIN")[] = ["USER"]) {
  const { id, email } = await app.createUser({ email: uniqueEmail("mfa"), password: PASSWORD, roles });
  const res = await login(email, app);
  expect(res.status).toBe(200);
  return { id, email, token: res.body.data.token as string };
}

/** TOTP enrolled and confirmed at the clock's step (with `extra` in the confirmation: an enrolCode): the secret and the recovery codes. */
async function withTotp(token: string, app: TestApp = t, extra: Record<string, unknown> = {}) {
  const started = await app.request("POST", "/api/account/mfa/totp", { token });
  expect(started.status).toBe(200);
  const { secret } = started.body;
  const confirmed = await app.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, clock), ...extra } });
  expect(confirmed.status).toBe(200);
  return { secret: secret as string, recoveryCodes: confirmed.body.recoveryCodes as string[] };
}

/** The first step for an account with a factor: its mfaToken (and the rest of the answer). */
async function firstStep(email: string, app: TestApp = t) {
  const res = await login(email, app);
  expect(res.status).toBe(200);
  expect(res.body.data.mfaRequired).toBe(true);
  return res.body.data as { mfaToken: string; methods: string[]; expiresIn: number; passkeyOptions?: { challenge: string } };
}

const outboxKinds = async (userId: number) =>
  (await t.db.select({ kind: outbox.kind, payload: outbox.payload }).from(outbox)).filter((row) => (row.payload as { userId?: number })?.userId === userId).map((row) => row.kind);

describe("TOTP", () => {
  test("enrol (secret, otpauth URI, QR as SVG), confirm with a code: 10 recovery codes, the summary, MFA_ENABLED mailed", async () => {
    const { id, token } = await signedIn();
    const started = await t.request("POST", "/api/account/mfa/totp", { token });
    expect(started.status).toBe(200);
    expect(started.body.secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(started.body.otpauthUri).toStartWith("otpauth://totp/usersvc:");
    expect(started.body.otpauthUri).toContain(`secret=${started.body.secret}`);
    expect(started.body.qrSvg).toStartWith("<svg");
    // Pending: not yet a factor.
    expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: false, passkeys: 0, recoveryCodesLeft: 0 });
    const wrong = await t.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(started.body.secret, clock - 3 * STEP_MS) } });
    expectFailure(wrong, 400, { message: "The code is not right", errorCode: "INVALID_CODE" });
    const confirmed = await t.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(started.body.secret, clock) } });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.recoveryCodes).toHaveLength(10);
    for (const code of confirmed.body.recoveryCodes) expect(code).toMatch(/^[0-9a-z]{5}-[0-9a-z]{5}$/);
    expect(new Set(confirmed.body.recoveryCodes).size).toBe(10);
    expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: true, passkeys: 0, recoveryCodesLeft: 10 });
    expect(await outboxKinds(id)).toContain("MFA_ENABLED");
    // Stored sealed, never plain.
    const again = await t.request("POST", "/api/account/mfa/totp", { token });
    expectFailure(again, 409, { message: "An authenticator app is already set up; remove it first", errorCode: "TOTP_ALREADY_ENABLED" });
  });

  test("enrolment needs a sign-in within 10 minutes: 403 REAUTHENTICATION_REQUIRED after", async () => {
    const { token } = await signedIn();
    clock += 11 * 60_000;
    for (const path of ["/api/account/mfa/totp", "/api/account/passkeys/options"]) {
      const res = await t.request("POST", path, { token });
      expect({ path, status: res.status, errorCode: res.body.errorCode }).toEqual({ path, status: 403, errorCode: "REAUTHENTICATION_REQUIRED" });
    }
  });

  test("sign in: the password alone answers mfaRequired and no token; a code completes it (amr pwd+otp); the same code is refused again", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    clock += STEP_MS;
    const first = await login(email);
    expect(first.body.data).toEqual({ mfaRequired: true, mfaToken: expect.any(String), methods: ["totp", "recovery_code"], expiresIn: 300 });
    expect(first.text).not.toContain('"token"');
    // The mfaToken is no bearer token.
    expect((await t.request("GET", "/api/search/profile", { token: first.body.data.mfaToken })).status).toBe(401);
    const code = totpAt(secret, clock);
    const done = await secondStep({ mfaToken: first.body.data.mfaToken, code });
    expect(done.status).toBe(200);
    expect(done.body.data).toMatchObject({ tokenType: "Bearer", user: { email }, refreshToken: expect.any(String) });
    expect(amrOf(done.body.data.token)).toEqual(["pwd", "otp"]);
    const sessions = await t.request<{ amr: string[]; current: boolean }[]>("GET", "/api/account/sessions", { token: done.body.data.token });
    expect(sessions.body.find((s) => s.current)?.amr).toEqual(["pwd", "otp"]);
    // Replay: the same code with a fresh mfaToken.
    const replay = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code });
    expectFailure(replay, 401, { message: "The code is wrong, or the sign-in has expired: sign in again", errorCode: "INVALID_MFA_CODE" });
  });

  test("±1 step: a code one step old is accepted, one two steps old is refused (moved clock)", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    clock += 10 * STEP_MS;
    const stale = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: totpAt(secret, clock - 2 * STEP_MS) });
    expectFailure(stale, 401, { message: "The code is wrong, or the sign-in has expired: sign in again", errorCode: "INVALID_MFA_CODE" });
    const late = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: totpAt(secret, clock - STEP_MS) });
    expect(late.status).toBe(200);
  });

  test("a recovery code works once (amr pwd+rec, RECOVERY_CODE_USED mailed, one fewer left)", async () => {
    const { id, email, token } = await signedIn();
    const { recoveryCodes } = await withTotp(token);
    const used = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[3].toUpperCase() });
    expect(used.status).toBe(200);
    expect(amrOf(used.body.data.token)).toEqual(["pwd", "rec"]);
    expect(await outboxKinds(id)).toContain("RECOVERY_CODE_USED");
    expect((await t.request("GET", "/api/account/mfa", { token })).body.recoveryCodesLeft).toBe(9);
    const again = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[3] });
    expectFailure(again, 401, { message: "The code is wrong, or the sign-in has expired: sign in again", errorCode: "INVALID_MFA_CODE" });
  });

  test("recovery codes regenerated with the password: the old ones stop working", async () => {
    const { email, token } = await signedIn();
    const { recoveryCodes } = await withTotp(token);
    const wrong = await t.request("POST", "/api/account/mfa/recovery-codes", { token, body: { password: "wrong-Passw0rd!" } });
    expect(wrong.status).toBe(400);
    const fresh = await t.request("POST", "/api/account/mfa/recovery-codes", { token, body: { password: PASSWORD } });
    expect(fresh.status).toBe(200);
    expect(fresh.body.recoveryCodes).toHaveLength(10);
    const old = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[0] });
    expect(old.status).toBe(401);
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: fresh.body.recoveryCodes[0] })).status).toBe(200);
  });

  test("removing TOTP with the password ends every session of the user, the caller's too; sign-in is one step again, MFA_DISABLED mailed", async () => {
    const { id, email, token } = await signedIn();
    const { recoveryCodes } = await withTotp(token);
    const other = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[0] });
    expect(other.status).toBe(200);
    const removed = await t.request("DELETE", "/api/account/mfa/totp", { token, body: { password: PASSWORD } });
    expect(removed.status).toBe(204);
    expect(await outboxKinds(id)).toContain("MFA_DISABLED");
    expect((await t.request("GET", "/api/account/mfa", { token })).status).toBe(401);
    expect((await t.request("GET", "/api/account/mfa", { token: other.body.data.token })).status).toBe(401);
    expect((await t.request("POST", "/api/auth/refresh", { body: { refreshToken: other.body.data.refreshToken } })).status).toBe(401);
    const again = await login(email);
    expect(again.body.data.token).toEqual(expect.any(String));
    expect((await t.request("GET", "/api/account/mfa", { token: again.body.data.token })).body).toEqual({ totp: false, passkeys: 0, recoveryCodesLeft: 0 });
  });
});

describe("mfaToken", () => {
  test("expired after 5 minutes, used once, burnt by 5 wrong codes", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    const expiring = await firstStep(email);
    clock += 5 * 60_000 + 1000;
    expect((await secondStep({ mfaToken: expiring.mfaToken, code: totpAt(secret, clock) })).status).toBe(401);

    clock += STEP_MS;
    const once = await firstStep(email);
    expect((await secondStep({ mfaToken: once.mfaToken, code: totpAt(secret, clock) })).status).toBe(200);
    clock += STEP_MS;
    expect((await secondStep({ mfaToken: once.mfaToken, code: totpAt(secret, clock) })).status).toBe(401);

    clock += STEP_MS;
    const burnt = await firstStep(email);
    for (let i = 0; i < 5; i++) expect((await secondStep({ mfaToken: burnt.mfaToken, code: "000000" === totpAt(secret, clock) ? "111111" : "000000" })).status).toBe(401);
    expect((await secondStep({ mfaToken: burnt.mfaToken, code: totpAt(secret, clock) })).status).toBe(401);
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: totpAt(secret, clock) })).status).toBe(200);
  });

  test("five wrong recovery codes burn the mfaToken as five wrong TOTP codes do, each audited MFA_FAILED", async () => {
    const { id, email, token } = await signedIn();
    const { secret, recoveryCodes } = await withTotp(token);
    clock += STEP_MS;
    const { mfaToken } = await firstStep(email);
    // Well-formed and not the account's: one of another account's, and made-up ones.
    const other = await withTotp((await signedIn()).token);
    clock += STEP_MS;
    const statuses = [];
    for (const code of [other.recoveryCodes[0], "aaaaa-bbbbb", "ccccc-ddddd", "eeeee-fffff", "ggggg-hhhhh"]) statuses.push((await secondStep({ mfaToken, code })).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expectFailure(await secondStep({ mfaToken, code: totpAt(secret, clock) }), 401, { errorCode: "INVALID_MFA_CODE" });
    expectFailure(await secondStep({ mfaToken, code: recoveryCodes[0] }), 401, { errorCode: "INVALID_MFA_CODE" });
    const audits = await t.db.select().from(auditLog).where(eq(auditLog.action, "MFA_FAILED"));
    expect(audits.filter((row) => row.subjectId === String(id)).map((row) => [row.actor, row.details])).toEqual(Array(5).fill([email, { address: expect.any(String) }]));
    // The codes are the account's still, and a fresh mfaToken completes.
    expect((await t.request("GET", "/api/account/mfa", { token })).body.recoveryCodesLeft).toBe(10);
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[0] })).status).toBe(200);
  });

  test.each([
    ["TOTP", (secret: string) => (totpAt(secret, clock) === "000000" ? "111111" : "000000")],
    ["recovery", () => "aaaaa-bbbbb"],
  ])("wrong %s codes count in the e-mail's login throttle: then even the right password gets 429", async (_kind, wrongCode) => {
    const app = await makeTestApp({ PUBLIC_URL: ORIGIN }, { now: () => clock });
    try {
      const { email, token } = await signedIn(app);
      const { secret } = await withTotp(token, app);
      const { mfaToken } = await firstStep(email, app);
      const wrong = wrongCode(secret);
      for (let i = 0; i < 5; i++) expect((await secondStep({ mfaToken, code: wrong }, app)).status).toBe(401);
      const throttled = await login(email, app);
      expect(throttled.status).toBe(429);
      expect(throttled.headers.get("retry-after")).toMatch(/^\d+$/);
      const audits = await app.db.select().from(auditLog).where(eq(auditLog.action, "MFA_FAILED"));
      expect(audits).toHaveLength(5);
    } finally {
      await app.close();
    }
  });

  test("the first step writes nothing; the second writes the token's id as used, and a wrong code is counted by it", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    clock += STEP_MS;
    const rows = async () => (await t.db.select().from(mfaChallenges)).length;
    const before = await rows();
    const { mfaToken } = await firstStep(email);
    expect(await rows()).toBe(before);
    const wrong = totpAt(secret, clock) === "000000" ? "111111" : "000000";
    expect((await secondStep({ mfaToken, code: wrong })).status).toBe(401);
    expect(await rows()).toBe(before + 1);
    expect((await secondStep({ mfaToken, code: totpAt(secret, clock) })).status).toBe(200);
    expect(await rows()).toBe(before + 2);
    clock += STEP_MS;
  });

  test("two concurrent uses of one mfaToken: exactly one signs in", async () => {
    const { email, token } = await signedIn();
    const { secret, recoveryCodes } = await withTotp(token);
    clock += STEP_MS;
    const { mfaToken } = await firstStep(email);
    const answers = await Promise.all([secondStep({ mfaToken, code: totpAt(secret, clock) }), secondStep({ mfaToken, code: recoveryCodes[0] })]);
    expect(answers.map((res) => res.status).sort()).toEqual([200, 401]);
    clock += STEP_MS;
  });

  test("an mfaToken altered, sealed for another purpose (a passwordless challenge) or an earlier release's random one is refused", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    clock += STEP_MS;
    const code = totpAt(secret, clock);
    const { mfaToken } = await firstStep(email);
    const middle = mfaToken.length - 10;
    const altered = `${mfaToken.slice(0, middle)}${mfaToken[middle] === "A" ? "B" : "A"}${mfaToken.slice(middle + 1)}`;
    const passkeyChallenge = (await t.request("POST", "/api/auth/passkey/options")).body.data.challenge as string;
    const refused = [altered, Buffer.from(passkeyChallenge, "base64url").toString("utf8"), sealedFor(t.cipher, "passkey", clock + 60_000), "x".repeat(43)];
    for (const forged of refused) expectFailure(await secondStep({ mfaToken: forged, code }), 401, { errorCode: "INVALID_MFA_CODE" });
    expect((await secondStep({ mfaToken, code })).status).toBe(200);
    clock += STEP_MS;
  });

  test("an mfaToken issued before a password change or a deactivation does not complete", async () => {
    const { id, email, token } = await signedIn();
    const { secret } = await withTotp(token);
    clock += STEP_MS;
    const beforeChange = await firstStep(email);
    const newPassword = "N3wPassw0rd!";
    const changed = await t.request("POST", "/api/auth/change-password", { token, body: { currentPassword: PASSWORD, newPassword, confirmNewPassword: newPassword } });
    expect(changed.status).toBe(200);
    expectFailure(await secondStep({ mfaToken: beforeChange.mfaToken, code: totpAt(secret, clock) }), 401, { errorCode: "INVALID_MFA_CODE" });
    const fresh = await t.request("POST", "/api/auth/login", { body: { email, password: newPassword } });
    expect(fresh.body.data.mfaRequired).toBe(true);
    const admin = await t.admin();
    expect((await t.request("POST", `/api/users/${id}/deactivate`, { token: admin.token })).status).toBe(200);
    expectFailure(await secondStep({ mfaToken: fresh.body.data.mfaToken, code: totpAt(secret, clock) }), 403, { errorCode: "ACCOUNT_DISABLED" });
    clock += STEP_MS;
  });

  test("a body with both or neither of code and passkey: 400", async () => {
    const res = await secondStep({ mfaToken: "x" });
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual(["code: give either code or passkey"]);
  });
});

describe("passkeys", () => {
  const authenticator = () => new SoftwareAuthenticator(RP_ID, ORIGIN);

  async function withPasskey(token: string, device = authenticator(), app: TestApp = t) {
    const options = await app.request("POST", "/api/account/passkeys/options", { token });
    expect(options.status).toBe(200);
    const added = await app.request("POST", "/api/account/passkeys", { token, body: { name: "Laptop", response: device.register(options.body) } });
    expect(added.status).toBe(201);
    return { device, passkey: added.body as { id: string; name: string; createdAt: string; lastUsedAt: string | null; recoveryCodes?: string[] } };
  }

  const passwordless = async (device: SoftwareAuthenticator, choice: Parameters<SoftwareAuthenticator["assert"]>[1] = {}) => {
    const options = await t.request("POST", "/api/auth/passkey/options");
    expect(options.status).toBe(200);
    expect(options.body.data.userVerification).toBe("required");
    return t.request("POST", "/api/auth/passkey", { body: { response: device.assert(options.body.data, choice) } });
  };

  test("register (PASSKEY_ADDED mailed), list, rename; sign in with it alone (amr hwk)", async () => {
    const { id, email, token } = await signedIn();
    const options = await t.request("POST", "/api/account/passkeys/options", { token });
    expect(options.body).toMatchObject({ rp: { id: RP_ID }, authenticatorSelection: { residentKey: "required" }, attestation: "none" });
    const { device, passkey } = await withPasskey(token);
    // The account's first second factor: its recovery codes come with it (below).
    expect(passkey).toEqual({ id: expect.any(String), name: "Laptop", createdAt: expect.any(String), lastUsedAt: null, recoveryCodes: expect.any(Array) });
    expect(await outboxKinds(id)).toContain("PASSKEY_ADDED");
    const renamed = await t.request("PATCH", `/api/account/passkeys/${passkey.id}`, { token, body: { name: "Work laptop" } });
    expect(renamed.body.name).toBe("Work laptop");
    expect((await t.request("GET", "/api/account/passkeys", { token })).body).toEqual([{ ...renamed.body }]);
    const res = await passwordless(device);
    expect(res.status).toBe(200);
    expect(res.body.data.user.email).toBe(email);
    expect(amrOf(res.body.data.token)).toEqual(["hwk"]);
    expect((await t.request("GET", "/api/account/passkeys", { token })).body[0].lastUsedAt).toEqual(expect.any(String));
  });

  test("a passkey-only account: the first passkey answers 10 recovery codes, shown once; the password and a recovery code sign in, each code once; new codes with the password", async () => {
    const { id, email, token } = await signedIn();
    const { passkey } = await withPasskey(token);
    const codes = passkey.recoveryCodes!;
    expect(codes).toHaveLength(10);
    for (const code of codes) expect(code).toMatch(/^[0-9a-z]{5}-[0-9a-z]{5}$/);
    expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: false, passkeys: 1, recoveryCodesLeft: 10 });
    // A second passkey answers none: the codes were shown once and stay as they are.
    expect((await withPasskey(token)).passkey).toEqual({ id: expect.any(String), name: "Laptop", createdAt: expect.any(String), lastUsedAt: null });
    expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: false, passkeys: 2, recoveryCodesLeft: 10 });
    // The passkeys lost: the password, then a recovery code.
    const first = await firstStep(email);
    expect(first.methods).toEqual(["recovery_code", "passkey"]);
    const used = await secondStep({ mfaToken: first.mfaToken, code: codes[0] });
    expect(used.status).toBe(200);
    expect(amrOf(used.body.data.token)).toEqual(["pwd", "rec"]);
    expect(await outboxKinds(id)).toContain("RECOVERY_CODE_USED");
    const again = await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: codes[0] });
    expectFailure(again, 401, { message: "The code is wrong, or the sign-in has expired: sign in again", errorCode: "INVALID_MFA_CODE" });
    // New ones with the password, as with an authenticator app.
    const fresh = await t.request("POST", "/api/account/mfa/recovery-codes", { token: used.body.data.token, body: { password: PASSWORD } });
    expect([fresh.status, fresh.body.recoveryCodes?.length]).toEqual([200, 10]);
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: codes[1] })).status).toBe(401);
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: fresh.body.recoveryCodes[1] })).status).toBe(200);
  });

  test("a passkey added to an account that has recovery codes (from its authenticator app) answers none and leaves them as they are", async () => {
    const { email, token } = await signedIn();
    const { recoveryCodes } = await withTotp(token);
    const { passkey } = await withPasskey(token);
    expect(Object.keys(passkey).sort()).toEqual(["createdAt", "id", "lastUsedAt", "name"]);
    expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: true, passkeys: 1, recoveryCodesLeft: 10 });
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: recoveryCodes[0] })).status).toBe(200);
  });

  test("removing a passkey ends every session of the user, the caller's too; MFA_DISABLED mailed", async () => {
    const { id, email, token } = await signedIn();
    const { device, passkey } = await withPasskey(token);
    const other = await passwordless(device);
    expect(other.status).toBe(200);
    expect((await t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token, body: { password: PASSWORD } })).status).toBe(204);
    expect(await outboxKinds(id)).toContain("MFA_DISABLED");
    expect((await t.request("GET", "/api/account/passkeys", { token })).status).toBe(401);
    expect((await t.request("GET", "/api/account/passkeys", { token: other.body.data.token })).status).toBe(401);
    expect((await t.request("POST", "/api/auth/refresh", { body: { refreshToken: other.body.data.refreshToken } })).status).toBe(401);
    const again = await login(email);
    expect((await t.request("GET", "/api/account/passkeys", { token: again.body.data.token })).body).toEqual([]);
  });

  test("removing a passkey needs a sign-in within 10 minutes and a proof, as removing TOTP does: the password or a current code", async () => {
    const { id, email, token } = await signedIn();
    const { device, passkey } = await withPasskey(token);
    const remove = (bearer: string, body?: Record<string, unknown>) => t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token: bearer, ...(body && { body }) });
    const kept = async () => expect((await t.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: false, passkeys: 1, recoveryCodesLeft: 10 });
    // No proof, or both: 400 on the body; a wrong password (counted like a login) or a code without an authenticator app: 400.
    expectFailure(await remove(token, {}), 400, invalidBody(["code: give exactly one of code, password, stepUpToken"]));
    expectFailure(await remove(token, { code: "123456", password: PASSWORD }), 400, invalidBody(["code: give exactly one of code, password, stepUpToken"]));
    expectFailure(await remove(token, { password: "wrong-Passw0rd!" }), 400, invalidBody(["currentPassword: is not the current password"]));
    expectFailure(await remove(token, { code: "123456" }), 400, { message: "The code is not right", errorCode: "INVALID_CODE" });
    // Each wrong proof counted as a login's would be, and audited.
    const audits = await t.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.subjectId, String(id)));
    expect(audits.filter((a) => a.action === "PASSWORD_CHECK_FAILED" || a.action === "MFA_FAILED").map((a) => a.action)).toEqual(["PASSWORD_CHECK_FAILED", "MFA_FAILED"]);
    await kept();
    // An access token from an older sign-in: 403 even with the password; the passkey and the recovery codes stay.
    clock += 11 * 60_000;
    expectFailure(await remove(token, { password: PASSWORD }), 403, { errorCode: "REAUTHENTICATION_REQUIRED" });
    await kept();
    // Signed in again (password + the passkey): the password removes it.
    const first = await firstStep(email);
    const fresh = await secondStep({ mfaToken: first.mfaToken, passkey: device.assert(first.passkeyOptions!, { uv: false }) });
    expect(fresh.status).toBe(200);
    expect((await remove(fresh.body.data.token, { password: PASSWORD })).status).toBe(204);
  }, 15_000);

  test("a passkey removed with a current code of the authenticator app: that code is spent", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    const { passkey } = await withPasskey(token);
    clock += STEP_MS;
    const code = totpAt(secret, clock);
    expectFailure(await t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token, body: { code: totpAt(secret, clock - 3 * STEP_MS) } }), 400, {
      errorCode: "INVALID_CODE",
    });
    expect((await t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token, body: { code } })).status).toBe(204);
    expectFailure(await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code }), 401, { errorCode: "INVALID_MFA_CODE" });
    clock += STEP_MS;
  }, 15_000);

  test("an mfaToken issued before one of two factors was removed does not complete with the other", async () => {
    const { email, token } = await signedIn();
    const { secret } = await withTotp(token);
    const { passkey } = await withPasskey(token);
    clock += STEP_MS;
    const { mfaToken } = await firstStep(email);
    expect((await t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token, body: { password: PASSWORD } })).status).toBe(204);
    expectFailure(await secondStep({ mfaToken, code: totpAt(secret, clock) }), 401, { errorCode: "INVALID_MFA_CODE" });
    expect((await secondStep({ mfaToken: (await firstStep(email)).mfaToken, code: totpAt(secret, clock) })).status).toBe(200);
    clock += STEP_MS;
  });

  test("passwordless without user verification is refused", async () => {
    const { token } = await signedIn();
    const { device } = await withPasskey(token);
    expectFailure(await passwordless(device, { uv: false }), 401, { message: "The passkey was not accepted", errorCode: "INVALID_PASSKEY" });
  });

  test("a right password answers mfaRequired with passkeyOptions; the passkey completes it (amr pwd+hwk)", async () => {
    const { email, token } = await signedIn();
    const { device } = await withPasskey(token);
    const first = await firstStep(email);
    expect(first.methods).toEqual(["recovery_code", "passkey"]);
    // (Not toMatchObject with expect.any: Bun's matcher writes itself into the object it matched.)
    expect(first.passkeyOptions?.challenge).toMatch(/^[\w-]{43}$/);
    expect(first.passkeyOptions).toMatchObject({ rpId: RP_ID, userVerification: "preferred" });
    const done = await secondStep({ mfaToken: first.mfaToken, passkey: device.assert(first.passkeyOptions!, { uv: false }) });
    expect(done.status).toBe(200);
    expect(amrOf(done.body.data.token)).toEqual(["pwd", "hwk"]);
  });

  test("a cloned authenticator (its counter behind) is refused and audited", async () => {
    const { id, token } = await signedIn();
    const { device } = await withPasskey(token);
    expect((await passwordless(device)).status).toBe(200);
    expect((await passwordless(device)).status).toBe(200);
    const clone = await passwordless(device, { counter: 1 });
    expectFailure(clone, 401, { message: "The passkey was not accepted", errorCode: "INVALID_PASSKEY" });
    const audits = await t.db.select().from(auditLog).where(eq(auditLog.action, "PASSKEY_COUNTER_REGRESSION"));
    expect(audits.filter((a) => a.subjectId === String(id))).toHaveLength(1);
  });

  test("one user's passkey signs in no one else: not as another's second step, not under another's user handle", async () => {
    const ann = await signedIn();
    const bob = await signedIn();
    const { device } = await withPasskey(ann.token);
    await withPasskey(bob.token);
    const first = await firstStep(bob.email);
    expect((await secondStep({ mfaToken: first.mfaToken, passkey: device.assert(first.passkeyOptions!) })).status).toBe(401);
    const credential = device.credentials[0];
    const forged = { ...credential, userHandle: Buffer.from(String(bob.id)).toString("base64url") };
    expectFailure(await passwordless(device, { credential: forged }), 401, { message: "The passkey was not accepted", errorCode: "INVALID_PASSKEY" });
  });

  test("an assertion from another origin is refused", async () => {
    const { token } = await signedIn();
    const { device } = await withPasskey(token);
    expect((await passwordless(device, { origin: "https://evil.example" })).status).toBe(401);
  });

  const INVALID_PASSKEY = { message: "The passkey was not accepted", errorCode: "INVALID_PASSKEY" };
  const passwordlessOptions = async () => (await t.request("POST", "/api/auth/passkey/options")).body.data as { challenge: string };
  const answer = (response: ReturnType<SoftwareAuthenticator["assert"]>) => t.request("POST", "/api/auth/passkey", { body: { response } });
  const regressionsOf = async (id: number) =>
    (await t.db.select().from(auditLog).where(eq(auditLog.action, "PASSKEY_COUNTER_REGRESSION"))).filter((a) => a.subjectId === String(id));

  test("a passwordless challenge is answered once: the same assertion again (no counter alarm), or a new one for it, is refused; a refused answer uses it up too", async () => {
    const { id, token } = await signedIn();
    const { device } = await withPasskey(token);
    const options = await passwordlessOptions();
    const response = device.assert(options);
    expect((await answer(response)).status).toBe(200);
    expectFailure(await answer(response), 401, INVALID_PASSKEY);
    expectFailure(await answer(device.assert(options)), 401, INVALID_PASSKEY);
    expect(await regressionsOf(id)).toEqual([]);
    const refusedOnce = await passwordlessOptions();
    expectFailure(await answer(device.assert(refusedOnce, { uv: false })), 401, INVALID_PASSKEY);
    expectFailure(await answer(device.assert(refusedOnce)), 401, INVALID_PASSKEY);
    expect((await passwordless(device)).status).toBe(200);
  });

  test("a passwordless challenge lives 5 minutes", async () => {
    const { token } = await signedIn();
    const { device } = await withPasskey(token);
    const late = await passwordlessOptions();
    const inTime = await passwordlessOptions();
    clock += 5 * 60_000 - 1000;
    expect((await answer(device.assert(inTime))).status).toBe(200);
    clock += 2000;
    expectFailure(await answer(device.assert(late)), 401, INVALID_PASSKEY);
  });

  test("a challenge issued for another ceremony, or altered, is refused", async () => {
    const { email, token } = await signedIn();
    const { device } = await withPasskey(token);
    // Registration's and a second step's challenges at passwordless sign-in.
    const registration = (await t.request("POST", "/api/account/passkeys/options", { token })).body;
    expectFailure(await answer(device.assert(registration)), 401, INVALID_PASSKEY);
    const first = await firstStep(email);
    expectFailure(await answer(device.assert(first.passkeyOptions!)), 401, INVALID_PASSKEY);
    // Passwordless's at a second step and at registration.
    const options = await passwordlessOptions();
    expect((await secondStep({ mfaToken: first.mfaToken, passkey: device.assert(options) })).status).toBe(401);
    const added = await t.request("POST", "/api/account/passkeys", {
      token,
      body: { name: "Other", response: new SoftwareAuthenticator(RP_ID, ORIGIN).register({ ...registration, challenge: options.challenge }) },
    });
    expectFailure(added, 400, { errorCode: "PASSKEY_REJECTED" });
    // Sealed by the server's own key, but for another ceremony.
    const sealedForRegistration = Buffer.from(sealedFor(t.cipher, "register", clock + 60_000)).toString("base64url");
    expectFailure(await answer(device.assert({ challenge: sealedForRegistration })), 401, INVALID_PASSKEY);
    // One character of a passwordless challenge changed.
    const fresh = await passwordlessOptions();
    const middle = fresh.challenge.length >> 1;
    const altered = `${fresh.challenge.slice(0, middle)}${fresh.challenge[middle] === "A" ? "B" : "A"}${fresh.challenge.slice(middle + 1)}`;
    expectFailure(await answer(device.assert({ challenge: altered })), 401, INVALID_PASSKEY);
    expect((await answer(device.assert(fresh))).status).toBe(200);
  });

  test("passwordless options: PASSKEY_OPTIONS_MAX_PER_IP a minute per client address, then 429 with Retry-After and no challenge written", async () => {
    const app = await makeTestApp({ PUBLIC_URL: ORIGIN, PASSKEY_OPTIONS_MAX_PER_IP: "3", TRUST_PROXY: "1" }, { now: () => clock });
    try {
      const from = (address: string) => app.request("POST", "/api/auth/passkey/options", { headers: { "x-forwarded-for": address } });
      for (let i = 0; i < 3; i++) expect((await from("203.0.113.30")).status).toBe(200);
      const challenges = await app.db.select().from(mfaChallenges);
      clock += 20_000;
      expectFailure(await from("203.0.113.30"), 429, { message: "Too many requests, try again later", errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": "40" } });
      expect(await app.db.select().from(mfaChallenges)).toHaveLength(challenges.length);
      expect((await from("203.0.113.31")).status).toBe(200);
      clock += 40_000;
      expect((await from("203.0.113.30")).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  test("without PUBLIC_URL or RP_ID every passkey route answers 400 PASSKEYS_NOT_CONFIGURED, whatever the Host header", async () => {
    const app = await makeTestApp({}, { now: () => clock });
    try {
      const { token } = await signedIn(app);
      const refused = { message: "Passkeys are not configured on this server (PUBLIC_URL or RP_ID)", errorCode: "PASSKEYS_NOT_CONFIGURED" };
      expectFailure(await app.request("POST", "/api/auth/passkey/options", { headers: { host: RP_ID } }), 400, refused);
      expectFailure(await app.request("POST", "/api/account/passkeys/options", { token, headers: { host: RP_ID } }), 400, refused);
    } finally {
      await app.close();
    }
  });

  describe("step-up: what stands in for the password", () => {
    const stepUp = (token: string, body: Record<string, unknown>) => t.request("POST", "/api/account/step-up", { token, body });
    async function byPasskey(token: string, device: SoftwareAuthenticator, choice: Parameters<SoftwareAuthenticator["assert"]>[1] = {}) {
      const options = await t.request("POST", "/api/account/step-up/passkey-options", { token });
      expect(options.status).toBe(200);
      expect(options.body.userVerification).toBe("required");
      return stepUp(token, { passkey: device.assert(options.body, choice) });
    }
    /** An account without a password (as one a provider made): a passkey and a session of it. */
    async function passwordOnlyGone() {
      const { id, token } = await signedIn();
      const { device, passkey } = await withPasskey(token);
      await t.db.update(users).set({ passwordHash: null }).where(eq(users.id, id));
      return { id, token, device, passkey };
    }

    test("an account without a password removes its passkey with a passkey's step-up; the password, nothing, or a recent sign-in alone does not", async () => {
      const { token, device, passkey } = await passwordOnlyGone();
      const remove = (body: Record<string, unknown>) => t.request("DELETE", `/api/account/passkeys/${passkey.id}`, { token, body });
      expectFailure(await remove({}), 400, invalidBody(["code: give exactly one of code, password, stepUpToken"]));
      expectFailure(await remove({ password: PASSWORD }), 400, invalidBody(["currentPassword: is not the current password"]));
      expectFailure(await remove({ stepUpToken: "not-a-token" }), 403, { errorCode: "INVALID_STEP_UP" });
      const proved = await byPasskey(token, device);
      expect(proved.status).toBe(200);
      expect(proved.body).toEqual({ stepUpToken: expect.any(String), expiresIn: 300, method: "hwk" });
      expect((await remove({ stepUpToken: proved.body.stepUpToken })).status).toBe(204);
      expect((await t.request("GET", "/api/account/passkeys", { token })).status).toBe(401);
    });

    test("a passkey's step-up: user verification required, the caller's own passkey only, its challenge answered once", async () => {
      const { token, device } = await passwordOnlyGone();
      expectFailure(await byPasskey(token, device, { uv: false }), 401, { errorCode: "INVALID_PASSKEY" });
      const other = await passwordOnlyGone();
      expectFailure(await byPasskey(token, other.device), 401, { errorCode: "INVALID_PASSKEY" });
      const options = await t.request("POST", "/api/account/step-up/passkey-options", { token });
      const response = device.assert(options.body);
      expect((await stepUp(token, { passkey: response })).status).toBe(200);
      expectFailure(await stepUp(token, { passkey: response }), 401, { errorCode: "INVALID_PASSKEY" });
      // A sign-in's challenge is no step-up's.
      const signIn = await t.request("POST", "/api/auth/passkey/options");
      expectFailure(await stepUp(token, { passkey: device.assert(signIn.body.data) }), 401, { errorCode: "INVALID_PASSKEY" });
    });

    test("a step-up token is single use, this session's only, and lives 5 minutes", async () => {
      const { token, device } = await passwordOnlyGone();
      const regenerate = (bearer: string, stepUpToken: string) => t.request("POST", "/api/account/mfa/recovery-codes", { token: bearer, body: { stepUpToken } });
      const first = (await byPasskey(token, device)).body.stepUpToken as string;
      expect((await regenerate(token, first)).status).toBe(200);
      expectFailure(await regenerate(token, first), 403, { errorCode: "INVALID_STEP_UP" });
      // Another session of the same account (a passwordless sign-in) cannot use this one's.
      const options = await t.request("POST", "/api/auth/passkey/options");
      const otherSession = (await t.request("POST", "/api/auth/passkey", { body: { response: device.assert(options.body.data) } })).body.data.token as string;
      const second = (await byPasskey(token, device)).body.stepUpToken as string;
      expectFailure(await regenerate(otherSession, second), 403, { errorCode: "INVALID_STEP_UP" });
      clock += 5 * 60_000 + 1;
      expectFailure(await regenerate(token, second), 403, { errorCode: "INVALID_STEP_UP" });
    });

    test("a TOTP code's step-up spends the code; a wrong one is counted and audited MFA_FAILED; the password gives one too", async () => {
      const { id, token } = await signedIn();
      const { secret } = await withTotp(token);
      clock += STEP_MS;
      const code = totpAt(secret, clock);
      const proved = await stepUp(token, { code });
      expect(proved.body).toMatchObject({ method: "otp", expiresIn: 300 });
      expectFailure(await stepUp(token, { code }), 400, { errorCode: "INVALID_CODE" });
      const failures = await t.db
        .select()
        .from(auditLog)
        .where(eq(auditLog.subjectId, String(id)));
      expect(failures.filter((a) => a.action === "MFA_FAILED")).toHaveLength(1);
      expect((await stepUp(token, { password: PASSWORD })).body).toMatchObject({ method: "pwd" });
      expectFailure(await stepUp(token, { password: PASSWORD, code }), 400, invalidBody(["password: give exactly one of password, code, passkey"]));
      // The code's token removes the authenticator app, with no password and whatever the sign-in's age.
      clock += 11 * 60_000;
      const fresh = (await stepUp(token, { code: totpAt(secret, clock) })).body.stepUpToken;
      expect((await t.request("DELETE", "/api/account/mfa/totp", { token, body: { stepUpToken: fresh } })).status).toBe(204);
    });
  });
});

describe("policy and ADMIN", () => {
  test("MFA_REQUIRED_ROLES=ADMIN: an ADMIN without a factor gets an enrol-only session (403 MFA_ENROLMENT_REQUIRED elsewhere), enrols, then works", async () => {
    const app = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN" }, { now: () => clock });
    try {
      const admin = await signedIn(app, ["USER", "ADMIN"]);
      const refused = { message: "Set up a second factor first", errorCode: "MFA_ENROLMENT_REQUIRED" };
      expectFailure(await app.request("GET", "/api/users", { token: admin.token }), 403, refused);
      expectFailure(await app.request("GET", "/api/search/profile", { token: admin.token }), 403, refused);
      expect((await app.request("GET", "/api/account/mfa", { token: admin.token })).status).toBe(200);
      // A USER is not concerned.
      const user = await signedIn(app);
      expect((await app.request("GET", "/api/search/profile", { token: user.token })).status).toBe(200);
      // The first enrolment is confirmed out of band (below): here by the operator's code.
      const { secret } = await withTotp(admin.token, app, { enrolCode: await operatorCode(app, admin.email) });
      expect((await app.request("GET", "/api/users", { token: admin.token })).status).toBe(200);
      clock += STEP_MS;
      const first = await firstStep(admin.email, app);
      const done = await secondStep({ mfaToken: first.mfaToken, code: totpAt(secret, clock) }, app);
      expect((await app.request("GET", "/api/users", { token: done.body.data.token })).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  // Issue 40 item 5: /actuator/prometheus and the detailed health read their bearer themselves and answered 200.
  test("MFA_REQUIRED_ROLES=ADMIN: a password-only ADMIN gets 403 MFA_ENROLMENT_REQUIRED on every route that needs a caller, metrics and detailed health included", async () => {
    const app = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN" }, { now: () => clock });
    try {
      const admin = await signedIn(app, ["USER", "ADMIN"]);
      const send = async (method: string, path: string, token?: string) => {
        const response = await app.app.handle(new Request(`http://localhost${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} }));
        const text = await response.text();
        return { status: response.status, code: text.startsWith("{") ? (JSON.parse(text).errorCode as string | undefined) : undefined };
      };
      const enrolment = ["/api/auth/", "/api/account/mfa", "/api/account/passkeys", "/api/account/sessions"];
      const checked: string[] = [];
      for (const { method, path: template } of app.app.routes) {
        const path = template.replace(/:[^/]+/g, "1");
        if (enrolment.some((allowed) => path.startsWith(allowed))) continue;
        const anonymous = await send(method, path);
        // An open route (a page, a document, a probe) answers as it would anonymously, but for health's details.
        const expected = anonymous.status === 401 || template === "/actuator/health" ? { status: 403, code: "MFA_ENROLMENT_REQUIRED" } : anonymous;
        expect({ route: `${method} ${template}`, ...(await send(method, path, admin.token)) }).toEqual({ route: `${method} ${template}`, ...expected });
        checked.push(`${method} ${template}`);
      }
      expect(checked).toEqual(expect.arrayContaining(["GET /actuator/prometheus", "GET /actuator/health", "GET /api/users", "GET /api/audit"]));
    } finally {
      await app.close();
    }
  });

  test("MFA_REQUIRED_ROLES holds sign-ins, not an operator's sid-less token (as `usersvc token` issues it): that reaches every route", async () => {
    const app = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN" }, { now: () => clock });
    try {
      const { token } = await app.admin();
      expect(decodeJwt(token).sid).toBeUndefined();
      expect((await app.request("GET", "/api/users", { token })).status).toBe(200);
      expect((await app.request("GET", "/api/search/profile", { token })).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  test("ADMIN_EMAIL on an address a stranger holds with TOTP: the stranger's factors go, the operator signs in with the password and may enrol", async () => {
    const stranger = await signedIn();
    await withTotp(stranger.token);
    expect(await ensureAdmin(t.database, { email: stranger.email, password: "Operat0r!pass" }, () => clock)).toEqual({ id: stranger.id, created: false });
    const operator = await t.request("POST", "/api/auth/login", { body: { email: stranger.email, password: "Operat0r!pass" } });
    expect(operator.status).toBe(200);
    expect(amrOf(operator.body.data.token)).toEqual(["pwd"]);
    expect((await t.request("GET", "/api/account/mfa", { token: operator.body.data.token })).body).toEqual({ totp: false, passkeys: 0, recoveryCodesLeft: 0 });
    expect((await t.request("POST", "/api/account/mfa/totp", { token: operator.body.data.token })).status).toBe(200);
  });

  test("ADMIN sees a user's factors and removes them all: the user's sessions end, audited, MFA_DISABLED mailed; USER may not", async () => {
    const { id, email, token } = await signedIn();
    await withTotp(token);
    const admin = await t.admin();
    const factors = await t.request("GET", `/api/users/${id}/mfa`, { token: admin.token });
    expect(factors.body).toEqual([
      { kind: "totp", name: "Authenticator app", createdAt: expect.any(String), lastUsedAt: expect.any(String) },
      { kind: "recovery_codes", name: "10 of 10 left", createdAt: expect.any(String), lastUsedAt: null },
    ]);
    expect((await t.request("GET", `/api/users/${id}/mfa`, { token })).status).toBe(403);
    expect((await t.request("DELETE", `/api/users/${id}/mfa`, { token: admin.token })).status).toBe(204);
    expect((await t.request("GET", "/api/account/mfa", { token })).status).toBe(401);
    expect(await outboxKinds(id)).toContain("MFA_DISABLED");
    const audits = await t.db.select().from(auditLog).where(eq(auditLog.action, "MFA_REMOVED"));
    expect(audits.some((a) => a.subjectId === String(id))).toBe(true);
    expect((await t.request("GET", `/api/users/${id}/mfa`, { token: admin.token })).body).toEqual([]);
    expect((await login(email)).body.data.token).toEqual(expect.any(String));
    expect((await t.request("GET", "/api/users/999999/mfa", { token: admin.token })).status).toBe(404);
  });
});

/** `usersvc mfa enrol-code --email E`'s code, issued in process (the command itself is tested through the program below). */
async function operatorCode(app: TestApp, email: string) {
  const issued = await issueEnrolCode({ db: app.database, now: () => clock }, email);
  if (!("code" in issued)) throw new Error(`no enrolment code for ${email}: ${issued.refused}`);
  return issued.code;
}

describe("first enrolment under MFA_REQUIRED_ROLES, confirmed out of band", () => {
  const authenticator = () => new SoftwareAuthenticator(RP_ID, ORIGIN);
  let app: TestApp;
  beforeAll(async () => {
    app = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN", LOGIN_MAX_FAILURES: "50" }, { now: () => clock });
  });
  afterAll(() => app.close());

  const admin = () => signedIn(app, ["USER", "ADMIN"]);
  const started = async (token: string) => (await app.request("POST", "/api/account/mfa/totp", { token })).body.secret as string;
  const confirm = (token: string, body: Record<string, unknown>) => app.request("POST", "/api/account/mfa/totp/confirm", { token, body });
  const register = async (token: string, extra: Record<string, unknown> = {}) => {
    const options = await app.request("POST", "/api/account/passkeys/options", { token });
    return app.request("POST", "/api/account/passkeys", { token, body: { name: "Key", response: authenticator().register(options.body), ...extra } });
  };
  const REQUIRED = { message: "Your first second factor needs the code sent to your e-mail address (or given by an administrator)", errorCode: "ENROL_CODE_REQUIRED" };
  const INVALID = { message: "The enrolment code is not right, or has expired: ask for a new one", errorCode: "INVALID_ENROL_CODE" };

  test("a password alone enrols nothing: TOTP's confirmation and a passkey's registration need the code (403 ENROL_CODE_REQUIRED), the operator's code enrols once; a USER, and a second factor, need none", async () => {
    const { id, email, token } = await admin();
    const secret = await started(token);
    expectFailure(await confirm(token, { code: totpAt(secret, clock) }), 403, REQUIRED);
    expectFailure(await register(token), 403, REQUIRED);
    expect((await app.request("GET", "/api/account/mfa", { token })).body).toEqual({ totp: false, passkeys: 0, recoveryCodesLeft: 0 });
    // Without SMTP the mail route says where the code comes from.
    expectFailure(await app.request("POST", "/api/account/mfa/enrol-code", { token }), 409, {
      message: "This service sends no e-mail: ask an administrator for your enrolment code",
      errorCode: "ENROL_CODE_FROM_OPERATOR",
    });
    const code = await operatorCode(app, email);
    expect(code).toMatch(/^\d{6}$/);
    // Stored hashed: the database never holds the code.
    expect(JSON.stringify(await app.db.select().from(mfaChallenges))).not.toContain(code);
    const wrong = code === "000000" ? "111111" : "000000";
    expectFailure(await confirm(token, { code: totpAt(secret, clock), enrolCode: wrong }), 400, INVALID);
    expectFailure(await confirm(token, { code: totpAt(secret, clock), enrolCode: "12345" }), 400, INVALID);
    const audits = await app.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.subjectId, String(id)));
    expect(audits.filter((a) => a.action === "MFA_ENROL_CODE_FAILED")).toHaveLength(2);
    // A wrong TOTP code with the right enrolment code: the enrolment code stays good.
    expectFailure(await confirm(token, { code: totpAt(secret, clock - 3 * STEP_MS), enrolCode: code }), 400, { errorCode: "INVALID_CODE" });
    const done = await confirm(token, { code: totpAt(secret, clock), enrolCode: ` ${code} ` });
    expect(done.status).toBe(200);
    expect((await app.request("GET", "/api/users", { token })).status).toBe(200);
    // Spent with the enrolment; a further factor needs no code.
    expect((await app.db.select().from(mfaChallenges)).filter((row) => row.userId === id && row.purpose === "enrol-code")).toEqual([]);
    expect((await register(token)).status).toBe(201);
    expectFailure(await app.request("POST", "/api/account/mfa/enrol-code", { token }), 409, {
      message: "Your account needs no enrolment code",
      errorCode: "ENROL_CODE_NOT_NEEDED",
    });
    // A USER is not held to it.
    const user = await signedIn(app);
    expect((await withTotp(user.token, app)).recoveryCodes).toHaveLength(10);
  }, 15_000);

  test("a passkey as the first factor takes the code too; a new code replaces the last", async () => {
    const { email, token } = await admin();
    const first = await operatorCode(app, email);
    const second = await operatorCode(app, email);
    if (first !== second) expectFailure(await register(token, { enrolCode: first }), 400, INVALID);
    const added = await register(token, { enrolCode: second });
    expect(added.status).toBe(201);
    expect(added.body.recoveryCodes).toHaveLength(10);
    expect((await app.request("GET", "/api/users", { token })).status).toBe(200);
  }, 15_000);

  test("a code is burnt by its 5th wrong try and lives 10 minutes", async () => {
    const { email, token } = await admin();
    const secret = await started(token);
    const code = await operatorCode(app, email);
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 5; i++) expectFailure(await confirm(token, { code: totpAt(secret, clock), enrolCode: wrong }), 400, INVALID);
    expectFailure(await confirm(token, { code: totpAt(secret, clock), enrolCode: code }), 400, INVALID);

    const later = await operatorCode(app, email);
    clock += 10 * 60_000 + 1000;
    const again = await login(email, app);
    const fresh = await started(again.body.data.token);
    expectFailure(await confirm(again.body.data.token, { code: totpAt(fresh, clock), enrolCode: later }), 400, INVALID);
    expect((await confirm(again.body.data.token, { code: totpAt(fresh, clock), enrolCode: await operatorCode(app, email) })).status).toBe(200);
  }, 15_000);

  test("wrong codes count in the e-mail's login throttle: then even the right password gets 429", async () => {
    const own = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN" }, { now: () => clock });
    try {
      const { email, token } = await signedIn(own, ["USER", "ADMIN"]);
      const secret = (await own.request("POST", "/api/account/mfa/totp", { token })).body.secret as string;
      const issued = await issueEnrolCode({ db: own.database, now: () => clock }, email);
      const wrong = "code" in issued && issued.code === "000000" ? "111111" : "000000";
      const attempt = () => own.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, clock), enrolCode: wrong } });
      for (let i = 0; i < 5; i++) expect((await attempt()).status).toBe(400);
      const throttled = await attempt();
      expectFailure(throttled, 429, { errorCode: "TOO_MANY_REQUESTS" });
      expect(throttled.headers.get("retry-after")).toMatch(/^\d+$/);
      expect((await login(email, own)).status).toBe(429);
    } finally {
      await own.close();
    }
  }, 15_000);

  test("`usersvc mfa enrol-code --email E` prints a code that enrols (the command line, on this leg's database); an unknown address exits 1", async () => {
    const own = await makeTestApp({ PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN" });
    try {
      const { id, email } = await own.createUser({ email: uniqueEmail("cli-enrol"), password: PASSWORD, roles: ["USER", "ADMIN"] });
      const database = {
        DATABASE_URL: own.config.databaseUrl,
        DATABASE_DRIVER: own.config.databaseDriver,
        ...(own.config.databaseAuthToken ? { DATABASE_AUTH_TOKEN: own.config.databaseAuthToken } : {}),
        ...(own.config.databaseSyncUrl ? { DATABASE_SYNC_URL: own.config.databaseSyncUrl } : {}),
      };
      const run = async (address: string) => {
        const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../src/main.ts"), "mfa", "enrol-code", "--email", address], {
          env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: "warn", DATA_DIR: own.dir, JWT_SECRET: TEST_SECRET, ...database },
          stdout: "pipe",
          stderr: "pipe",
        });
        const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
        return { stdout, stderr, code };
      };
      const printed = await run(email.toUpperCase());
      expect({ code: printed.code, stderr: printed.stderr }).toEqual({ code: 0, stderr: "" });
      expect(printed.stdout).toMatch(/^\d{6}\n$/);
      const signed = await own.request("POST", "/api/auth/login", { body: { email, password: PASSWORD } });
      const token = signed.body.data.token as string;
      const secret = (await own.request("POST", "/api/account/mfa/totp", { token })).body.secret as string;
      const done = await own.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, Date.now()), enrolCode: printed.stdout.trim() } });
      expect(done.status).toBe(200);
      const audits = await own.db
        .select()
        .from(auditLog)
        .where(eq(auditLog.subjectId, String(id)));
      expect(audits.filter((a) => a.action === "MFA_ENROL_CODE_ISSUED").map((a) => a.details)).toEqual([{ by: "operator" }]);
      // Enrolled: no code to give any more; an unknown address gets none either.
      expect(await run(email)).toEqual({ code: 1, stdout: "", stderr: `usersvc: ${email} has a second factor already: it needs no enrolment code\n` });
      expect(await run("nobody@example.com")).toEqual({ code: 1, stdout: "", stderr: "usersvc: no active user with e-mail nobody@example.com\n" });
    } finally {
      await own.close();
    }
  }, 30_000);

  const unavailable = smtpUnavailable();
  if (unavailable) console.warn(`the mailed enrolment code: SKIPPED, ${unavailable}`);
  test.skipIf(Boolean(unavailable))(
    "with SMTP the code is mailed to a verified address (an unverified one is verified first), at most 3 in 10 minutes; the last one mailed enrols",
    async () => {
      const mailbox = await startMailbox();
      const own = await makeTestApp(
        { PUBLIC_URL: ORIGIN, MFA_REQUIRED_ROLES: "ADMIN", SMTP_URL: mailbox.url, MAIL_FROM: "usersvc <no-reply@id.example.test>" },
        { now: () => clock },
      );
      const quiet = createLogging("silent", "json").get("outbox");
      const sender = startOutboxSender({ db: own.database, logger: quiet, channels: channelsFor(own.config, own.db, quiet, () => clock), pollIntervalMs: 20, now: () => clock });
      try {
        const { id, email, token } = await signedIn(own, ["USER", "ADMIN"]);
        const request = () => own.request("POST", "/api/account/mfa/enrol-code", { token });
        expectFailure(await request(), 403, {
          message: "Confirm your e-mail address first: the enrolment code is sent there",
          errorCode: "EMAIL_VERIFICATION_REQUIRED",
        });
        await own.db.update(users).set({ emailVerified: true }).where(eq(users.id, id));
        for (let i = 0; i < 3; i++) {
          const sent = await request();
          expect([sent.status, sent.text]).toEqual([204, ""]);
        }
        const refused = await request();
        expectFailure(refused, 429, { errorCode: "TOO_MANY_REQUESTS" });
        expect(Number(refused.headers.get("retry-after"))).toBeWithin(1, 601);
        const mails = await mailbox.waitFor(email, 3);
        expect(mails).toHaveLength(3);
        expect(mails[0].subject).toBe("Your code to set up two-step sign-in");
        const codes = mails.map((mail) => /^Your code: (\d{6})$/m.exec(mail.text ?? "")?.[1]);
        for (const code of codes) expect(code).toMatch(/^\d{6}$/);
        expect(mails[0].html).toContain(codes[0]!);
        // Delivered: the outbox keeps no copy of a code.
        await Bun.sleep(100);
        const rows = (await own.db.select().from(outbox)).filter((row) => row.kind === "MFA_ENROL_CODE");
        expect(rows.map((row) => [row.mailStatus, row.token, JSON.stringify(row.payload).includes(codes[2]!)])).toEqual([
          ["sent", null, false],
          ["sent", null, false],
          ["sent", null, false],
        ]);
        const secret = (await own.request("POST", "/api/account/mfa/totp", { token })).body.secret as string;
        if (codes[0] !== codes[2])
          expectFailure(await own.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, clock), enrolCode: codes[0] } }), 400, INVALID);
        const done = await own.request("POST", "/api/account/mfa/totp/confirm", { token, body: { code: totpAt(secret, clock), enrolCode: codes[2] } });
        expect(done.status).toBe(200);
      } finally {
        await sender.stop();
        await own.close();
        await mailbox.close();
      }
    },
    30_000,
  );
});

test.skipIf(leg !== "native")(
  "start-up warns when MFA_REQUIRED_ROLES is set without SMTP_URL, and only then",
  async () => {
    const warned = (stdout: string) => stdout.split("\n").filter((line) => line.includes("MFA_REQUIRED_ROLES is set without SMTP_URL"));
    for (const [env, count] of [
      [{ MFA_REQUIRED_ROLES: "ADMIN" }, 1],
      [{ MFA_REQUIRED_ROLES: "ADMIN", SMTP_URL: "smtp://127.0.0.1:9" }, 0],
      [{}, 0],
    ] as const) {
      const dir = mkdtempSync(join(tmpdir(), "usersvc-mfa-warning-"));
      try {
        const server = await serveProgram(dir, env);
        await server.stop();
        const lines = warned(server.out.stdout);
        expect({ env, count: lines.length }).toEqual({ env, count });
        for (const line of lines) expect(JSON.parse(line).level).toBe("warn");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  },
  60_000,
);

describe("the mails", () => {
  test.each(["MFA_ENABLED", "MFA_DISABLED", "PASSKEY_ADDED", "RECOVERY_CODE_USED"] as const)("%s in English and zh-TW, linking to /account/security under PUBLIC_URL", (kind) => {
    const en = renderMail({ kind, lang: "en", name: "Mei Lin", payload: { userId: 1 }, publicBase: "https://id.example.com/svc" });
    const zh = renderMail({ kind, lang: "zh-TW", name: "Mei Lin", payload: { userId: 1 } });
    expect(en.text).toStartWith("Hello Mei Lin,");
    expect(en.text).toContain("https://id.example.com/svc/account/security");
    expect(zh.text).toStartWith("Mei Lin 您好：");
    expect(zh.html).toContain('<html lang="zh-TW">');
    // Without PUBLIC_URL there is no link (and never a token).
    expect(zh.text).not.toContain("http");
    expect(en.subject).not.toBe(zh.subject);
  });

  test("MFA_ENROL_CODE gives its code in English and zh-TW, with or without PUBLIC_URL, and no link", () => {
    for (const publicBase of ["https://id.example.com/svc", undefined]) {
      const en = renderMail({ kind: "MFA_ENROL_CODE", lang: "en", name: "Mei Lin", payload: { userId: 1 }, token: "042917", publicBase });
      const zh = renderMail({ kind: "MFA_ENROL_CODE", lang: "zh-TW", name: "Mei Lin", payload: { userId: 1 }, token: "042917", publicBase });
      expect(en.text).toContain("Your code: 042917");
      expect(zh.text).toContain("您的驗證碼: 042917");
      expect(zh.html).toContain("042917");
      expect(en.text).toContain("10 minutes");
      expect(`${en.text}${zh.text}`).not.toContain("http");
    }
  });

  test("MFA_DISABLED says so when an ADMIN removed the factors", () => {
    expect(renderMail({ kind: "MFA_DISABLED", lang: "en", name: "", payload: { userId: 1, reason: "admin" } }).text).toContain("An administrator removed every second factor");
    expect(renderMail({ kind: "MFA_DISABLED", lang: "zh-TW", name: "", payload: { userId: 1, reason: "admin" } }).text).toContain("管理員已移除");
  });
});
