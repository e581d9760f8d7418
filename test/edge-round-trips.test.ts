/**
 * What each main write costs a replica edge in requests to its primary (docs/edge.md, "What a write
 * costs"): counted by the test kit's proxy, not timed. A unit of work at the primary is one Hrana
 * request when it is one batch; the pull after it is two (Hello, then BatchLogEntries). So a write
 * the edge can do in one unit costs 3, and a read answered from the copy costs 0.
 * The edge pulls in the background only once an hour here, and its probe of the primary waits as
 * long: every request the proxy sees during a route is that route's.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { replicaEdge, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { startSqld, type Sqld } from "./support/sqld";

let primary: Sqld;
let edge: TestApp;
let other: TestApp;

const edgeOfPrimary = () => replicaEdge(primary, { DATABASE_SYNC_INTERVAL: "1h", DATABASE_MAX_STALENESS: "2h" });

beforeAll(async () => {
  primary = await startSqld();
  edge = await edgeOfPrimary();
  other = await edgeOfPrimary();
}, 60_000);
afterAll(async () => {
  edge?.close();
  other?.close();
  await primary?.stop();
}, 60_000);

interface Count {
  hrana: number;
  pulls: number;
  requests: number;
}

/** The requests `send` costs at the primary, once its answer has come and anything it left running has settled. */
async function counted<T>(send: () => Promise<T>): Promise<{ answer: T; count: Count }> {
  await primary.reset();
  const answer = await send();
  // A side write that leaves the request's path still counts: wait until nothing more arrives.
  let last = -1;
  for (;;) {
    await Bun.sleep(150);
    const now = (await primary.roundTrips()) + (await primary.pulls());
    if (now === last) break;
    last = now;
  }
  const hrana = await primary.roundTrips();
  const pulls = await primary.pulls();
  return { answer, count: { hrana, pulls, requests: hrana + 2 * pulls } };
}

/** The most requests each route may cost (a unit and its pull is 3). */
const BOUNDS: Record<string, number> = {
  "GET /api/users/{id}": 0,
  // The per-address limit counts at the primary before the password is hashed (a unit of its own,
  // which the copy need not pull), then the registration's unit and its pull.
  "POST /api/auth/register": 4,
  // The counters are read on the copy before the password is hashed; the session's unit confirms them
  // at the primary (its gate), so failures split across edges add up (test/replica-miss.test.ts).
  "POST /api/auth/login": 3,
  // The failure's unit (its gate inside) and its pull; an unknown e-mail takes the same path.
  "POST /api/auth/login (wrong password)": 3,
  "POST /api/auth/refresh": 3,
  "POST /api/auth/logout": 3,
  // The change, then USER_UPDATED in a unit of its own, each pulled: a notification that cannot be
  // queued never undoes the update (test/outbox.test.ts).
  "PATCH /api/users/{id}": 6,
  "POST /api/users": 3,
  "POST /api/orders": 3,
  // The current password is checked as a sign-in is: on the copy, confirmed by the change's unit.
  "POST /api/auth/change-password": 3,
  "POST /api/account/api-keys": 3,
};

test("each main write at a replica edge costs its primary at most its bound in requests (a unit and its pull: 3); a read costs none", async () => {
  const seen: Record<string, Count> = {};
  const measure = async <T extends { status: number }>(route: string, status: number, send: () => Promise<T>): Promise<T> => {
    const { answer, count } = await counted(send);
    expect({ route, status: answer.status, answer }).toMatchObject({ route, status });
    seen[route] = count;
    return answer;
  };
  const password = "Passw0rd!";
  const admin = await edge.createUser({ roles: ["USER", "ADMIN"], password: "Admin-Passw0rd!" });
  const signIn = async (email: string, secret: string) => (await edge.request("POST", "/api/auth/login", { body: { email, password: secret } })).body.data;
  const adminToken = (await signIn(admin.email, "Admin-Passw0rd!")).token as string;
  const product = await edge.request("POST", "/api/products", {
    token: adminToken,
    body: { name: "Edge item", code: `EDGE-${crypto.randomUUID().slice(0, 6)}`, price: 5, stock: 10 },
  });
  expect(product.status).toBe(201);
  // The session the admin's token names, and the product, are on the copy before anything is counted.
  await edge.request("GET", `/api/users/${admin.id}`, { token: adminToken });

  const email = uniqueEmail("edge");
  const registered = await measure("POST /api/auth/register", 201, () => edge.request("POST", "/api/auth/register", { body: validRegistration(email) }));
  const id = registered.body.data.id as number;
  await measure("POST /api/auth/login (wrong password)", 401, () => edge.request("POST", "/api/auth/login", { body: { email, password: "Wr0ng-Passw0rd!" } }));
  const login = await measure("POST /api/auth/login", 200, () => edge.request("POST", "/api/auth/login", { body: { email, password } }));
  const { token, refreshToken } = login.body.data as { token: string; refreshToken: string };
  await measure("GET /api/users/{id}", 200, () => edge.request("GET", `/api/users/${id}`, { token }));
  const refreshed = await measure("POST /api/auth/refresh", 200, () => edge.request("POST", "/api/auth/refresh", { token, body: { refreshToken } }));
  const current = refreshed.body.data.token as string;
  await measure("PATCH /api/users/{id}", 200, () => edge.request("PATCH", `/api/users/${id}`, { token: adminToken, body: { name: "Edge Renamed" } }));
  await measure("POST /api/users", 201, () =>
    edge.request("POST", "/api/users", { token: adminToken, body: { name: "Edge Made", email: uniqueEmail("made"), department: "Edge" } }),
  );
  await measure("POST /api/orders", 201, () => edge.request("POST", "/api/orders", { token: current, body: { items: [{ productId: product.body.id, quantity: 1 }] } }));
  await measure("POST /api/account/api-keys", 201, () => edge.request("POST", "/api/account/api-keys", { token: current, body: { name: "edge key", scopes: ["users:read"] } }));
  const changed = await measure("POST /api/auth/change-password", 200, () =>
    edge.request("POST", "/api/auth/change-password", { token: current, body: { currentPassword: password, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } }),
  );
  await measure("POST /api/auth/logout", 200, () => edge.request("POST", "/api/auth/logout", { token: changed.body.data.token }));

  console.log(
    [
      "route                                   requests  Hrana  pulls  bound",
      ...Object.entries(seen).map(
        ([route, c]) => `${route.padEnd(40)}${String(c.requests).padStart(8)}${String(c.hrana).padStart(7)}${String(c.pulls).padStart(7)}${String(BOUNDS[route]).padStart(7)}`,
      ),
    ].join("\n"),
  );
  const over = Object.entries(seen).flatMap(([route, c]) => (c.requests > BOUNDS[route] ? [`${route}: ${c.requests} > ${BOUNDS[route]}`] : []));
  expect(over).toEqual([]);
}, 60_000);

test("a change of a user made from a copy that lags another edge's change is judged at the primary", async () => {
  const { token } = await edge.admin();
  const made = await edge.request("POST", "/api/users", { token, body: { name: "Two Edges", email: uniqueEmail("two"), department: "First" } });
  expect(made.status).toBe(201);
  // The other edge's copy holds the user at version 0, then the first edge changes it.
  expect((await other.request("GET", `/api/users/${made.body.id}`, { token })).body.version).toBe(0);
  expect((await edge.request("PATCH", `/api/users/${made.body.id}`, { token, body: { name: "Renamed First" } })).body.version).toBe(1);

  // Without a version the last change wins, on top of the first edge's.
  const last = await other.request("PATCH", `/api/users/${made.body.id}`, { token, body: { department: "Second" } });
  expect(last.body).toMatchObject({ name: "Renamed First", department: "Second", version: 2 });
  // A version the copy did not know yet, but the primary does, is the current one; an old one is a conflict.
  const current = await edge.request("PATCH", `/api/users/${made.body.id}`, { token, body: { name: "At Version Two", version: 2 } });
  expect([current.status, current.body.version]).toEqual([200, 3]);
  const stale = await other.request("PATCH", `/api/users/${made.body.id}`, { token, body: { name: "Too Late", version: 2 } });
  expect([stale.status, stale.body.errorCode]).toEqual([409, "OPTIMISTIC_LOCK_CONFLICT"]);
}, 30_000);
