/**
 * The order workflow over HTTP on a real libSQL file: every row of the interface's Order
 * transition table, exact money, visibility, and the two concurrency cases run for real
 * with parallel requests (ten payments of one order; twenty orders for five units).
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { and, eq } from "drizzle-orm";
import { orders, outbox, products } from "../src/db/schema";
import { createSimulatedGateway } from "../src/features/orders/payment-gateway";
import type { PaymentGateway } from "../src/payment-gateway";
import type { Order } from "../src/features/orders/model";
import { STALE_CLAIM_MS } from "../src/features/orders/service";
import { countingGateway, ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { DENIED, expectFailure, invalidBody, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

const payments = countingGateway(20);

let t: TestApp;
type Account = { id: number; email: string; token: string };
let admin: Account;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  t = await makeTestApp({}, { paymentGateway: payments.gateway });
  admin = await t.admin();
  alice = await t.createUser();
  bob = await t.createUser();
});
afterAll(() => t.close());

const GOOD_CARD = "4111111111111111";
const DECLINED_CARD = "4000000000000002";
let serial = 0;

async function product(price: number, stock: number, extra: Record<string, unknown> = {}) {
  const res = await t.request("POST", "/api/products", {
    token: admin.token,
    body: { name: `Item ${++serial}`, code: `O-${serial}-${crypto.randomUUID().slice(0, 6)}`, price, stock, ...extra },
  });
  expect(res.status).toBe(201);
  return res.body as { id: number; name: string; price: number; stock: number };
}
const order = (items: { productId: number; quantity: number }[], who: Account = alice, userId?: number) =>
  t.request("POST", "/api/orders", { token: who.token, body: userId === undefined ? { items } : { userId, items } });
const pay = (id: number, cardNumber = GOOD_CARD, who: Account = alice) => t.request("POST", `/api/orders/${id}/pay`, { token: who.token, body: { method: "CARD", cardNumber } });
const stockOf = async (id: number) => (await t.db.select({ s: products.stock }).from(products).where(eq(products.id, id)))[0].s;
const outboxOf = (kind: string, orderId: number) =>
  t.db
    .select()
    .from(outbox)
    .where(eq(outbox.kind, kind))
    .then((rows) => rows.filter((r) => (r.payload as { orderId?: number }).orderId === orderId));

describe("create: (none) → PENDING, total computed, stock reserved, order-created notification", () => {
  test("0.10 × 3 + 19.99 × 7 = 0.30 + 139.93 = 140.23, exactly", async () => {
    const dime = await product(0.1, 10);
    const item = await product(19.99, 10);
    const res = await order([
      { productId: dime.id, quantity: 3 },
      { productId: item.id, quantity: 7 },
    ]);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(Number),
      userId: alice.id,
      status: "PENDING",
      orderItems: [
        { productId: dime.id, productName: dime.name, quantity: 3, unitPrice: 0.1, totalPrice: 0.3 },
        { productId: item.id, productName: item.name, quantity: 7, unitPrice: 19.99, totalPrice: 139.93 },
      ],
      totalAmount: 140.23,
      createdAt: expect.stringMatching(ISO_Z),
      paymentId: null,
      paidAt: null,
    });
    expect(res.text).toContain('"totalPrice":0.3}');
    expect(res.text).toContain('"totalAmount":140.23');
    expect([await stockOf(dime.id), await stockOf(item.id)]).toEqual([7, 3]);
    const [row] = await t.db.select().from(orders).where(eq(orders.id, res.body.id));
    expect(row.totalCents).toBe(14023);
    const notes = await outboxOf("ORDER_CREATED", res.body.id);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({
      recipient: alice.email,
      webhookStatus: "pending",
      mailStatus: "pending",
      payload: { orderId: res.body.id, userId: alice.id, totalAmount: 140.23 },
    });
  });

  test("userId absent means the caller; an ADMIN may order for anyone", async () => {
    const p = await product(1, 10);
    const mine = await order([{ productId: p.id, quantity: 1 }], bob);
    expect(mine.body.userId).toBe(bob.id);
    const forBob = await order([{ productId: p.id, quantity: 1 }], admin, bob.id);
    expect(forBob.status).toBe(201);
    expect(forBob.body.userId).toBe(bob.id);
  });

  scenarios([
    {
      name: "an unknown product",
      send: () => order([{ productId: 999999, quantity: 1 }]),
      status: 404,
      failure: { errorCode: "PRODUCT_NOT_FOUND", message: "Product not found, ID: 999999" },
    },
    { name: "a USER ordering for someone else", send: () => order([{ productId: 1, quantity: 1 }], alice, bob.id), status: 403, failure: DENIED },
    {
      name: "an ADMIN ordering for an unknown user",
      send: () => order([{ productId: 1, quantity: 1 }], admin, 999999),
      status: 404,
      failure: { errorCode: "USER_NOT_FOUND", message: "User not found, ID: 999999" },
    },
    { name: "no items", send: () => order([]), status: 400, failure: invalidBody(["items: must have at least 1 entries"]) },
    { name: "a quantity of 0", send: () => order([{ productId: 1, quantity: 0 }]), status: 400, failure: invalidBody(["items[0].quantity: must be at least 1"]) },
    { name: "no token", send: () => t.request("POST", "/api/orders", { body: { items: [{ productId: 1, quantity: 1 }] } }), status: 401, failure: UNAUTHORIZED },
  ]);

  test("a product that is not ACTIVE cannot be ordered", async () => {
    const p = await product(5, 10, { status: "INACTIVE" });
    const res = await order([{ productId: p.id, quantity: 1 }]);
    expectFailure(res, 400, { errorCode: "PRODUCT_NOT_AVAILABLE", message: `Product ${p.id} cannot be ordered (status INACTIVE)` });
    expect(await stockOf(p.id)).toBe(10);
  });

  test("insufficient stock on any line → 400 INSUFFICIENT_INVENTORY and nothing reserved", async () => {
    const plenty = await product(2, 10);
    const scarce = await product(3, 2);
    const before = await t.db.$count(orders);
    const res = await order([
      { productId: plenty.id, quantity: 4 },
      { productId: scarce.id, quantity: 3 },
    ]);
    expectFailure(res, 400, { errorCode: "INSUFFICIENT_INVENTORY", message: `Insufficient inventory for product ${scarce.id}: requested 3, available 2` });
    expect([await stockOf(plenty.id), await stockOf(scarce.id)]).toEqual([10, 2]);
    expect(await t.db.$count(orders)).toBe(before);
  });

  test("a missing product is reported before another line's short stock, and nothing is reserved", async () => {
    const scarce = await product(3, 1);
    const res = await order([
      { productId: scarce.id, quantity: 2 },
      { productId: 999998, quantity: 1 },
    ]);
    expectFailure(res, 404, { errorCode: "PRODUCT_NOT_FOUND", message: "Product not found, ID: 999998" });
    expect(await stockOf(scarce.id)).toBe(1);
  });

  test("two lines of one product count together against its stock", async () => {
    const p = await product(1, 5);
    const res = await order([
      { productId: p.id, quantity: 3 },
      { productId: p.id, quantity: 3 },
    ]);
    expect(res.body.errorCode).toBe("INSUFFICIENT_INVENTORY");
    expect(await stockOf(p.id)).toBe(5);
  });
});

describe("payment transitions", () => {
  test("PENDING + payment succeeds → PAID with paymentId and paidAt, payment-success notification", async () => {
    const p = await product(19.99, 5);
    const created = (await order([{ productId: p.id, quantity: 2 }])).body;
    const before = payments.charges();
    const res = await pay(created.id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...created, status: "PAID", paymentId: expect.stringMatching(/^PAY-/), paidAt: expect.stringMatching(ISO_Z) });
    expect(payments.charges() - before).toBe(1);
    expect(await stockOf(p.id)).toBe(3);
    const notes = await outboxOf("PAYMENT_SUCCESS", created.id);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ recipient: alice.email, payload: { orderId: created.id, paymentId: res.body.paymentId, totalAmount: 39.98 } });
    const read = await t.request("GET", `/api/orders/${created.id}`, { token: alice.token });
    expect(read.body).toEqual(res.body);
  });

  test("PENDING + payment declined → PAYMENT_FAILED, stock released, 400 ORDER_PAYMENT_FAILED with the cause", async () => {
    const p = await product(4.5, 5);
    const created = (await order([{ productId: p.id, quantity: 4 }])).body;
    expect(await stockOf(p.id)).toBe(1);
    const res = await pay(created.id, DECLINED_CARD);
    expectFailure(res, 400, { errorCode: "ORDER_PAYMENT_FAILED", message: `Payment for order ${created.id} failed: card declined by issuer` });
    expect(await stockOf(p.id)).toBe(5);
    const read = await t.request("GET", `/api/orders/${created.id}`, { token: alice.token });
    expect(read.body).toEqual({ ...created, status: "PAYMENT_FAILED" });
    expect(await outboxOf("PAYMENT_SUCCESS", created.id)).toHaveLength(0);
  });

  test("any other status → 400 INVALID_ORDER_STATUS, order unchanged, gateway not asked", async () => {
    const p = await product(1, 5);
    const paid = (await order([{ productId: p.id, quantity: 1 }])).body;
    const paidView = (await pay(paid.id)).body;
    const failed = (await order([{ productId: p.id, quantity: 1 }])).body;
    await pay(failed.id, DECLINED_CARD);
    const failedView = (await t.request("GET", `/api/orders/${failed.id}`, { token: alice.token })).body;
    const before = payments.charges();
    for (const [view, status] of [
      [paidView, "PAID"],
      [failedView, "PAYMENT_FAILED"],
    ] as const) {
      const again = await pay(view.id);
      expectFailure(again, 400, { errorCode: "INVALID_ORDER_STATUS", message: `Order ${view.id} cannot be paid in status ${status}` });
      expect((await t.request("GET", `/api/orders/${view.id}`, { token: alice.token })).body).toEqual(view);
    }
    expect(payments.charges()).toBe(before);
    expect(await stockOf(p.id)).toBe(4);
  });

  scenarios([
    { name: "a card number failing the Luhn check", send: () => pay(1, "4111111111111112"), status: 400, failure: invalidBody(["cardNumber: is not a valid card number"]) },
    { name: "a card number with letters", send: () => pay(1, "4111-1111-1111-1111"), status: 400, failure: invalidBody(["cardNumber: is not a valid card number"]) },
    {
      name: "a method other than CARD",
      send: () => t.request("POST", "/api/orders/1/pay", { token: alice.token, body: { method: "CASH", cardNumber: GOOD_CARD } }),
      status: 400,
      failure: invalidBody(["method: must be one of CARD"]),
    },
    { name: "an unknown order", send: () => pay(999999), status: 404, failure: { errorCode: "ORDER_NOT_FOUND", message: "Order not found, ID: 999999" } },
  ]);
});

describe("visibility", () => {
  test("a USER sees and pays only their own orders; another's is 404 ORDER_NOT_FOUND; ADMIN sees all", async () => {
    const p = await product(1, 10);
    const alices = (await order([{ productId: p.id, quantity: 1 }], alice)).body;
    const bobs = (await order([{ productId: p.id, quantity: 1 }], bob)).body;
    const notFound = { errorCode: "ORDER_NOT_FOUND", message: `Order not found, ID: ${bobs.id}` };

    expectFailure(await t.request("GET", `/api/orders/${bobs.id}`, { token: alice.token }), 404, notFound);
    expectFailure(await pay(bobs.id, GOOD_CARD, alice), 404, notFound);
    expect((await t.request("GET", `/api/orders/${bobs.id}`, { token: bob.token })).body.status).toBe("PENDING");

    const own = await t.request<Order[]>("GET", "/api/orders", { token: alice.token });
    expect(own.body.every((o) => o.userId === alice.id)).toBe(true);
    expect(own.body.map((o) => o.id)).toContain(alices.id);
    expect(own.headers.get("x-total-count")).toBe(String(own.body.length));
    const others = await t.request("GET", `/api/orders?userId=${bob.id}`, { token: alice.token });
    expect([others.status, others.body, others.headers.get("x-total-count")]).toEqual([200, [], "0"]);

    const all = await t.request<Order[]>("GET", "/api/orders", { token: admin.token });
    expect(all.body.map((o) => o.id)).toEqual(expect.arrayContaining([alices.id, bobs.id]));
    const bobsList = await t.request<Order[]>("GET", `/api/orders?userId=${bob.id}`, { token: admin.token });
    expect(bobsList.body.length).toBeGreaterThan(0);
    expect(bobsList.body.every((o) => o.userId === bob.id)).toBe(true);
    expect((await t.request("GET", `/api/orders/${bobs.id}`, { token: admin.token })).body).toEqual(bobs);
    const paidByAdmin = await pay(bobs.id, GOOD_CARD, admin);
    expect(paidByAdmin.body.status).toBe("PAID");
  });
});

describe("the list's status filter", () => {
  test("?status= narrows the list and its total, for ADMIN and (within their own) for a USER", async () => {
    const p = await product(3, 10);
    const paid = (await order([{ productId: p.id, quantity: 1 }], bob)).body;
    expect((await pay(paid.id, GOOD_CARD, bob)).status).toBe(200);
    const failed = (await order([{ productId: p.id, quantity: 1 }], bob)).body;
    expect((await pay(failed.id, DECLINED_CARD, bob)).status).toBe(400);
    const pending = (await order([{ productId: p.id, quantity: 1 }], bob)).body;

    for (const [status, id] of [
      ["PAID", paid.id],
      ["PAYMENT_FAILED", failed.id],
      ["PENDING", pending.id],
    ] as const) {
      const all = await t.request<Order[]>("GET", `/api/orders?status=${status}&size=100`, { token: admin.token });
      expect(all.body.every((o) => o.status === status)).toBe(true);
      expect(all.body.map((o) => o.id)).toContain(id);
      expect(all.headers.get("x-total-count")).toBe(String(all.body.length));
      const bobs = await t.request<Order[]>("GET", `/api/orders?status=${status}&userId=${bob.id}`, { token: bob.token });
      expect(bobs.body.map((o) => o.id)).toContain(id);
      expect(bobs.body.every((o) => o.status === status && o.userId === bob.id)).toBe(true);
      expect((await t.request("GET", `/api/orders?status=${status}&userId=${bob.id}`, { token: alice.token })).body).toEqual([]);
    }
  });

  scenarios([
    {
      name: "an unknown status",
      send: () => t.request("GET", "/api/orders?status=SHIPPED", { token: admin.token }),
      status: 400,
      failure: invalidParams(["status: must be one of PENDING, PAID, PAYMENT_FAILED"]),
    },
  ]);
});

describe("concurrency, with real parallel requests", () => {
  test("10 simultaneous payments of one order: the gateway is charged once and exactly one answers 200", async () => {
    const p = await product(9.99, 3);
    const created = (await order([{ productId: p.id, quantity: 1 }])).body;
    const before = payments.charges();
    const results = await Promise.all(Array.from({ length: 10 }, () => pay(created.id)));
    expect(payments.charges() - before).toBe(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    const rest = results.filter((r) => r.status !== 200);
    expect(rest).toHaveLength(9);
    for (const r of rest) expect([r.status, r.body.errorCode]).toEqual([400, "INVALID_ORDER_STATUS"]);
    const [row] = await t.db.select().from(orders).where(eq(orders.id, created.id));
    expect(row.status).toBe("PAID");
    expect(await outboxOf("PAYMENT_SUCCESS", created.id)).toHaveLength(1);
  });

  test("20 simultaneous orders for a product with stock 5: exactly five 201, stock ends at 0", async () => {
    const p = await product(2.5, 5);
    const buyers = await Promise.all(Array.from({ length: 20 }, () => t.createUser()));
    const results = await Promise.all(buyers.map((buyer) => order([{ productId: p.id, quantity: 1 }], buyer)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(5);
    expect(results.filter((r) => r.status !== 201).every((r) => r.status === 400 && r.body.errorCode === "INSUFFICIENT_INVENTORY")).toBe(true);
    expect(await stockOf(p.id)).toBe(0);
    const placed = await t.db.$count(orders, and(eq(orders.status, "PENDING")));
    expect(placed).toBeGreaterThanOrEqual(5);
  });
});

describe("a payer that never comes back", () => {
  test("the simulator answers a repeated idempotency key with the first result, never a second charge", async () => {
    const gateway = createSimulatedGateway();
    const first = await gateway.charge({ orderId: 1, amountCents: 100, cardNumber: GOOD_CARD, idempotencyKey: "order-1" });
    expect(await gateway.charge({ orderId: 1, amountCents: 100, cardNumber: GOOD_CARD, idempotencyKey: "order-1" })).toEqual(first);
    expect(await gateway.charge({ orderId: 2, amountCents: 100, cardNumber: GOOD_CARD, idempotencyKey: "order-2" })).not.toEqual(first);
  });

  test("its claim goes stale after STALE_CLAIM_MS; the next payment takes the order over with the same idempotency key", async () => {
    let clock = Date.now();
    const simulator = createSimulatedGateway();
    const keys: string[] = [];
    const gateway: PaymentGateway = {
      charge(request) {
        keys.push(request.idempotencyKey);
        // The first payer "dies" while the gateway works: its request never finishes.
        return keys.length === 1 ? new Promise(() => {}) : simulator.charge(request);
      },
    };
    const own = await makeTestApp({}, { now: () => clock, paymentGateway: gateway });
    try {
      const boss = await own.admin();
      const buyer = await own.createUser();
      const item = (await own.request("POST", "/api/products", { token: boss.token, body: { name: "Slow", code: "SLOW", price: 5, stock: 1 } })).body;
      const placed = (await own.request("POST", "/api/orders", { token: buyer.token, body: { items: [{ productId: item.id, quantity: 1 }] } })).body;
      const payNow = () => own.request("POST", `/api/orders/${placed.id}/pay`, { token: buyer.token, body: { method: "CARD", cardNumber: GOOD_CARD } });
      void payNow();
      while (keys.length === 0) await Bun.sleep(5);

      const early = await payNow();
      expect([early.status, early.body.errorCode]).toEqual([400, "INVALID_ORDER_STATUS"]);
      expect(keys).toHaveLength(1);

      clock += STALE_CLAIM_MS + 1000;
      const late = await payNow();
      expect(late.status).toBe(200);
      expect(late.body).toMatchObject({ id: placed.id, status: "PAID", paymentId: expect.stringMatching(/^PAY-/) });
      expect(keys).toEqual([`order-${placed.id}`, `order-${placed.id}`]);
    } finally {
      await own.close();
    }
  });
});
