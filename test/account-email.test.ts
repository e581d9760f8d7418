/**
 * Account e-mail through a real SMTP server (aiosmtpd): the welcome and verification mails,
 * verification and password reset end to end, no account enumeration, hostile names escaped,
 * an SMTP outage that loses and repeats nothing; and without SMTP: reset throttling apart
 * from login, REQUIRE_EMAIL_VERIFICATION without locking anyone out, a channel that gives up
 * (visible to an ADMIN, counted in the metrics), signed webhooks checked by `standardwebhooks`,
 * and the migration that makes existing users verified.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "./legs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { openDatabase } from "../src/db/open";
import { migrate } from "../src/db/migrate";
import { Webhook } from "standardwebhooks";
import { outbox, users } from "../src/db/schema";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { channelsFor, webhookChannel } from "../src/features/notifications/channels";
import { startOutboxSender, type OutboxSender } from "../src/features/notifications/sender";
import { createLogging } from "../src/logging/logger";
import { makeTestApp, type TestApp, timeless, uniqueEmail, validRegistration } from "./helpers";
import { freePort, startLog } from "./server-process";
import { migrateToBefore } from "./support/earlier-schema";
import { startMailbox, smtpUnavailable, tokenOf, type Mailbox } from "./smtp-server";

// Mail travels through a real server and a polling sender: seconds, not milliseconds.
setDefaultTimeout(30_000);

const FROM = "usersvc <no-reply@id.example.com>";
const PUBLIC_URL = "https://id.example.com";
const quiet = () => createLogging("silent", "json").get("outbox");

/** Polls `read` until `done` (or 10 s). */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const value = await read();
    if (done(value) || i > 500) return value;
    await Bun.sleep(20);
  }
}

const rowsOf = (t: TestApp, recipient: string) => t.db.select().from(outbox).where(eq(outbox.recipient, recipient));

const unavailable = smtpUnavailable();
if (unavailable) console.warn(`account e-mail over SMTP: SKIPPED, ${unavailable}`);

describe.skipIf(Boolean(unavailable))("with a real SMTP server", () => {
  let mailbox: Mailbox;
  let t: TestApp;
  let sender: OutboxSender;
  /** The app's clock runs `offset` ms ahead of the real one (token expiry). */
  let offset = 0;

  const register = (email: string, fields: Record<string, unknown> = {}, lang?: string) =>
    t.request("POST", "/api/auth/register", { body: { ...validRegistration(email), ...fields }, headers: lang ? { "accept-language": lang } : {} });
  const login = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });
  const mailOf = async (to: string, subject: string | RegExp) => {
    const mails = await until(
      () => mailbox.waitFor(to),
      (found) => found.some((m) => (typeof subject === "string" ? m.subject === subject : subject.test(m.subject ?? ""))),
    );
    const mail = mails.find((m) => (typeof subject === "string" ? m.subject === subject : subject.test(m.subject ?? "")));
    if (!mail) throw new Error(`no mail "${subject}" for ${to}`);
    return mail;
  };

  beforeAll(async () => {
    mailbox = await startMailbox();
    t = await makeTestApp({ SMTP_URL: mailbox.url, MAIL_FROM: FROM, PUBLIC_URL, RESET_MAX_REQUESTS: "3", RESET_MAX_REQUESTS_PER_IP: "1000" }, { now: () => Date.now() + offset });
    sender = startOutboxSender({ db: t.database, logger: quiet(), channels: channelsFor(t.config, t.db, quiet()), pollIntervalMs: 20, baseDelayMs: 100, maxDelayMs: 200 });
  });
  afterAll(async () => {
    await sender.stop();
    await t.close();
    await mailbox.close();
  });

  test("registration mails a WELCOME in the registrant's language, to them, from MAIL_FROM, and a verification link", async () => {
    const email = uniqueEmail("zh");
    expect((await register(email, {}, "zh-TW,zh;q=0.9,en;q=0.5")).status).toBe(201);
    const welcome = await mailOf(email, "歡迎加入 usersvc");
    expect(welcome.to).toMatchObject({ value: [{ address: email }] });
    expect(welcome.from).toMatchObject({ value: [{ address: "no-reply@id.example.com", name: "usersvc" }] });
    // The address is unconfirmed: the mail greets without the registrant's name.
    expect(welcome.text).toStartWith("您好：");
    expect(welcome.text).not.toContain("Mei Lin");
    expect(welcome.html).toContain('<html lang="zh-TW">');
    const verify = await mailOf(email, "請確認您的 Email 地址");
    expect(verify.text).toMatch(new RegExp(`${PUBLIC_URL}/account/verify-email\\?token=[A-Za-z0-9_-]{43}`));

    const english = uniqueEmail("en");
    expect((await register(english)).status).toBe(201);
    expect((await mailOf(english, "Welcome to usersvc")).text).toStartWith("Hello,\n");
  });

  test("an ADMIN-created user gets English mails", async () => {
    const admin = await t.admin();
    const email = uniqueEmail("byadmin");
    const res = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Lin Admin-Made", email }, headers: { "accept-language": "zh-TW" } });
    expect(res.status).toBe(201);
    expect(res.body.emailVerified).toBe(false);
    expect((await mailOf(email, "Welcome to usersvc")).text).toStartWith("Hello,\n");
  });

  test("verification end to end: request, the mail's link token confirms once, emailVerified is true", async () => {
    const email = uniqueEmail("verify");
    await register(email);
    const session = await login(email, "Passw0rd!");
    expect(session.body.data.user.emailVerified).toBe(false);
    const token = session.body.data.token;
    const asked = await t.request("POST", "/api/auth/verify-email/request", { token });
    expect([asked.status, asked.body.success]).toEqual([200, true]);
    // Registration mailed one link and the request another: only the newest works.
    const mails = await until(
      () => mailbox.waitFor(email, 3),
      (found) => found.filter((m) => m.subject === "Confirm your e-mail address").length === 2,
    );
    const [first, second] = mails.filter((m) => m.subject === "Confirm your e-mail address").map(tokenOf);
    expect(first).not.toBe(second);
    const stale = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: first } });
    expect([stale.status, stale.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
    const confirmed = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: second } });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.data).toMatchObject({ email, emailVerified: true });
    const again = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: second } });
    expect([again.status, again.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
    // Once mailed, the raw tokens are gone from the outbox.
    const rows = await until(
      () => rowsOf(t, email),
      (rows) => rows.every((r) => r.mailStatus === "sent" && r.token === null),
    );
    expect(rows.map((r) => [r.kind, r.mailStatus, r.token])).toContainEqual(["VERIFY_EMAIL", "sent", null]);
    expect(rows.every((r) => r.token === null)).toBe(true);
    // A verified user asking again is told so, and nothing is sent.
    const verified = await t.request("POST", "/api/auth/verify-email/request", { token });
    expect(verified.body.message).toBe("Your e-mail address is already verified");
  });

  test("an e-mail change makes the address unverified again, a link mailed to the old one stops working, and the old one gets EMAIL_CHANGED", async () => {
    const email = uniqueEmail("move");
    await register(email);
    const token = tokenOf(await mailOf(email, "Confirm your e-mail address"));
    const session = await login(email, "Passw0rd!");
    const id = session.body.data.user.id;
    const moved = uniqueEmail("moved");
    const res = await t.request("PATCH", `/api/users/${id}`, { token: session.body.data.token, body: { email: moved, currentPassword: "Passw0rd!" } });
    expect([res.status, res.body.emailVerified]).toEqual([200, false]);
    const old = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token } });
    expect([old.status, old.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
    // The old address is told, in the account's language.
    expect((await mailOf(email, "Your e-mail address was changed")).text).toContain("this address no longer signs in to it");
  });

  test("password reset end to end: old token 401, old password fails, the new one logs in; PASSWORD_CHANGED is mailed", async () => {
    const email = uniqueEmail("reset");
    await register(email);
    const before = (await login(email, "Passw0rd!")).body.data.token;
    const asked = await t.request("POST", "/api/auth/password-reset/request", { body: { email: email.toUpperCase() } });
    expect(asked.status).toBe(200);
    const mail = await mailOf(email, "Reset your password");
    expect(mail.text).toContain(`${PUBLIC_URL}/account/reset-password?token=`);
    const token = tokenOf(mail);
    const mismatch = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "N3wPassw0rd!", confirmNewPassword: "other" } });
    expect([mismatch.status, mismatch.body.errors]).toEqual([400, ["confirmNewPassword: must match password"]]);
    const weak = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "weak", confirmNewPassword: "weak" } });
    expect(weak.status).toBe(400);
    const done = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } });
    expect([done.status, done.body.success]).toEqual([200, true]);

    expect((await t.request("GET", "/api/search/profile", { token: before })).status).toBe(401);
    expect((await login(email, "Passw0rd!")).status).toBe(401);
    const after = await login(email, "N3wPassw0rd!");
    expect(after.status).toBe(200);
    // Completing a reset proved the mailbox is the user's.
    expect(after.body.data.user.emailVerified).toBe(true);
    expect((await mailOf(email, "Your password was changed")).text).toContain("every earlier sign-in has ended");

    const reused = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "An0therPass!", confirmNewPassword: "An0therPass!" } });
    expect([reused.status, reused.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
  });

  test("a foreign or expired reset token is 400 INVALID_TOKEN", async () => {
    const email = uniqueEmail("expire");
    await register(email);
    const verifyToken = tokenOf(await mailOf(email, "Confirm your e-mail address"));
    const body = (token: string) => ({ token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" });
    const foreign = await t.request("POST", "/api/auth/password-reset/confirm", { body: body(verifyToken) });
    expect([foreign.status, foreign.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
    const unknown = await t.request("POST", "/api/auth/password-reset/confirm", { body: body("x".repeat(43)) });
    expect([unknown.status, unknown.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);

    await t.request("POST", "/api/auth/password-reset/request", { body: { email } });
    const token = tokenOf(await mailOf(email, "Reset your password"));
    offset = 31 * 60 * 1000;
    try {
      const expired = await t.request("POST", "/api/auth/password-reset/confirm", { body: body(token) });
      expect([expired.status, expired.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
    } finally {
      offset = 0;
    }
    expect((await login(email, "Passw0rd!")).status).toBe(200);
  });

  test("no enumeration: an unknown address gets the identical status and body, and no mail", async () => {
    const known = uniqueEmail("known");
    await register(known);
    const unknown = uniqueEmail("nobody");
    const a = await t.request("POST", "/api/auth/password-reset/request", { body: { email: known } });
    const b = await t.request("POST", "/api/auth/password-reset/request", { body: { email: unknown } });
    expect(b.status).toBe(a.status);
    expect(timeless(b.body)).toEqual(timeless(a.body));
    expect([...b.headers.keys()].filter((h) => h !== "x-request-id").sort()).toEqual([...a.headers.keys()].filter((h) => h !== "x-request-id").sort());
    await mailOf(known, "Reset your password");
    const [row] = await until(
      () => rowsOf(t, unknown),
      (rows) => rows[0]?.mailStatus !== "resolving",
    );
    expect([row.kind, row.webhookStatus, row.mailStatus, row.token]).toEqual(["PASSWORD_RESET", "skipped", "skipped", null]);
    // Its row is settled (skipped on both channels), so no mail can follow.
    expect((await mailbox.messages()).filter((m) => JSON.stringify(m.to).includes(unknown))).toEqual([]);
  });

  test("reset requests have their own limit per e-mail (429 + Retry-After) and never lock the account's logins", async () => {
    const email = uniqueEmail("limit");
    await register(email);
    for (let i = 0; i < 3; i++) expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email } })).status).toBe(200);
    const refused = await t.request("POST", "/api/auth/password-reset/request", { body: { email } });
    expect([refused.status, refused.body.errorCode]).toEqual([429, "TOO_MANY_REQUESTS"]);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3000);
    // An unknown address is limited the same way: the 429 tells nothing either.
    const nobody = uniqueEmail("nolimit");
    for (let i = 0; i < 3; i++) await t.request("POST", "/api/auth/password-reset/request", { body: { email: nobody } });
    expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email: nobody } })).status).toBe(429);
    expect((await login(email, "Passw0rd!")).status).toBe(200);
  });

  test("a name typed at registration never reaches the unconfirmed address: WELCOME and VERIFY_EMAIL greet without it, in English and zh-TW", async () => {
    const name = "Locked! Go to https://evil.example/unlock,";
    for (const [lang, welcomeSubject, verifySubject, greeting] of [
      ["en", "Welcome to usersvc", "Confirm your e-mail address", "Hello,\n"],
      ["zh-TW", "歡迎加入 usersvc", "請確認您的 Email 地址", "您好：\n"],
    ] as const) {
      const email = uniqueEmail(`named-${lang.toLowerCase()}`);
      expect((await register(email, { name }, lang)).status).toBe(201);
      for (const mail of [await mailOf(email, welcomeSubject), await mailOf(email, verifySubject)]) {
        expect(mail.text).toStartWith(greeting);
        for (const body of [mail.text, mail.html, mail.subject]) {
          expect(body).not.toContain("evil.example");
          expect(body).not.toContain("Locked!");
        }
      }
    }
  });

  test("HTML escaping: a hostile name reaches a confirmed address as text", async () => {
    const email = uniqueEmail("hostile");
    const name = `<script>alert(1)</script> "Eve" & <b>`;
    expect((await register(email, { name })).status).toBe(201);
    const confirmed = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: tokenOf(await mailOf(email, "Confirm your e-mail address")) } });
    expect(confirmed.body.data.emailVerified).toBe(true);
    expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email } })).status).toBe(200);
    const reset = await mailOf(email, "Reset your password");
    expect(reset.html).not.toContain("<script>");
    expect(reset.html).not.toContain("<b>");
    expect(reset.html).toContain("&lt;script&gt;alert(1)&lt;/script&gt; &quot;Eve&quot; &amp; &lt;b&gt;");
    expect(reset.text).toContain(`Hello ${name},`);
  });

  test("a webhook that hangs never holds the mail back: each channel keeps its own pace and state", async () => {
    const own = await makeTestApp({ SMTP_URL: mailbox.url, MAIL_FROM: FROM });
    const hanging = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    const logger = quiet();
    const channels = [
      webhookChannel({ url: `http://127.0.0.1:${hanging.port}/`, timeoutMs: 4000, logger, now: Date.now }),
      ...channelsFor(own.config, own.db, logger).filter((c) => c.name === "mail"),
    ];
    const ownSender = startOutboxSender({ db: own.database, logger, channels, pollIntervalMs: 20 });
    try {
      const email = uniqueEmail("beside");
      expect((await own.request("POST", "/api/auth/register", { body: validRegistration(email) })).status).toBe(201);
      await mailOf(email, "Welcome to usersvc");
      // The mail arrived while the webhook's first attempt still hung: none of its rows has an attempt ended yet.
      expect((await rowsOf(own, email)).map((r) => r.webhookLastError)).toEqual([null, null]);
      const rows = await until(
        () => rowsOf(own, email),
        (rows) => rows.every((r) => r.webhookAttempts === 1),
      );
      expect(rows.map((r) => [r.mailStatus, r.mailAttempts, r.webhookStatus, r.webhookAttempts])).toEqual([
        ["sent", 1, "pending", 1],
        ["sent", 1, "pending", 1],
      ]);
      expect(rows[0].webhookLastError).toMatch(/time|abort/i);
    } finally {
      await ownSender.stop();
      hanging.stop(true);
      await own.close();
    }
  });

  test("an SMTP outage: users register meanwhile, and once the server is back every mail arrives exactly once per outbox row", async () => {
    await mailbox.stop();
    const emails = [uniqueEmail("outage"), uniqueEmail("outage"), uniqueEmail("outage")];
    try {
      for (const email of emails) expect((await register(email)).status).toBe(201);
      // Every row has failed at least once on the mail channel, while its webhook channel (the log here) went on.
      for (const email of emails) {
        const rows = await until(
          () => rowsOf(t, email),
          (rows) => rows.length === 2 && rows.every((r) => r.mailAttempts >= 1 && r.webhookStatus === "sent"),
        );
        expect(rows.map((r) => [r.mailStatus, r.webhookStatus])).toEqual([
          ["pending", "sent"],
          ["pending", "sent"],
        ]);
        expect(rows.every((r) => r.mailAttempts >= 1 && /ECONNREFUSED|connect/i.test(r.mailLastError ?? ""))).toBe(true);
      }
    } finally {
      await mailbox.start();
    }
    for (const email of emails) {
      const rows = await until(
        () => rowsOf(t, email),
        (rows) => rows.every((r) => r.mailStatus === "sent"),
      );
      expect(rows.map((r) => r.mailStatus)).toEqual(["sent", "sent"]);
      const mails = await mailbox.waitFor(email, 2);
      const ids = mails.map((m) => m.headers.get("x-usersvc-outbox-id"));
      expect(ids.sort()).toEqual(rows.map((r) => String(r.id)).sort());
    }
    // A few more polls cannot bring a second copy.
    await Bun.sleep(300);
    for (const email of emails) expect((await mailbox.waitFor(email)).length).toBe(2);
  });
});

describe("without SMTP", () => {
  test("per client address, reset requests have their own limit, and login's counters are untouched", async () => {
    const t = await makeTestApp({ RESET_MAX_REQUESTS_PER_IP: "2", LOGIN_MAX_FAILURES_PER_IP: "1" });
    try {
      const { email } = await t.createUser({ password: "Passw0rd!" });
      for (const who of [uniqueEmail(), uniqueEmail()]) expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email: who } })).status).toBe(200);
      expect((await t.request("POST", "/api/auth/password-reset/request", { body: { email: uniqueEmail() } })).status).toBe(429);
      // One login failure from this address is allowed before its limit: resets did not use it up.
      expect((await t.request("POST", "/api/auth/login", { body: { email, password: "Passw0rd!" } })).status).toBe(200);
      const bad = await t.request("POST", "/api/auth/password-reset/request", { body: { email: "not-an-address" } });
      expect([bad.status, bad.body.errors]).toEqual([400, ["email: must be a valid e-mail address"]]);
    } finally {
      await t.close();
    }
  });

  test("REQUIRE_EMAIL_VERIFICATION: an unverified user gets 403 EMAIL_NOT_VERIFIED until verified; the ADMIN_EMAIL admin still logs in", async () => {
    const t = await makeTestApp({ REQUIRE_EMAIL_VERIFICATION: "true" });
    try {
      await ensureAdmin(t.database, { email: "boss@example.com", password: "B0ss-Passw0rd!" }, Date.now);
      expect((await t.request("POST", "/api/auth/login", { body: { email: "boss@example.com", password: "B0ss-Passw0rd!" } })).status).toBe(200);
      const email = uniqueEmail("locked");
      expect((await t.request("POST", "/api/auth/register", { body: validRegistration(email) })).status).toBe(201);
      const refused = await t.request("POST", "/api/auth/login", { body: { email, password: "Passw0rd!" } });
      expect([refused.status, refused.body.errorCode, refused.body.message]).toEqual([403, "EMAIL_NOT_VERIFIED", "Confirm your e-mail address before signing in"]);
      const wrong = await t.request("POST", "/api/auth/login", { body: { email, password: "Wr0ng-Pass!" } });
      expect(wrong.status).toBe(401);
      // No sender runs here: the link's token still waits in its outbox row.
      const [row] = (await rowsOf(t, email)).filter((r) => r.kind === "VERIFY_EMAIL");
      expect((await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: row.token } })).status).toBe(200);
      expect((await t.request("POST", "/api/auth/login", { body: { email, password: "Passw0rd!" } })).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  test("a mail channel that keeps failing gives up: failed in the outbox with its last error, for an ADMIN, and counted", async () => {
    const t = await makeTestApp({ SMTP_URL: `smtp://127.0.0.1:${freePort()}` });
    const sender = startOutboxSender({
      db: t.database,
      logger: quiet(),
      channels: channelsFor(t.config, t.db, quiet()),
      metrics: t.metrics,
      pollIntervalMs: 10,
      baseDelayMs: 10,
      maxDelayMs: 20,
      maxAttempts: 2,
    });
    try {
      const admin = await t.admin();
      const email = uniqueEmail("bounce");
      expect((await t.request("POST", "/api/users", { token: admin.token, body: { name: "Never Mailed", email } })).status).toBe(201);
      const [row] = await until(
        () => rowsOf(t, email),
        (rows) => rows[0]?.mailStatus === "failed",
      );
      expect(row).toMatchObject({ mailStatus: "failed", mailAttempts: 2, webhookStatus: "sent" });
      const listed = await t.request("GET", "/api/admin/outbox?status=failed", { token: admin.token });
      expect(listed.status).toBe(200);
      expect(listed.headers.get("x-total-count")).toBe("1");
      expect(listed.body).toEqual([
        {
          id: row.id,
          kind: "WELCOME",
          recipient: email,
          createdAt: row.createdAt.toISOString(),
          webhook: { status: "sent", attempts: 1, lastError: null, sentAt: expect.any(String), nextAttemptAt: null },
          mail: { status: "failed", attempts: 2, lastError: expect.stringMatching(/ECONNREFUSED|connect/i), sentAt: null, nextAttemptAt: null },
        },
      ]);
      expect((await t.metrics.notificationsFailed.get()).values).toEqual([{ value: 1, labels: { channel: "mail" } }]);
      expect((await t.request("GET", "/actuator/prometheus", { token: admin.token })).text).toContain('notifications_failed_total{channel="mail"} 1');
      const denied = await t.request("GET", "/api/admin/outbox", { token: (await t.createUser()).token });
      expect(denied.status).toBe(403);
    } finally {
      await sender.stop();
      await t.close();
    }
  });

  test("webhooks are signed (Standard Webhooks, checked by the standardwebhooks package) with the same id on a retry, and carry no token", async () => {
    const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
    const t = await makeTestApp({ NOTIFY_WEBHOOK_SECRET: secret });
    const received: { headers: Record<string, string>; body: string }[] = [];
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        received.push({ headers: Object.fromEntries(request.headers), body: await request.text() });
        return new Response(null, { status: received.length === 1 ? 503 : 204 });
      },
    });
    const channels = [webhookChannel({ url: `http://127.0.0.1:${receiver.port}/hook`, secret, timeoutMs: 5000, logger: quiet(), now: Date.now })];
    const sender = startOutboxSender({ db: t.database, logger: quiet(), channels, pollIntervalMs: 10, baseDelayMs: 1100, maxDelayMs: 1100 });
    try {
      const email = uniqueEmail("hook");
      expect((await t.request("POST", "/api/auth/register", { body: validRegistration(email) })).status).toBe(201);
      const rows = await until(
        () => rowsOf(t, email),
        (rows) => rows.length === 2 && rows.every((r) => r.webhookStatus === "sent"),
      );
      expect(rows.map((r) => r.webhookStatus)).toEqual(["sent", "sent"]);
      const verifier = new Webhook(secret);
      type Delivered = { id: number; kind: string; payload: unknown };
      const byId = new Map<string, Delivered[]>();
      for (const delivery of received) {
        const payload = verifier.verify(delivery.body, delivery.headers) as Delivered;
        expect(delivery.headers["webhook-id"]).toBe(String(payload.id));
        byId.set(delivery.headers["webhook-id"], [...(byId.get(delivery.headers["webhook-id"]) ?? []), payload]);
      }
      // The first delivery was refused and retried a second later: same id, a fresh timestamp, both valid.
      expect(received.length).toBe(3);
      const retried = [...byId.values()].find((list) => list.length === 2)!;
      expect(retried[0]).toEqual(retried[1]);
      expect(new Set(received.map((d) => d.headers["webhook-timestamp"])).size).toBeGreaterThan(1);
      const verify = [...byId.values()].flat().find((p) => p.kind === "VERIFY_EMAIL");
      expect(verify?.payload).toEqual({ userId: expect.any(Number) });
      // Without a mail channel the raw token had nowhere to go: it is erased, never posted.
      expect(rows.map((r) => r.token)).toEqual([null, null]);
      // A tampered body fails the same verifier: the check is real.
      expect(() => verifier.verify(received[2].body.replace(/"id":\d+/, '"id":999999'), received[2].headers)).toThrow();
    } finally {
      await sender.stop();
      receiver.stop(true);
      await t.close();
    }
  });

  test("a webhook URL without NOTIFY_WEBHOOK_SECRET: the program warns once at start", async () => {
    const warnings = (await startLog(() => ({ NOTIFY_WEBHOOK_URL: "http://127.0.0.1:9/hook" }))).filter((line) => line.includes("NOTIFY_WEBHOOK_SECRET is not set"));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]).level).toBe("warn");
  }, 60_000);

  test("the migration: users that exist start verified; earlier notifications keep their webhook state and are not mailed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "usersvc-upgrade-"));
    const database = await openDatabase({ url: `file:${join(dir, "old.db")}` });
    try {
      // The schema as it was before account e-mail: every migration before the one adding email_verified.
      const pending = await migrateToBefore(database, "`email_verified`", [
        "INSERT INTO users (name, email, created_at, updated_at) VALUES ('Old Timer', 'old@example.com', 0, 0)",
        `INSERT INTO outbox (kind, recipient, payload, created_at, attempts, next_attempt_at, delivered_at) VALUES
          ('WELCOME', 'old@example.com', '{"userId":1}', 0, 1, 0, 5), ('USER_UPDATED', 'old@example.com', '{"userId":1}', 0, 3, 0, NULL)`,
      ]);

      expect(await migrate(database)).toBe(pending);
      expect(await database.select({ emailVerified: users.emailVerified, language: users.language }).from(users)).toEqual([{ emailVerified: true, language: "en" }]);
      const rows = await database.select().from(outbox).orderBy(outbox.id);
      expect(rows.map((r) => [r.kind, r.webhookStatus, r.webhookAttempts, r.mailStatus])).toEqual([
        ["WELCOME", "sent", 1, "skipped"],
        ["USER_UPDATED", "pending", 3, "skipped"],
      ]);
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
