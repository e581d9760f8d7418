/**
 * A remote primary that goes away and comes back (decisions.md, "Many instances"): while it is
 * gone, requests that need it answer 503 SERVICE_UNAVAILABLE with Retry-After (never a 500),
 * readiness is DOWN and liveness UP; once it is back on the same file, both recover by themselves.
 * The app talks to the test kit's Hrana server over HTTP whatever the leg (the multi-instance
 * suite, npm run test:multi, does the same to three binaries behind nginx, mid-burst).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { classifyDatabaseError } from "../src/db/errors";
import { makeTestApp, type TestApp } from "./helpers";
import { freePort } from "./server-process";
import { startHranaServer, type HranaServer } from "./support/hrana";

const dir = mkdtempSync(join(tmpdir(), "usersvc-outage-"));
const port = freePort();
const file = join(dir, "primary.db");
let primary: HranaServer;
let t: TestApp;
let token: string;

beforeAll(async () => {
  primary = await startHranaServer({ port, file });
  t = await makeTestApp({ DATABASE_URL: primary.url, DATABASE_BUSY_TIMEOUT_MS: "1000" });
  token = (await t.admin()).token;
});
afterAll(async () => {
  t.close();
  await primary.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("primary killed: 503 SERVICE_UNAVAILABLE with Retry-After, readiness DOWN, liveness UP; back on its file: all recover", async () => {
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  await primary.kill();

  const read = await t.request("GET", "/api/users/1", { token });
  expect(read.status).toBe(503);
  expect(read.body).toMatchObject({ success: false, errorCode: "SERVICE_UNAVAILABLE" });
  expect(read.headers.get("retry-after")).toMatch(/^\d+$/);
  const write = await t.request("POST", "/api/users", { token, body: { name: "Not Now", email: "not-now@example.com" } });
  expect(write.status).toBe(503);
  const login = await t.request("POST", "/api/auth/login", { body: { email: "nobody@example.com", password: "Passw0rd!" } });
  expect(login.status).toBe(503);
  expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 503, body: { status: "DOWN" } });
  expect(await t.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
  expect((await t.request("GET", "/actuator/health")).status).toBe(503);

  primary = await startHranaServer({ port, file });
  expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 200, body: { status: "UP" } });
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  const again = await t.request("POST", "/api/users", { token, body: { name: "Now Then", email: "not-now@example.com" } });
  expect(again.status).toBe(201);
}, 30_000);

test.each([
  ["a refused connection", Object.assign(new TypeError("Unable to connect"), { code: "ECONNREFUSED" })],
  ["a connection reset mid-answer", Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })],
  ["a proxy's 5xx (@libsql/client SERVER_ERROR)", { code: "SERVER_ERROR", message: "SERVER_ERROR: Server returned HTTP status 502" }],
  ["a stream the restarted server forgot", { code: "STREAM_EXPIRED", message: "STREAM_EXPIRED: Unknown or expired baton" }],
  ["drizzle's wrapper around one", { message: "Failed query: select 1", cause: Object.assign(new TypeError("Unable to connect"), { code: "ConnectionRefused" }) }],
])("%s is unreachable (503, never retried: a lost answer may hide a commit)", (_, error) => {
  expect(classifyDatabaseError(error)).toBe("unreachable");
});
