/**
 * Notifications and audit: written in the same transaction as the change (a trigger that
 * refuses the outbox row rolls the change back), delivered by the background sender to a
 * real local HTTP receiver with retries across a restart, logged when no URL is set, and the
 * admin's audit log.
 */
import { afterAll, beforeAll, describe, expect, onSqld, test } from "./legs";
import { eq, isNull, sql } from "drizzle-orm";
import { auditLog, orders, outbox, products, users } from "../src/db/schema";
import type { Database } from "../src/db/database";
import type { AuditEntry } from "../src/features/audit/model";
import { enqueueNotification } from "../src/store/outbox";
import { retryDelay, startOutboxSender } from "../src/features/notifications/sender";
import { webhookChannel } from "../src/features/notifications/channels";
import { createLogging } from "../src/logging/logger";
import { createMetrics } from "../src/metrics";
import { countingGateway, holdDatabaseLock, makeTestApp, type TestApp, uniqueEmail } from "./helpers";
import { DENIED, expectFailure } from "./scenario";

const payments = countingGateway();

let t: TestApp;
type Account = { id: number; email: string; token: string };
let admin: Account;
let alice: Account;

beforeAll(async () => {
  t = await makeTestApp({}, { paymentGateway: payments.gateway });
  admin = await t.admin();
  alice = await t.createUser();
});
afterAll(() => t.close());

let serial = 0;
const outboxRows = (kind: string) => t.db.select().from(outbox).where(eq(outbox.kind, kind));
const stockOf = async (id: number) => (await t.db.select({ s: products.stock }).from(products).where(eq(products.id, id)))[0].s;

/** A trigger that refuses outbox rows of one kind: the notification "cannot be written". */
async function refusingOutbox<T>(kind: string, body: () => Promise<T>): Promise<T> {
  await t.db.run(sql.raw(`CREATE TRIGGER refuse_outbox BEFORE INSERT ON outbox WHEN NEW.kind = '${kind}' BEGIN SELECT RAISE(ABORT, 'outbox refused by test'); END`));
  try {
    return await body();
  } finally {
    await t.db.run(sql`DROP TRIGGER refuse_outbox`);
  }
}

async function product(stock: number) {
  const res = await t.request("POST", "/api/products", {
    token: admin.token,
    body: { name: "Thing", code: `X-${++serial}-${crypto.randomUUID().slice(0, 6)}`, price: 12.5, stock },
  });
  expect(res.status).toBe(201);
  return res.body as { id: number };
}

describe("user creation: welcome and audit commit with the user", () => {
  test("POST /api/users writes one WELCOME to the outbox and one USER_CREATED audit row", async () => {
    const email = uniqueEmail("o");
    const res = await t.request("POST", "/api/users", { token: admin.token, body: { name: "New Person", email } });
    expect(res.status).toBe(201);
    const welcome = (await outboxRows("WELCOME")).filter((r) => r.recipient === email);
    expect(welcome).toHaveLength(1);
    expect(welcome[0]).toMatchObject({ payload: { userId: res.body.id }, webhookStatus: "pending", webhookAttempts: 0, mailStatus: "pending", token: null });
    const audit = await t.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.subjectId, String(res.body.id)));
    expect(audit).toEqual([
      { id: expect.any(Number), action: "USER_CREATED", actor: admin.email, subjectType: "User", subjectId: String(res.body.id), details: { email }, createdAt: expect.any(Date) },
    ]);
  });

  test("a WELCOME that cannot be written rolls the user back: error, no user, no audit row", async () => {
    const email = uniqueEmail("o");
    const auditBefore = await t.db.$count(auditLog);
    const res = await refusingOutbox("WELCOME", () => t.request("POST", "/api/users", { token: admin.token, body: { name: "Never Stored", email } }));
    // The trigger's RAISE(ABORT) is a constraint failure to SQLite: the errors plugin's 409.
    expect([res.status, res.body.errorCode]).toEqual([409, "DATA_INTEGRITY_VIOLATION"]);
    expect(res.body.success).toBe(false);
    expect(await t.db.select().from(users).where(eq(users.email, email))).toEqual([]);
    expect(await t.db.$count(auditLog)).toBe(auditBefore);
    // Once notifications can be written again, the same user can be created.
    expect((await t.request("POST", "/api/users", { token: admin.token, body: { name: "Stored Now", email } })).status).toBe(201);
  });

  test("a USER_UPDATED that cannot be written never undoes the update", async () => {
    const created = (await t.request("POST", "/api/users", { token: admin.token, body: { name: "Before", email: uniqueEmail("o") } })).body;
    const res = await refusingOutbox("USER_UPDATED", () => t.request("PUT", `/api/users/${created.id}`, { token: admin.token, body: { name: "After", email: created.email } }));
    expect(res.status).toBe(200);
    expect((await t.db.select({ name: users.name }).from(users).where(eq(users.id, created.id)))[0].name).toBe("After");
    expect((await outboxRows("USER_UPDATED")).filter((r) => (r.payload as { userId?: number }).userId === created.id)).toEqual([]);
  });
});

describe("orders: the outbox row and the change share one transaction", () => {
  test("an ORDER_CREATED that cannot be written rolls back the order and its stock reservation", async () => {
    const p = await product(5);
    const before = await t.db.$count(orders);
    const res = await refusingOutbox("ORDER_CREATED", () => t.request("POST", "/api/orders", { token: alice.token, body: { items: [{ productId: p.id, quantity: 2 }] } }));
    // The trigger's RAISE(ABORT) is a constraint failure to SQLite: the errors plugin's 409.
    expect([res.status, res.body.errorCode]).toEqual([409, "DATA_INTEGRITY_VIOLATION"]);
    expect(await t.db.$count(orders)).toBe(before);
    expect(await stockOf(p.id)).toBe(5);
  });

  test("a PAYMENT_SUCCESS that cannot be written leaves the order unpaid and is never charged twice", async () => {
    const p = await product(5);
    const created = (await t.request("POST", "/api/orders", { token: alice.token, body: { items: [{ productId: p.id, quantity: 1 }] } })).body;
    const before = payments.charges();
    const res = await refusingOutbox("PAYMENT_SUCCESS", () =>
      t.request("POST", `/api/orders/${created.id}/pay`, { token: alice.token, body: { method: "CARD", cardNumber: "4111111111111111" } }),
    );
    // The trigger's RAISE(ABORT) is a constraint failure to SQLite: the errors plugin's 409.
    expect([res.status, res.body.errorCode]).toEqual([409, "DATA_INTEGRITY_VIOLATION"]);
    const [row] = await t.db.select().from(orders).where(eq(orders.id, created.id));
    expect([row.status, row.paymentId, row.paidAt]).toEqual(["PROCESSING", null, null]);
    expect((await outboxRows("PAYMENT_SUCCESS")).filter((r) => (r.payload as { orderId?: number }).orderId === created.id)).toEqual([]);
    // The charge happened but was not recorded: the claim keeps a second payment from charging again.
    const again = await t.request("POST", `/api/orders/${created.id}/pay`, { token: alice.token, body: { method: "CARD", cardNumber: "4111111111111111" } });
    expect([again.status, again.body.errorCode]).toEqual([400, "INVALID_ORDER_STATUS"]);
    expect(payments.charges() - before).toBe(1);
  });
});

describe("the admin's audit log", () => {
  test("GET /api/audit: newest first, paged, filtered by action, X-Total-Count; ADMIN only", async () => {
    const all = await t.request<AuditEntry[]>("GET", "/api/audit?action=USER_CREATED", { token: admin.token });
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThanOrEqual(3);
    expect(all.body.every((e) => e.action === "USER_CREATED")).toBe(true);
    expect(all.headers.get("x-total-count")).toBe(String(all.body.length));
    const ids = all.body.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(all.body[0]).toEqual({
      id: expect.any(Number),
      action: "USER_CREATED",
      actor: admin.email,
      subjectType: "User",
      subjectId: expect.any(String),
      details: { email: expect.any(String) },
      createdAt: expect.stringMatching(/Z$/),
    });
    const page = await t.request("GET", "/api/audit?action=USER_CREATED&page=1&size=1", { token: admin.token });
    expect(page.body).toEqual([all.body[1]]);
    expect(page.headers.get("x-total-count")).toBe(String(all.body.length));
    expect((await t.request("GET", "/api/audit?action=NO_SUCH", { token: admin.token })).body).toEqual([]);
    expect((await t.request("GET", "/api/audit?size=101", { token: admin.token })).status).toBe(400);
    const denied = await t.request("GET", "/api/audit", { token: alice.token });
    expectFailure(denied, 403, DENIED);
  });
});

describe("the sender", () => {
  test("retry delays double from the base and stop at the cap", () => {
    expect([1, 2, 3, 4, 10, 30].map((n) => retryDelay(n, 1000, 60_000))).toEqual([1000, 2000, 4000, 8000, 60_000, 60_000]);
  });

  /** Polls the row until `done` or 5 s. */
  async function until(id: number, done: (row: typeof outbox.$inferSelect) => boolean, db = t.db) {
    for (let i = 0; i < 250; i++) {
      const [row] = await db.select().from(outbox).where(eq(outbox.id, id));
      if (done(row)) return row;
      await Bun.sleep(20);
    }
    throw new Error(`outbox row ${id} never reached the expected state`);
  }

  // sqld never answers SQLITE_BUSY (it waits for the lock itself, and ends an idle holder after 5 s): a file's contention.
  test.skipIf(onSqld)(
    "a busy database (another writer holds the lock): the sender backs off quietly, a debug line and a counter, never an error",
    async () => {
      const own = await makeTestApp({ DATABASE_BUSY_TIMEOUT_MS: "50" });
      const lines: string[] = [];
      const logging = createLogging("debug", "json", { write: (line: string) => void lines.push(line) });
      const metrics = createMetrics({ defaultMetrics: false });
      const contended = async () => (await metrics.outboxContention.get()).values[0]?.value ?? 0;
      let contention = 0;
      const lock = await holdDatabaseLock(own.config);
      try {
        // No channel: the housekeeping loop alone, whose writes meet the lock.
        const sender = startOutboxSender({ db: own.database, logger: logging.get("outbox"), channels: [], metrics, pollIntervalMs: 10 });
        for (let i = 0; i < 300; i++) {
          contention = await contended();
          if (contention >= 3) break;
          await Bun.sleep(10);
        }
        await sender.stop();
      } finally {
        await lock.release();
        await own.close();
      }
      contention = await contended();
      expect(contention).toBeGreaterThanOrEqual(3);
      const logged = lines.map((l) => JSON.parse(l));
      expect(logged.filter((l) => l.level === "error" || l.level === "warn")).toEqual([]);
      expect(logged.filter((l) => l.level === "debug" && l.msg === "outbox pass met a busy database; backing off").length).toBe(contention);
      // It backs off: each pause at least doubles.
      const pauses = logged.filter((l) => l.retryInMs !== undefined).map((l) => l.retryInMs);
      expect(pauses.slice(0, 3)).toEqual([20, 40, 80]);
    },
    20_000,
  );

  test("delivers to a real HTTP receiver: a 500 is retried with backoff, and a restarted sender finishes the job", async () => {
    const own = await makeTestApp();
    const received: { body: unknown; key: string | null }[] = [];
    let answer = 500;
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        received.push({ body: await request.json(), key: request.headers.get("idempotency-key") });
        return new Response(null, { status: answer });
      },
    });
    const logger = createLogging("silent", "json").get("outbox");
    const channels = [webhookChannel({ url: `http://127.0.0.1:${receiver.port}/hook`, timeoutMs: 5000, logger, now: Date.now })];
    try {
      await enqueueNotification(own.db, "ORDER_CREATED", "buyer@example.com", { orderId: 42, totalAmount: 19.99 }, new Date());
      const [{ id }] = await own.db.select({ id: outbox.id }).from(outbox);

      const first = startOutboxSender({ db: own.database, logger, channels, pollIntervalMs: 20, baseDelayMs: 300 });
      const failed = await until(id, (r) => r.webhookAttempts === 1, own.db);
      await first.stop();
      expect(failed).toMatchObject({ webhookStatus: "pending", webhookSentAt: null, webhookLastError: "webhook answered 500" });
      expect(failed.webhookNextAttemptAt.getTime()).toBeGreaterThan(Date.now());
      // Without SMTP the mail channel has nothing to do: its state never holds the webhook back.
      expect(failed.mailStatus).toBe("skipped");

      answer = 200;
      const second = startOutboxSender({ db: own.database, logger, channels, pollIntervalMs: 20, baseDelayMs: 300 });
      const delivered = await until(id, (r) => r.webhookSentAt !== null, own.db);
      await second.stop();
      expect(delivered).toMatchObject({ webhookStatus: "sent", webhookAttempts: 2, webhookLastError: null });
      expect(received).toHaveLength(2);
      expect(received[1]).toEqual({
        key: `outbox-${id}`,
        body: { id, kind: "ORDER_CREATED", recipient: "buyer@example.com", payload: { orderId: 42, totalAmount: 19.99 }, createdAt: expect.stringMatching(/Z$/) },
      });
      expect(received[0]).toEqual(received[1]);
    } finally {
      receiver.stop(true);
      await own.close();
    }
  });

  test("two senders sharing one database deliver each row exactly once", async () => {
    const own = await makeTestApp();
    const seen = new Map<number, number>();
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const { id } = (await request.json()) as { id: number };
        seen.set(id, (seen.get(id) ?? 0) + 1);
        return new Response(null, { status: 204 });
      },
    });
    try {
      for (let i = 0; i < 50; i++) await enqueueNotification(own.db, "ORDER_CREATED", `n${i}@example.com`, { orderId: i }, new Date());
      const logger = createLogging("silent", "json").get("outbox");
      const channels = [webhookChannel({ url: `http://127.0.0.1:${receiver.port}/`, timeoutMs: 5000, logger, now: Date.now })];
      const options = { db: own.database, logger, channels, pollIntervalMs: 10, batchSize: 7 };
      const senders = [startOutboxSender(options), startOutboxSender(options)];
      for (let i = 0; i < 250 && (await own.db.$count(outbox, isNull(outbox.webhookSentAt))) > 0; i++) await Bun.sleep(20);
      await Promise.all(senders.map((s) => s.stop()));
      expect(seen.size).toBe(50);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      receiver.stop(true);
      await own.close();
    }
  });

  test("two senders resolving one password-reset request: the later one, which read it before the first resolved it, leaves it alone (one token, one delivery)", async () => {
    const own = await makeTestApp();
    const user = await own.createUser();
    const seen: number[] = [];
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        seen.push(((await request.json()) as { id: number }).id);
        return new Response(null, { status: 204 });
      },
    });
    try {
      await enqueueNotification(own.db, "PASSWORD_RESET", user.email, {}, new Date(), { resolve: true });
      const [{ id }] = await own.db.select({ id: outbox.id }).from(outbox).where(eq(outbox.kind, "PASSWORD_RESET"));
      const logger = createLogging("silent", "json").get("outbox");
      const channels = [webhookChannel({ url: `http://127.0.0.1:${receiver.port}/`, timeoutMs: 5000, logger, now: Date.now })];
      // The interleaving of two instances on a loaded machine, made certain: both read the row
      // while it is resolving; the first resolves and delivers it; only then does the second write.
      const { promise: secondRead, resolve: readBySecond } = Promise.withResolvers<void>();
      const gated = (before: () => Promise<void>): Database =>
        new Proxy(own.database, {
          get(target, name) {
            if (name === "write") {
              return async (work: Parameters<Database["write"]>[0]) => {
                await before();
                return target.write(work);
              };
            }
            const value = Reflect.get(target, name, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
      const first = startOutboxSender({ db: gated(() => secondRead), logger, channels, pollIntervalMs: 20 });
      const second = startOutboxSender({
        db: gated(async () => {
          readBySecond();
          await until(id, (r) => r.webhookStatus === "sent", own.db);
        }),
        logger,
        channels,
        pollIntervalMs: 20,
      });
      await until(id, (r) => r.webhookStatus === "sent", own.db);
      await Bun.sleep(500); // the second's write, and any delivery it would cause
      await Promise.all([first.stop(), second.stop()]);
      expect(seen).toEqual([id]);
      const [row] = await own.db.select().from(outbox).where(eq(outbox.id, id));
      expect(row).toMatchObject({ webhookStatus: "sent", webhookAttempts: 1 });
    } finally {
      receiver.stop(true);
      await own.close();
    }
  });

  test("a receiver that does not answer in time counts as a failure", async () => {
    const own = await makeTestApp();
    const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Bun.sleep(2000).then(() => new Response("late")) });
    try {
      await enqueueNotification(own.db, "WELCOME", "slow@example.com", { userId: 1 }, new Date());
      const logger = createLogging("silent", "json").get("outbox");
      const channels = [webhookChannel({ url: `http://127.0.0.1:${receiver.port}/`, timeoutMs: 100, logger, now: Date.now })];
      const sender = startOutboxSender({ db: own.database, logger, channels, pollIntervalMs: 20, baseDelayMs: 10_000 });
      const [{ id }] = await own.db.select({ id: outbox.id }).from(outbox);
      const row = await until(id, (r) => r.webhookAttempts === 1, own.db);
      await sender.stop();
      expect(row.webhookSentAt).toBeNull();
      expect(row.webhookLastError).toMatch(/time|abort/i);
    } finally {
      receiver.stop(true);
      await own.close();
    }
  });

  test('with no URL each notification is logged by the "outbox" logger by id and kind only, and marked sent', async () => {
    const own = await makeTestApp();
    const lines: string[] = [];
    const logging = createLogging("info", "json", { write: (line: string) => void lines.push(line) });
    try {
      await enqueueNotification(own.db, "PAYMENT_SUCCESS", "payer@example.com", { orderId: 7, paymentId: "PAY-1" }, new Date());
      const logger = logging.get("outbox");
      const sender = startOutboxSender({ db: own.database, logger, channels: [webhookChannel({ timeoutMs: 5000, logger, now: Date.now })], pollIntervalMs: 20 });
      const [{ id }] = await own.db.select({ id: outbox.id }).from(outbox);
      const row = await until(id, (r) => r.webhookSentAt !== null, own.db);
      await sender.stop();
      expect(row).toMatchObject({ webhookStatus: "sent", webhookAttempts: 1 });
      const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "notification");
      expect(logged).toHaveLength(1);
      expect(logged[0]).toMatchObject({ logger: "outbox", level: "info", outboxId: id, kind: "PAYMENT_SUCCESS" });
      // Personal data stays out of the log: no address, no payload.
      expect(lines.join("\n")).not.toContain("payer@example.com");
      expect(lines.join("\n")).not.toContain("PAY-1");
    } finally {
      await own.close();
    }
  });
});
