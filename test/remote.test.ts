/**
 * A remote primary (sqld over Hrana): round trips per request, counted by the test kit's proxy in
 * front of it (over HTTP); the concurrency cases with really contending streams; the busy retry
 * with the lock held by another stream. These run on the sqld legs (test/legs.ts; a replica's units run at its primary). The error
 * table runs on every leg.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import type { Database } from "../src/db/database";
import { classifyDatabaseError, DatabaseBusyError, isUnavailable } from "../src/db/errors";
import { orders, products, roles, users } from "../src/db/schema";
import { countingGateway, holdDatabaseLock, makeTestApp, validRegistration, type TestApp } from "./helpers";
import { leg, onSqld } from "./legs";

const GOOD_CARD = "4242424242424242";
/** The proxy counts Hrana requests over HTTP (a WebSocket's are frames of one connection). */
const countsRoundTrips = leg === "remote-http";

let t: TestApp;
const gateway = countingGateway();
beforeAll(async () => {
  // 50 concurrent registrations from the one test address: more than REGISTER_MAX_PER_IP allows (auth-register tests the limit).
  t = await makeTestApp({ DATABASE_BUSY_TIMEOUT_MS: "3000", REGISTER_MAX_PER_IP: "1000" }, { paymentGateway: gateway.gateway });
});
afterAll(() => t.close());

const holdLock = () => holdDatabaseLock(t.config);
/** `work`, run while another stream holds the primary's write lock (released however it ends). */
async function whileLocked<T>(work: () => Promise<T>): Promise<T> {
  const lock = await holdLock();
  try {
    return await work();
  } finally {
    await lock.release();
  }
}
/** What `unit` failed with, or undefined. */
const failureOf = (unit: (db: Database) => Promise<unknown>) =>
  unit(t.database).then(
    () => undefined,
    (error) => error as unknown,
  );

describe("the error table, on this leg's driver", () => {
  const now = new Date();
  test.each([
    ["a unique index", "duplicate", (db: Database) => db.writeAll((tx) => [tx.insert(roles).values({ name: "USER" })])],
    ["a primary key", "duplicate", (db: Database) => db.writeAll((tx) => [tx.insert(roles).values({ id: 1, name: "ANOTHER" })])],
    [
      "a foreign key",
      "foreignKey",
      (db: Database) => db.writeAll((tx) => [tx.insert(orders).values({ userId: 987654, status: "PENDING", totalCents: 1, createdAt: now, updatedAt: now })]),
    ],
    [
      "a CHECK",
      "other",
      (db: Database) =>
        db.writeAll((tx) => [tx.insert(products).values({ name: "P", code: "NEGATIVE", priceCents: 100, stock: -1, status: "ACTIVE", createdAt: now, updatedAt: now })]),
    ],
    ["NOT NULL", "other", (db: Database) => db.write(async (tx) => tx.insert(users).values({ name: "N", email: null as never, createdAt: now, updatedAt: now }))],
  ] as const)("%s is %s", async (_, kind, unit) => {
    expect(classifyDatabaseError(await failureOf(unit))).toBe(kind);
  });

  // sqld never answers SQLITE_BUSY: it waits for the lock itself (until its own 5 s transaction
  // timeout ends the holder), so there the round trip's deadline ends the wait, which the client
  // cannot tell from a hung primary. Both answer 503 with Retry-After.
  // Not over a WebSocket: it has no deadline per round trip (only fetch takes one, libsql.ts), so
  // there the write waits until sqld's transaction timeout ends the holder, and goes through.
  test.skipIf(leg === "remote-ws")(
    "a lock held past DATABASE_BUSY_TIMEOUT_MS is busy on a file (DatabaseBusyError), past the round trip's deadline on sqld: 503 either way",
    async () => {
      const error = await whileLocked(() => failureOf((db) => db.writeAll((tx) => [tx.insert(roles).values({ name: "LOCKED" })])));
      if (onSqld) expect(classifyDatabaseError(error)).toBe("unreachable");
      else {
        expect(error).toBeInstanceOf(DatabaseBusyError);
        expect(classifyDatabaseError(error)).toBe("busy");
      }
      expect(isUnavailable(error)).toBe(true);
    },
    20_000,
  );
});

// On the file legs these report skipped: they run on the sqld legs (a replica's units run at its primary).
describe.skipIf(!onSqld)("a remote primary", () => {
  let admin: Awaited<ReturnType<TestApp["admin"]>>;
  beforeAll(async () => {
    admin = await t.admin();
  });

  const product = async (stock: number) =>
    (
      await t.request("POST", "/api/products", {
        token: admin.token,
        body: { name: `P ${crypto.randomUUID().slice(0, 6)}`, code: `R-${crypto.randomUUID().slice(0, 8)}`, price: 10, stock },
      })
    ).body;

  describe("round trips per request, counted at the server", () => {
    const roundTripsOf = async (request: () => Promise<{ status: number }>, expected: number) => {
      await t.primary!.reset();
      const res = await request();
      const trips = await t.primary!.roundTrips();
      return { status: res.status, trips, expected };
    };
    test.if(countsRoundTrips)("GET user ≤ 2, list ≤ 2, search ≤ 2, login ≤ 2, a session token's profile ≤ 2, refresh ≤ 2, POST user ≤ 2, order ≤ 3, payment ≤ 3", async () => {
      const user = await t.createUser({ password: "Passw0rd!", name: "Ann Remote" });
      const p = await product(100);
      const rows: Record<string, { status: number; trips: number; expected: number }> = {};
      rows["GET /api/users/{id}"] = await roundTripsOf(() => t.request("GET", `/api/users/${user.id}`, { token: admin.token }), 2);
      rows["GET /api/users (list)"] = await roundTripsOf(() => t.request("GET", "/api/users?page=0&size=10", { token: admin.token }), 2);
      rows["GET /api/search/users?name=Ann"] = await roundTripsOf(() => t.request("GET", "/api/search/users?name=Ann", { token: admin.token }), 2);
      rows["POST /api/auth/login"] = await roundTripsOf(() => t.request("POST", "/api/auth/login", { body: { email: user.email, password: "Passw0rd!" } }), 2);
      const signedIn = (await t.request("POST", "/api/auth/login", { body: { email: user.email, password: "Passw0rd!" } })).body.data;
      // The guard's one read (the session with its user), then the profile's.
      rows["GET /api/search/profile (session token)"] = await roundTripsOf(() => t.request("GET", "/api/search/profile", { token: signedIn.token }), 2);
      rows["POST /api/auth/refresh {refreshToken}"] = await roundTripsOf(() => t.request("POST", "/api/auth/refresh", { body: { refreshToken: signedIn.refreshToken } }), 2);
      rows["POST /api/users"] = await roundTripsOf(
        () => t.request("POST", "/api/users", { token: admin.token, body: { name: "Rt User", email: `rt-${crypto.randomUUID().slice(0, 8)}@x.io`, department: "Sales" } }),
        2,
      );
      let orderId = 0;
      rows["POST /api/orders"] = await roundTripsOf(async () => {
        const res = await t.request("POST", "/api/orders", { token: user.token, body: { items: [{ productId: p.id, quantity: 1 }] } });
        orderId = res.body.id;
        return res;
      }, 3);
      rows["POST /api/orders/{id}/pay"] = await roundTripsOf(
        () => t.request("POST", `/api/orders/${orderId}/pay`, { token: user.token, body: { method: "CARD", cardNumber: GOOD_CARD } }),
        3,
      );
      console.log(
        `round trips:\n${Object.entries(rows)
          .map(([k, v]) => `  ${k}: ${v.trips} (target ≤ ${v.expected}, status ${v.status})`)
          .join("\n")}`,
      );
      for (const [name, row] of Object.entries(rows)) {
        expect({ name, status: row.status }).toEqual({ name, status: name.includes("POST /api/users") || name === "POST /api/orders" ? 201 : 200 });
        expect({ name, trips: row.trips <= row.expected }).toEqual({ name, trips: true });
      }
    });
  });

  // Bun's WebSocket client now and then refuses a well-formed frame of sqld's ("RSV2 and RSV3 must
  // be clear") and drops the connection; the proxy plays that here with a frame it must refuse.
  describe.if(leg === "remote-ws")("a frame the WebSocket client refuses (its connection dropped)", () => {
    test("a read is read again on a new connection: 200", async () => {
      const user = await t.createUser({ name: "Frame Reader" });
      await t.primary!.garbleNextFrame();
      expect((await t.request("GET", `/api/users/${user.id}`, { token: admin.token })).status).toBe(200);
    });

    // (Through the API the guard's read would meet the frame first, and be read again.)
    test("a write is not sent again (its answer lost, it may have committed): unavailable (503), and the next request goes through", async () => {
      const name = `FRAME_${crypto.randomUUID().slice(0, 8)}`;
      await t.primary!.garbleNextFrame();
      const error = await t.database
        .writeAll((tx) => [tx.insert(roles).values({ name })])
        .then(
          () => undefined,
          (e) => e,
        );
      expect(isUnavailable(error)).toBe(true);
      expect(await t.database.$count(roles, eq(roles.name, name))).toBeLessThanOrEqual(1);
      expect((await t.request("GET", "/api/users?page=0&size=1", { token: admin.token })).status).toBe(200);
    });
  });

  describe("under contention, exactly as on the embedded database", () => {
    test("50 concurrent registrations of one e-mail: one 201, forty-nine 409", async () => {
      const body = validRegistration(`race-${crypto.randomUUID().slice(0, 8)}@x.io`);
      const results = await Promise.all(Array.from({ length: 50 }, () => t.request("POST", "/api/auth/register", { body })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(49);
      expect(await t.database.$count(users, eq(users.email, body.email))).toBe(1);
    }, 30_000);

    test("20 concurrent orders against stock 5: exactly five succeed, stock ends at 0", async () => {
      const p = await product(5);
      const buyers = await Promise.all(Array.from({ length: 20 }, () => t.createUser()));
      const results = await Promise.all(buyers.map((b) => t.request("POST", "/api/orders", { token: b.token, body: { items: [{ productId: p.id, quantity: 1 }] } })));
      expect(results.filter((r) => r.status === 201)).toHaveLength(5);
      expect(results.filter((r) => r.status !== 201).map((r) => r.body.errorCode)).toEqual(Array(15).fill("INSUFFICIENT_INVENTORY"));
      const [{ stock }] = await t.database.select({ stock: products.stock }).from(products).where(eq(products.id, p.id));
      expect(stock).toBe(0);
    }, 30_000);

    test("10 concurrent payments of one order: one charge, one 200, nine 400 INVALID_ORDER_STATUS", async () => {
      const buyer = await t.createUser();
      const p = await product(3);
      const placed = (await t.request("POST", "/api/orders", { token: buyer.token, body: { items: [{ productId: p.id, quantity: 1 }] } })).body;
      const before = gateway.charges();
      const results = await Promise.all(
        Array.from({ length: 10 }, () => t.request("POST", `/api/orders/${placed.id}/pay`, { token: buyer.token, body: { method: "CARD", cardNumber: GOOD_CARD } })),
      );
      expect(gateway.charges() - before).toBe(1);
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      expect(results.filter((r) => r.status !== 200).map((r) => r.body.errorCode)).toEqual(Array(9).fill("INVALID_ORDER_STATUS"));
      const [order] = await t.database.select({ status: orders.status }).from(orders).where(eq(orders.id, placed.id));
      expect(order.status).toBe("PAID");
    }, 30_000);
  });

  describe("busy retry: the lock held by another stream", () => {
    test("held for 1 s: the request waits it out and succeeds", async () => {
      const lock = await holdLock();
      const email = `wait-${crypto.randomUUID().slice(0, 8)}@x.io`;
      setTimeout(() => void lock.release(), 1000);
      const res = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Patient", email } });
      expect(res.status).toBe(201);
      expect(await t.database.$count(users, eq(users.email, email))).toBe(1);
    }, 20_000);

    // Not over a WebSocket (no deadline per round trip there: see the error table above).
    test.skipIf(leg === "remote-ws")(
      "held past DATABASE_BUSY_TIMEOUT_MS: 503 envelope with Retry-After, nothing half-written",
      async () => {
        const email = `late-${crypto.randomUUID().slice(0, 8)}@x.io`;
        const res = await whileLocked(() => t.request("POST", "/api/users", { token: admin.token, body: { name: "Too Late", email } }));
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).toEqual(expect.stringMatching(/^\d+$/));
        expect(res.body).toMatchObject({ success: false, errorCode: "SERVICE_UNAVAILABLE" });
        expect(await t.database.$count(users, eq(users.email, email))).toBe(0);
      },
      20_000,
    );

    // A unit given up here is not given up at sqld: it waits there for the lock and commits once it
    // gets it. So a process sends a few units at a time (8, libsql.ts), and those whose turn comes
    // after DATABASE_BUSY_TIMEOUT_MS are never sent: their 503 means nothing was written, and the
    // primary never holds a long line of writers nobody waits for.
    /** A role of this name inserted in a list unit of its own: undefined, or what it failed with. */
    const insertRole = (name: string) => failureOf((db) => db.writeAll((tx) => [tx.insert(roles).values({ name })]));
    const queuedNames = (n: number) => Array.from({ length: n }, (_, i) => `QUEUED_${i}_${crypto.randomUUID().slice(0, 8)}`);
    /** How many of `names` were written, once anything still waiting at sqld has had time to commit. */
    const committedLater = async (names: string[]) => {
      await Bun.sleep(1500);
      const written = await Promise.all(names.map((name) => t.database.$count(roles, eq(roles.name, name))));
      return written.reduce((a, b) => a + b, 0);
    };

    test.skipIf(leg === "remote-ws")(
      "20 list units at once behind a lock held past DATABASE_BUSY_TIMEOUT_MS: twenty 503s, and at most the eight sent commit later at the primary",
      async () => {
        const names = queuedNames(20);
        const failures = await whileLocked(() => Promise.all(names.map(insertRole)));
        expect(failures.map((error) => isUnavailable(error))).toEqual(Array(20).fill(true));
        expect(await committedLater(names)).toBeLessThanOrEqual(8);
      },
      30_000,
    );

    // The eight ahead free their places at their own deadlines, a moment before the ninth's: it
    // would be sent with that moment left, answer 503 at once, and still commit later.
    test.skipIf(leg === "remote-ws")(
      "a unit whose turn comes with a sliver of DATABASE_BUSY_TIMEOUT_MS left is not sent: 503, and only the eight ahead of it commit later",
      async () => {
        const names = queuedNames(9);
        const failures = await whileLocked(async () => {
          const ahead = names.slice(0, 8).map(insertRole);
          await Bun.sleep(150);
          return Promise.all([...ahead, insertRole(names[8])]);
        });
        expect(failures.map((error) => isUnavailable(error))).toEqual(Array(9).fill(true));
        expect(await committedLater([names[8]])).toBe(0);
      },
      30_000,
    );

    // A unit that waited for its turn behind hung round trips (eight in flight) has that much less
    // left of its DATABASE_BUSY_TIMEOUT_MS: it answers within the busy timeout from its arrival, not twice that.
    test.skipIf(leg === "remote-ws")(
      "a unit queued behind a hung primary answers 503 within DATABASE_BUSY_TIMEOUT_MS of its arrival",
      async () => {
        await t.primary!.hang();
        try {
          const unitAt = async (afterMs: number) => {
            await Bun.sleep(afterMs);
            const started = performance.now();
            const error = await t.database
              .writeAll((tx) => [tx.insert(roles).values({ name: `HUNG_${crypto.randomUUID().slice(0, 8)}` })])
              .then(
                () => undefined,
                (e) => e,
              );
            return { unavailable: isUnavailable(error), ms: performance.now() - started };
          };
          const answers = await Promise.all([...Array.from({ length: 8 }, () => unitAt(0)), unitAt(300)]);
          expect(answers.map((a) => a.unavailable)).toEqual(Array(9).fill(true));
          const queued = answers[8];
          // 3000 ms is the busy timeout; the rest is a loaded machine's slack (twice it would be 5700).
          expect(queued.ms).toBeLessThan(3000 + 1500);
        } finally {
          await t.primary!.restore();
        }
      },
      30_000,
    );
  });
});
