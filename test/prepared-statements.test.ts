/**
 * No SQL is built per request on a hot path (issue 13, item 5). On the native driver a query
 * drizzle builds per call reaches bun:sqlite's query() on every call (which prepares it, or finds
 * it in its cache by the SQL text); a prepared statement reached it once, when it was prepared.
 * So after a first request of each shape, a second one of the same shape, with other values,
 * must not call query() at all. Counted on the real connection (a spy that calls through), on
 * the native leg only: the libsql driver prepares per transaction, and there is nothing to count.
 */
import { Database as Connection } from "bun:sqlite";
import { afterAll, beforeAll, expect, leg, spyOn, test } from "./legs";
import { makeTestApp, uniqueEmail, validRegistration, type TestApp } from "./helpers";

const native = leg === "native";
if (!native) console.warn(`prepared statements per request: SKIPPED on ${leg}, it counts bun:sqlite's preparations (the native driver)`);

let t: TestApp;
let admin: { id: number; email: string; token: string };
const PASSWORD = "Passw0rd!";
const GOOD_CARD = "4111111111111111";
const productIds: number[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  for (let i = 0; i < 2; i++) {
    const res = await t.request("POST", "/api/products", {
      token: admin.token,
      body: { name: `Widget ${i}`, code: `PREP-${i}-${crypto.randomUUID().slice(0, 6)}`, price: 9.5, stock: 100 },
    });
    productIds.push(res.body.id);
  }
});
afterAll(() => t?.close());

/** An order of `productId` by the admin, for the payment route. */
const order = async (productId: number) => (await t.request("POST", "/api/orders", { token: admin.token, body: { items: [{ productId, quantity: 1 }] } })).body.id as number;

type Sent = Promise<{ status: number }>;
/**
 * Each hot route as request `i` (0 prepares its statements, 1 must build none): its status, the
 * fixture it needs (made before anything is counted) and how it is sent.
 */
const routes: { name: string; status: number; fixture?: (i: number) => Promise<unknown>; send: (i: number, fixture: never) => Sent }[] = [
  { name: "GET /api/users/{id}", status: 200, fixture: () => t.createUser(), send: (_, user: { id: number }) => t.request("GET", `/api/users/${user.id}`, { token: admin.token }) },
  { name: "GET /api/users (every user)", status: 200, send: () => t.request("GET", "/api/users", { token: admin.token }) },
  { name: "GET /api/users (a page, sorted)", status: 200, send: (i) => t.request("GET", `/api/users?page=${i}&size=2&sort=name,desc`, { token: admin.token }) },
  {
    name: "POST /api/users",
    status: 201,
    send: () => t.request("POST", "/api/users", { token: admin.token, body: { name: "Prepared", email: uniqueEmail("prep"), department: "R&D" } }),
  },
  { name: "POST /api/auth/register", status: 201, send: () => t.request("POST", "/api/auth/register", { body: validRegistration(uniqueEmail("reg")) }) },
  {
    name: "POST /api/auth/login",
    status: 200,
    fixture: () => t.createUser({ password: PASSWORD }),
    send: (_, user: { email: string }) => t.request("POST", "/api/auth/login", { body: { email: user.email, password: PASSWORD } }),
  },
  {
    name: "POST /api/auth/login (a wrong password)",
    status: 401,
    fixture: () => t.createUser({ password: PASSWORD }),
    send: (_, user: { email: string }) => t.request("POST", "/api/auth/login", { body: { email: user.email, password: "Wr0ngpass!" } }),
  },
  {
    name: "POST /api/auth/login (after a failure, which it clears)",
    status: 200,
    fixture: async () => {
      const user = await t.createUser({ password: PASSWORD });
      await t.request("POST", "/api/auth/login", { body: { email: user.email, password: "Wr0ngpass!" } });
      return user;
    },
    send: (_, user: { email: string }) => t.request("POST", "/api/auth/login", { body: { email: user.email, password: PASSWORD } }),
  },
  { name: "POST /api/auth/logout", status: 200, fixture: () => t.createUser(), send: (_, user: { token: string }) => t.request("POST", "/api/auth/logout", { token: user.token }) },
  { name: "GET /api/products (every product)", status: 200, send: () => t.request("GET", "/api/products", { token: admin.token }) },
  { name: "GET /api/products (a page of a status)", status: 200, send: (i) => t.request("GET", `/api/products?page=${i}&size=1&status=ACTIVE`, { token: admin.token }) },
  { name: "POST /api/orders", status: 201, send: (i) => t.request("POST", "/api/orders", { token: admin.token, body: { items: [{ productId: productIds[i], quantity: 2 }] } }) },
  {
    name: "POST /api/orders/{id}/pay",
    status: 200,
    fixture: (i) => order(productIds[i]),
    send: (_, id: number) => t.request("POST", `/api/orders/${id}/pay`, { token: admin.token, body: { method: "CARD", cardNumber: GOOD_CARD } }),
  },
  { name: "GET /api/orders/{id}", status: 200, fixture: (i) => order(productIds[i]), send: (_, id: number) => t.request("GET", `/api/orders/${id}`, { token: admin.token }) },
  { name: "GET /api/orders (a page of a status)", status: 200, send: (i) => t.request("GET", `/api/orders?page=${i}&size=1&status=PENDING`, { token: admin.token }) },
  { name: "GET /api/audit", status: 200, send: (i) => t.request("GET", `/api/audit?page=${i}&size=3`, { token: admin.token }) },
  { name: "GET /api/files", status: 200, send: (i) => t.request("GET", `/api/files?page=${i}&size=3`, { token: admin.token }) },
];

for (const route of routes) {
  test.skipIf(!native)(`${route.name}: a second request of its shape builds no SQL`, async () => {
    expect((await route.send(0, (await route.fixture?.(0)) as never)).status).toBe(route.status);
    const fixture = (await route.fixture?.(1)) as never;
    const query = spyOn(Connection.prototype, "query");
    try {
      const answer = await route.send(1, fixture);
      expect(answer.status).toBe(route.status);
      expect(query.mock.calls.map(([text]) => text)).toEqual([]);
    } finally {
      query.mockRestore();
    }
  });
}
