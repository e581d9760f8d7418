/**
 * One clock: every timestamp a journey makes comes from the app's injected `now`, never from the
 * machine's. The clock is set to a different instant, far from today, before each leg of the
 * journey (register → login → update → order → revoke → health), and every timestamp
 * that leg makes, in its answer, its envelope and the rows it leaves, must be that instant.
 * Everything is read through HTTP, so the test holds whatever the layers under the routes are.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import type { AuditEntry } from "../src/features/audit/model";
import { makeTestApp, type TestApp, uniqueEmail, validRegistration } from "./helpers";

/**
 * Instants of one morning in 2021, minutes apart (a bearer token lives 5 hours), each with a
 * minute, second and millisecond of its own, so one in the wrong place shows.
 */
const at = (minute: number, second: number, ms: number) => Date.UTC(2021, 1, 3, 4, minute, second, ms);
const AT = {
  admin: at(0, 0, 1),
  registered: at(5, 6, 101),
  loggedIn: at(10, 11, 202),
  updated: at(15, 16, 303),
  ordered: at(20, 21, 404),
  paid: at(25, 26, 505),
  revoked: at(30, 31, 606),
  refused: at(35, 36, 707),
  checked: at(38, 39, 909),
  read: at(40, 41, 808),
};
const iso = (ms: number) => new Date(ms).toISOString();

let clock = AT.admin;
let t: TestApp;
let admin: { id: number; email: string };
/** A bearer token for the admin, issued at the clock's instant (a token from a month before has expired). */
const asAdmin = async () => ({ token: await t.tokens.issue(admin.email, 0, admin.id) });
const email = uniqueEmail("clock");
const password = validRegistration(email).password;
const department = `Clockwork ${crypto.randomUUID().slice(0, 8)}`;
let userId: number;
let token: string;
let orderId: number;

type Outboxed = { kind: string; recipient: string | null; createdAt: string; webhook: { nextAttemptAt: string | null }; mail: { nextAttemptAt: string | null } };

/** The journey runs once, leg by leg, each at its own instant; the tests below read what it left. */
const answers: Record<string, { status: number; body: Record<string, unknown> }> = {};

beforeAll(async () => {
  t = await makeTestApp({}, { now: () => clock });
  admin = await t.admin();

  clock = AT.registered;
  answers.register = await t.request("POST", "/api/auth/register", { body: validRegistration(email) });
  userId = (answers.register.body.data as { id: number }).id;

  clock = AT.loggedIn;
  answers.login = await t.request("POST", "/api/auth/login", { body: { email, password } });
  token = (answers.login.body.data as { token: string }).token;

  clock = AT.updated;
  answers.update = await t.request("PATCH", `/api/users/${userId}`, { token, body: { name: "Mei Lin Chen", department } });

  clock = AT.ordered;
  const product = await t.request("POST", "/api/products", { ...(await asAdmin()), body: { name: "Clock", code: `CLK-${crypto.randomUUID().slice(0, 6)}`, price: 10, stock: 5 } });
  answers.product = product;
  answers.order = await t.request("POST", "/api/orders", { token, body: { items: [{ productId: (product.body as { id: number }).id, quantity: 1 }] } });
  orderId = (answers.order.body as { id: number }).id;

  clock = AT.paid;
  answers.pay = await t.request("POST", `/api/orders/${orderId}/pay`, { token, body: { method: "CARD", cardNumber: "4111111111111111" } });

  clock = AT.revoked;
  answers.revoke = await t.request("POST", `/api/users/${userId}/revoke-tokens`, await asAdmin());

  clock = AT.refused;
  answers.refused = await t.request("GET", "/api/users/999999", await asAdmin());

  clock = AT.checked;
  answers.health = await t.request("GET", "/actuator/health", await asAdmin());

  clock = AT.read;
});
afterAll(() => t.close());

const outboxOf = async (kind: string) =>
  (await t.request<Outboxed[]>("GET", `/api/admin/outbox?kind=${kind}&size=100`, await asAdmin())).body.filter((row) => row.recipient === email);
/** The journey's user's audit rows of one action. */
const auditOf = async (action: string) =>
  (await t.request<AuditEntry[]>("GET", `/api/audit?action=${action}&size=100`, await asAdmin())).body.filter(
    (row) => row.subjectType === "User" && row.subjectId === String(userId),
  );
const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString()) as { iat: number; exp: number };

describe("every timestamp of a journey comes from the injected clock", () => {
  test("register: the new user's createdAt and updatedAt", () => {
    expect(answers.register.status).toBe(201);
    expect(answers.register.body.data).toMatchObject({ createdAt: iso(AT.registered), updatedAt: iso(AT.registered), lastLogin: null });
  });

  test("login: the user's lastLogin, and a token issued then that expires 5 hours after it", async () => {
    expect(answers.login.status).toBe(200);
    expect(claimsOf(token)).toMatchObject({ iat: Math.floor(AT.loggedIn / 1000), exp: Math.floor(AT.loggedIn / 1000) + 5 * 3600 });
    const user = await t.request("GET", `/api/users/${userId}`, await asAdmin());
    expect(user.body.lastLogin).toBe(iso(AT.loggedIn));
  });

  test("success envelopes: register's and login's timestamp", () => {
    expect([answers.register.body.timestamp, answers.login.body.timestamp]).toEqual([iso(AT.registered), iso(AT.loggedIn)]);
  });

  test("update: updatedAt moves, createdAt stays; the department it names is made then", async () => {
    expect(answers.update.status).toBe(200);
    expect(answers.update.body).toMatchObject({ createdAt: iso(AT.registered), updatedAt: iso(AT.updated), department });
    const departments = (await t.request<{ name: string; createdAt: string }[]>("GET", "/api/departments", await asAdmin())).body;
    expect(departments.filter((d) => d.name === department).map((d) => d.createdAt)).toEqual([iso(AT.updated)]);
  });

  test("order: the product's and the order's createdAt, then paidAt", () => {
    expect(answers.product.body).toMatchObject({ createdAt: iso(AT.ordered) });
    expect(answers.order.status).toBe(201);
    expect(answers.order.body).toMatchObject({ status: "PENDING", createdAt: iso(AT.ordered), paidAt: null });
    expect(answers.pay.status).toBe(200);
    expect(answers.pay.body).toMatchObject({ status: "PAID", createdAt: iso(AT.ordered), paidAt: iso(AT.paid) });
  });

  test("outbox rows: each made and due at the instant of the leg that queued it", async () => {
    const made: Record<string, unknown> = {};
    for (const kind of ["WELCOME", "USER_UPDATED", "ORDER_CREATED", "PAYMENT_SUCCESS"]) {
      made[kind] = (await outboxOf(kind)).map((row) => ({ createdAt: row.createdAt, webhookDue: row.webhook.nextAttemptAt, mailDue: row.mail.nextAttemptAt }));
    }
    const madeAt = (instant: number) => [{ createdAt: iso(instant), webhookDue: iso(instant), mailDue: iso(instant) }];
    expect(made).toEqual({ WELCOME: madeAt(AT.registered), USER_UPDATED: madeAt(AT.updated), ORDER_CREATED: madeAt(AT.ordered), PAYMENT_SUCCESS: madeAt(AT.paid) });
  });

  test("audit rows: the registration's USER_CREATED and the revocation's USER_TOKENS_REVOKED, each at its leg's instant", async () => {
    expect((await auditOf("USER_CREATED")).map((row) => row.createdAt)).toEqual([iso(AT.registered)]);
    expect(answers.revoke.status).toBe(204);
    expect((await auditOf("USER_TOKENS_REVOKED")).map((row) => row.createdAt)).toEqual([iso(AT.revoked)]);
  });

  test("health: the database's timestamp in the details an ADMIN sees", () => {
    expect(answers.health.status).toBe(200);
    expect(answers.health.body).toMatchObject({ components: { db: { details: { timestamp: iso(AT.checked) } } } });
  });

  test("an error's envelope carries the instant it was answered", () => {
    expect(answers.refused.status).toBe(404);
    expect(answers.refused.body.timestamp).toBe(iso(AT.refused));
  });
});
