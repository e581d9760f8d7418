/**
 * Stock held by unpaid orders (beyond the seed): with ORDER_PAYMENT_TIMEOUT an expired PENDING
 * order fails (PAYMENT_FAILED, "payment timeout"), its stock released, audited and notified, by
 * the sweep and lazily when someone tries to pay it; ORDER_MAX_PENDING caps a user's unpaid
 * orders (409 TOO_MANY_PENDING_ORDERS). The clock is the app's injected `now`, moved by the test.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { and, eq } from "drizzle-orm";
import { auditLog, outbox, products } from "../src/db/schema";
import type { Order } from "../src/features/orders/model";
import { expireOverdueOrders, ordersDeps } from "../src/features/orders/service";
import { makeTestApp, type TestApp } from "./helpers";
import { expectFailure } from "./scenario";

type Account = { id: number; email: string; token: string };
const GOOD_CARD = "4111111111111111";
const MINUTE = 60_000;

let clock = Date.parse("2026-03-01T09:00:00Z");
const now = () => clock;

let t: TestApp;
let admin: Account;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  t = await makeTestApp({ ORDER_PAYMENT_TIMEOUT: "30m", ORDER_MAX_PENDING: "2" }, { now });
  admin = await t.admin();
  alice = await t.createUser();
  bob = await t.createUser();
});
afterAll(() => t.close());

let serial = 0;
async function product(stock: number) {
  const res = await t.request("POST", "/api/products", {
    token: admin.token,
    body: { name: `Timed ${++serial}`, code: `T-${serial}-${crypto.randomUUID().slice(0, 6)}`, price: 5, stock },
  });
  expect(res.status).toBe(201);
  return res.body as { id: number };
}
const order = (productId: number, quantity: number, who: Account) => t.request("POST", "/api/orders", { token: who.token, body: { items: [{ productId, quantity }] } });
const pay = (id: number, who: Account) => t.request("POST", `/api/orders/${id}/pay`, { token: who.token, body: { method: "CARD", cardNumber: GOOD_CARD } });
const stockOf = async (id: number) => (await t.db.select({ s: products.stock }).from(products).where(eq(products.id, id)))[0].s;
const statusOf = async (id: number, who: Account) => (await t.request<Order>("GET", `/api/orders/${id}`, { token: who.token })).body.status;
const sweep = () => expireOverdueOrders(ordersDeps({ db: t.database, logging: t.logging, config: t.config, now }));

describe("ORDER_PAYMENT_TIMEOUT=30m", () => {
  test("the sweep: an order unpaid for 30 minutes fails, its stock released, audited and notified; a younger one stays", async () => {
    const item = await product(5);
    const old = await order(item.id, 5, alice);
    expect(old.status).toBe(201);
    // Everything is held: nobody else can order.
    expect((await order(item.id, 1, bob)).body.errorCode).toBe("INSUFFICIENT_INVENTORY");

    clock += 29 * MINUTE;
    expect(await sweep()).toBe(0);
    expect(await statusOf(old.body.id, alice)).toBe("PENDING");

    clock += 2 * MINUTE;
    const young = await order((await product(3)).id, 1, bob);
    expect(await sweep()).toBe(1);
    expect(await statusOf(old.body.id, alice)).toBe("PAYMENT_FAILED");
    expect(await statusOf(young.body.id, bob)).toBe("PENDING");
    expect(await stockOf(item.id)).toBe(5);
    expect((await order(item.id, 1, bob)).status).toBe(201);

    const audit = await t.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.action, "ORDER_PAYMENT_FAILED"), eq(auditLog.subjectId, String(old.body.id))));
    expect(audit.map((row) => ({ actor: row.actor, subjectType: row.subjectType, details: row.details, at: row.createdAt.getTime() }))).toEqual([
      { actor: "system", subjectType: "Order", details: { reason: "payment timeout" }, at: clock },
    ]);
    const notified = (await t.db.select().from(outbox).where(eq(outbox.kind, "PAYMENT_FAILED"))).filter((row) => (row.payload as { orderId?: number }).orderId === old.body.id);
    expect(notified.map((row) => ({ recipient: row.recipient, payload: row.payload }))).toEqual([
      { recipient: alice.email, payload: { orderId: old.body.id, userId: alice.id, totalAmount: 25, reason: "payment timeout" } },
    ]);
    // Swept once: a second pass finds nothing, and the failed order cannot be paid.
    expect(await sweep()).toBe(0);
    expect((await pay(old.body.id, alice)).body.errorCode).toBe("INVALID_ORDER_STATUS");
  });

  test("paying an expired order the sweep has not reached: refused (PAYMENT_FAILED), and the order fails then", async () => {
    const frank = await t.createUser();
    const item = await product(4);
    const created = await order(item.id, 4, frank);
    clock += 31 * MINUTE;
    const res = await pay(created.body.id, frank);
    expectFailure(res, 400, { errorCode: "INVALID_ORDER_STATUS", message: `Order ${created.body.id} cannot be paid in status PAYMENT_FAILED` });
    expect(await statusOf(created.body.id, frank)).toBe("PAYMENT_FAILED");
    expect(await stockOf(item.id)).toBe(4);
    await sweep(); // (others' orders from the test before expire now) never this one a second time
    expect(
      await t.db
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.action, "ORDER_PAYMENT_FAILED"), eq(auditLog.subjectId, String(created.body.id)))),
    ).toHaveLength(1);
  });

  test("an order paid within the timeout is paid", async () => {
    const created = await order((await product(1)).id, 1, alice);
    clock += 29 * MINUTE;
    const res = await pay(created.body.id, alice);
    expect([res.status, res.body.status]).toEqual([200, "PAID"]);
    clock += 60 * MINUTE;
    await sweep();
    expect(await statusOf(created.body.id, alice)).toBe("PAID");
  });
});

describe("ORDER_MAX_PENDING=2", () => {
  test("a user's third unpaid order: 409 TOO_MANY_PENDING_ORDERS (en, zh-TW), nothing reserved; another user is not held back", async () => {
    const carol = await t.createUser();
    const item = await product(10);
    expect((await order(item.id, 1, carol)).status).toBe(201);
    expect((await order(item.id, 1, carol)).status).toBe(201);
    expectFailure(await order(item.id, 1, carol), 409, {
      errorCode: "TOO_MANY_PENDING_ORDERS",
      message: "Too many orders waiting for payment (at most 2): pay or wait for one before ordering again",
    });
    const zh = await t.request("POST", "/api/orders", { token: carol.token, headers: { "accept-language": "zh-TW" }, body: { items: [{ productId: item.id, quantity: 1 }] } });
    expectFailure(zh, 409, { errorCode: "TOO_MANY_PENDING_ORDERS", message: "待付款的訂單過多（最多 2 筆），請先付款或稍後再下單" });
    expect(await stockOf(item.id)).toBe(8);
    expect((await order(item.id, 1, admin)).status).toBe(201);
  });

  test("five simultaneous orders of one user: exactly two pass (the cap is checked where the stock is reserved)", async () => {
    const dave = await t.createUser();
    const item = await product(10);
    const answers = await Promise.all(Array.from({ length: 5 }, () => order(item.id, 1, dave)));
    expect(answers.map((res) => res.status).sort()).toEqual([201, 201, 409, 409, 409]);
    expect(await stockOf(item.id)).toBe(8);
  });

  test("a paid or expired order no longer counts", async () => {
    const erin = await t.createUser();
    const item = await product(10);
    const first = await order(item.id, 1, erin);
    await order(item.id, 1, erin);
    expect((await pay(first.body.id, erin)).status).toBe(200);
    expect((await order(item.id, 1, erin)).status).toBe(201);
    expect((await order(item.id, 1, erin)).status).toBe(409);
    clock += 31 * MINUTE; // both unpaid ones expired, swept or not
    expect((await order(item.id, 1, erin)).status).toBe(201);
  });
});

describe("both off (the defaults, as the seed)", () => {
  test("an order unpaid for a year is still payable, and a user may hold many", async () => {
    const plain = await makeTestApp({}, { now });
    try {
      const boss = await plain.admin();
      const user = await plain.createUser();
      const made = await plain.request("POST", "/api/products", { token: boss.token, body: { name: "Plain", code: `P-${crypto.randomUUID().slice(0, 6)}`, price: 1, stock: 10 } });
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await plain.request<Order>("POST", "/api/orders", { token: user.token, body: { items: [{ productId: made.body.id, quantity: 1 }] } });
        expect(res.status).toBe(201);
        ids.push(res.body.id);
      }
      clock += 365 * 24 * 60 * MINUTE;
      expect(await expireOverdueOrders(ordersDeps({ db: plain.database, logging: plain.logging, config: plain.config, now }))).toBe(0);
      const token = await plain.tokens.issue(user.email, 0); // the first one expired meanwhile
      const res = await plain.request<Order>("POST", `/api/orders/${ids[0]}/pay`, { token, body: { method: "CARD", cardNumber: GOOD_CARD } });
      expect([res.status, res.body.status]).toEqual([200, "PAID"]);
    } finally {
      await plain.close();
    }
  });
});
