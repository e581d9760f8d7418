/**
 * Two embedded replicas of one sqld behind a round-robin balancer (docs/edge.md): a miss on one
 * edge's copy is read again at the primary before it answers 401 or 404, so a client can register
 * at one edge and sign in at the next at once, or sign in at one and use the token at the next.
 * The edges pull only once an hour here: whatever the second edge knows, it learnt on the miss.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { startSqld, type Sqld } from "./support/sqld";

let primary: Sqld;
let first: TestApp;
let second: TestApp;

const edge = () =>
  makeTestApp({
    DATABASE_URL: `file:${mkdtempSync(join(tmpdir(), "usersvc-edge-"))}/usersvc.db`,
    DATABASE_SYNC_URL: primary.url,
    DATABASE_AUTH_TOKEN: primary.authToken,
    DATABASE_SYNC_INTERVAL: "1h",
    DATABASE_MAX_STALENESS: "2h",
  });

beforeAll(async () => {
  primary = await startSqld();
  first = await edge();
  second = await edge();
});
afterAll(async () => {
  first?.close();
  second?.close();
  await primary?.stop();
});

const credentials = (email: string) => ({ email, password: "Passw0rd!" });

test("registered at one edge, signed in at the next at once; that token used at the first at once", async () => {
  const email = uniqueEmail("edge");
  const registered = await first.request("POST", "/api/auth/register", { body: validRegistration(email) });
  expect(registered.status).toBe(201);
  const login = await second.request("POST", "/api/auth/login", { body: credentials(email) });
  expect(login.status).toBe(200);
  const token = login.body.data.token as string;
  const me = await first.request("GET", `/api/users/${registered.body.data.id}`, { token });
  expect({ status: me.status, email: me.body.email }).toEqual({ status: 200, email });
});

test("a token of a new session, a user made at one edge and an API key made there are known at the other at once", async () => {
  const admin = await first.createUser({ roles: ["USER", "ADMIN"], password: "Admin-Passw0rd!" });
  // Signed in just now at the first edge: an API key needs a recent sign-in.
  const adminToken = (await first.request("POST", "/api/auth/login", { body: { email: admin.email, password: "Admin-Passw0rd!" } })).body.data.token as string;
  const email = uniqueEmail("edge");
  const created = await first.request("POST", "/api/users", { token: adminToken, body: { name: "Edge Made", email } });
  expect(created.status).toBe(201);
  expect((await second.request("GET", `/api/users/${created.body.id}`, { token: adminToken })).status).toBe(200);

  const key = await first.request("POST", "/api/account/api-keys", { token: adminToken, body: { name: "edge key", scopes: ["users:read"] } });
  expect(key.status).toBe(201);
  expect((await second.request("GET", `/api/users/${created.body.id}`, { token: key.body.key })).status).toBe(200);
});

test("a real miss is still a miss: 401 for an unknown key, 404 for an unknown user", async () => {
  const { token } = await second.admin();
  expect((await second.request("GET", "/api/users/999999", { token })).status).toBe(404);
  expect((await second.request("GET", "/api/users/1", { token: "usk_nosuchk1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" })).status).toBe(401);
  expect((await second.request("POST", "/api/auth/login", { body: credentials(uniqueEmail("nobody")) })).status).toBe(401);
});
