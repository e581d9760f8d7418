/**
 * A remote primary that goes away and comes back (docs/many-instances.md, "Running several instances"): while it is
 * gone, requests that need it answer 503 SERVICE_UNAVAILABLE with Retry-After (never a 500),
 * readiness is DOWN and liveness UP; once it is back, both recover by themselves. The app talks
 * to sqld over HTTP whatever the leg, through the test kit's proxy, which plays the faults (the
 * multi-instance suite, npm run test:multi, kills sqld itself under three binaries behind nginx).
 * An embedded replica without its primary keeps reading from its copy, and refuses writes alike.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { classifyDatabaseError } from "../src/db/errors";
import { makeTestApp, type TestApp } from "./helpers";
import { startSqld, type Sqld } from "./support/sqld";

let primary: Sqld;
let t: TestApp;
let token: string;

beforeAll(async () => {
  primary = await startSqld();
  t = await makeTestApp({ DATABASE_URL: primary.url, DATABASE_AUTH_TOKEN: primary.authToken, DATABASE_BUSY_TIMEOUT_MS: "1000" });
  token = (await t.admin()).token;
});
afterAll(async () => {
  t.close();
  await primary.stop();
});

test("primary vanished (connections refused, open ones dropped): 503 SERVICE_UNAVAILABLE with Retry-After, readiness DOWN, liveness UP; back: all recover", async () => {
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  await primary.vanish();

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

  await primary.restore();
  expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 200, body: { status: "UP" } });
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  const again = await t.request("POST", "/api/users", { token, body: { name: "Now Then", email: "not-now@example.com" } });
  expect(again.status).toBe(201);
}, 30_000);

test("primary hung (it takes the connection, never answers): 503 with Retry-After within DATABASE_BUSY_TIMEOUT_MS, never a hang; resumed: all recover", async () => {
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  await primary.hang();
  try {
    // Without a deadline of its own, @libsql/client's fetch waits for the answer forever: the
    // race's 15 s (fifteen busy timeouts) names that hang instead of the test's timeout.
    const timed = async (what: string, request: () => Promise<{ status: number; body: unknown; headers: Headers }>) => {
      const started = performance.now();
      const hung = Bun.sleep(15_000).then(() => ({ status: 0, body: `${what}: no answer in 15 s`, headers: new Headers() }));
      const res = await Promise.race([request(), hung]);
      return { ...res, ms: performance.now() - started };
    };
    const answers = [
      await timed("read", () => t.request("GET", "/api/users/1", { token })),
      await timed("write", () => t.request("POST", "/api/users", { token, body: { name: "Hung Then", email: "hung-then@example.com" } })),
      await timed("login", () => t.request("POST", "/api/auth/login", { body: { email: "nobody@example.com", password: "Passw0rd!" } })),
    ];
    for (const a of answers) {
      expect({ status: a.status, body: a.body }).toMatchObject({ status: 503, body: { success: false, errorCode: "SERVICE_UNAVAILABLE" } });
      expect(a.headers.get("retry-after")).toMatch(/^\d+$/);
      // The busy timeout (1000 ms) bounds the wait for the primary; the rest is a loaded machine's slack.
      expect(a.ms).toBeLessThan(1000 + 4000);
    }
    expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 503, body: { status: "DOWN" } });
    expect(await t.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
  } finally {
    await primary.restore();
  }
  expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 200, body: { status: "UP" } });
  expect((await t.request("GET", "/api/users/1", { token })).status).toBe(200);
  // The write that timed out may have committed once the primary woke (an unknown outcome, never retried): a new e-mail.
  expect((await t.request("POST", "/api/users", { token, body: { name: "Awake Now", email: "awake-now@example.com" } })).status).toBe(201);
}, 60_000);

describe("an embedded replica without its primary (vanished, then hung)", () => {
  let edgePrimary: Sqld;
  let edge: TestApp;
  let edgeToken: string;
  let edgeUser: number;
  beforeAll(async () => {
    edgePrimary = await startSqld();
    const dir = mkdtempSync(join(tmpdir(), "usersvc-outage-replica-"));
    edge = await makeTestApp({
      DATABASE_URL: `file:${dir}/usersvc.db`,
      DATABASE_SYNC_URL: edgePrimary.url,
      DATABASE_AUTH_TOKEN: edgePrimary.authToken,
      DATABASE_BUSY_TIMEOUT_MS: "1000",
    });
    ({ id: edgeUser, token: edgeToken } = await edge.admin());
  });
  afterAll(async () => {
    edge.close();
    await edgePrimary.stop();
  });

  test.each(["vanish", "hang"] as const)(
    "%s: reads answer from the copy, a write 503 with Retry-After within DATABASE_BUSY_TIMEOUT_MS; back: writes resume, nothing acknowledged lost",
    async (fault) => {
      const kept = await edge.request("POST", "/api/users", { token: edgeToken, body: { name: "Before The Fault", email: `before-${fault}@example.com` } });
      expect(kept.status).toBe(201);
      await edgePrimary[fault]();
      try {
        for (const path of [`/api/users/${edgeUser}`, `/api/users/${kept.body.id}`, "/api/users?page=0&size=5"]) {
          expect({ path, status: (await edge.request("GET", path, { token: edgeToken })).status }).toEqual({ path, status: 200 });
        }
        const started = performance.now();
        const write = await edge.request("POST", "/api/users", { token: edgeToken, body: { name: "During The Fault", email: `during-${fault}@example.com` } });
        expect({ status: write.status, body: write.body }).toMatchObject({ status: 503, body: { success: false, errorCode: "SERVICE_UNAVAILABLE" } });
        expect(write.headers.get("retry-after")).toMatch(/^\d+$/);
        // The busy timeout (1000 ms) bounds the wait for the primary; the rest is a loaded machine's slack.
        expect(performance.now() - started).toBeLessThan(1000 + 4000);
        expect(await edge.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
      } finally {
        await edgePrimary.restore();
      }
      const after = await edge.request("POST", "/api/users", { token: edgeToken, body: { name: "After The Fault", email: `after-${fault}@example.com` } });
      expect(after.status).toBe(201);
      expect((await edge.request("GET", `/api/users/${after.body.id}`, { token: edgeToken })).status).toBe(200);
      const primaryClient = createClient({ url: edgePrimary.url, authToken: edgePrimary.authToken });
      try {
        const { rows } = await primaryClient.execute({
          sql: "SELECT count(*) AS n FROM users WHERE email IN (?, ?)",
          args: [`before-${fault}@example.com`, `after-${fault}@example.com`],
        });
        expect(Number(rows[0].n)).toBe(2);
      } finally {
        primaryClient.close();
      }
    },
    60_000,
  );
});

test.each([
  ["a refused connection", Object.assign(new TypeError("Unable to connect"), { code: "ECONNREFUSED" })],
  ["a connection reset mid-answer", Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })],
  ["a proxy's 5xx (@libsql/client SERVER_ERROR)", { code: "SERVER_ERROR", message: "SERVER_ERROR: Server returned HTTP status 502" }],
  ["a round trip past its deadline (a hung primary, AbortSignal.timeout)", new DOMException("The operation timed out.", "TimeoutError")],
  ["a stream the restarted server forgot", { code: "STREAM_EXPIRED", message: "STREAM_EXPIRED: Unknown or expired baton" }],
  ["drizzle's wrapper around one", { message: "Failed query: select 1", cause: Object.assign(new TypeError("Unable to connect"), { code: "ConnectionRefused" }) }],
])("%s is unreachable (503, never retried: a lost answer may hide a commit)", (_, error) => {
  expect(classifyDatabaseError(error)).toBe("unreachable");
});

describe("an embedded replica past DATABASE_MAX_STALENESS (vanished, then hung)", () => {
  let stalePrimary: Sqld;
  let edge: TestApp;
  let token: string;
  let userId: number;
  const METRICS_TOKEN = "scrape-".padEnd(40, "m");
  beforeAll(async () => {
    stalePrimary = await startSqld();
    const dir = mkdtempSync(join(tmpdir(), "usersvc-stale-replica-"));
    edge = await makeTestApp({
      DATABASE_URL: `file:${dir}/usersvc.db`,
      DATABASE_SYNC_URL: stalePrimary.url,
      DATABASE_AUTH_TOKEN: stalePrimary.authToken,
      DATABASE_BUSY_TIMEOUT_MS: "500",
      DATABASE_SYNC_INTERVAL: "200ms",
      DATABASE_MAX_STALENESS: "3s",
      METRICS_TOKEN,
    });
    ({ id: userId, token } = await edge.admin());
  });
  afterAll(async () => {
    edge.close();
    await stalePrimary.stop();
  });
  const scrape = async () => (await edge.request("GET", "/actuator/prometheus", { token: METRICS_TOKEN })).text;
  /** Asks until `done` (every 100 ms, at most `ms`), and answers the last answer. */
  async function until<T>(ask: () => Promise<T>, done: (answer: T) => boolean, ms: number): Promise<T> {
    const end = performance.now() + ms;
    let answer = await ask();
    while (!done(answer) && performance.now() < end) {
      await Bun.sleep(100);
      answer = await ask();
    }
    return answer;
  }

  test.each(["vanish", "hang"] as const)(
    "%s: reads from the copy within the bound, health shows the primary DOWN and the staleness; past it 503 with Retry-After for every authenticated request, readiness DOWN; back: all recover",
    async (fault) => {
      const health = await until(
        () => edge.request("GET", "/actuator/health", { token }),
        (answer) => answer.body.components?.primary?.status === "UP",
        2000,
      );
      expect(health.body.components.primary).toMatchObject({ status: "UP" });
      expect(health.body.components.primary.details.stalenessMs).toBeLessThan(3000);
      expect(await scrape()).toMatch(/^usersvc_primary_up 1$/m);
      await stalePrimary[fault]();
      try {
        const down = await until(
          () => edge.request("GET", "/actuator/health", { token }),
          (answer) => answer.body.components?.primary?.status === "DOWN",
          2500,
        );
        // Within the bound: the copy still serves, and says how old it is.
        expect(down.status).toBe(503);
        expect(down.body.components.primary).toMatchObject({ status: "DOWN", details: { stalenessMs: expect.any(Number) } });
        expect((await edge.request("GET", `/api/users/${userId}`, { token })).status).toBe(200);
        expect(await scrape()).toMatch(/^usersvc_primary_up 0$/m);
        // A miss cannot be read again at the primary now: 503, not a 401 that would make a client drop its key.
        const unknownKey = await edge.request("GET", `/api/users/${userId}`, { token: "usk_nosuchk1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
        expect({ status: unknownKey.status, retryAfter: unknownKey.headers.get("retry-after") }).toMatchObject({ status: 503, retryAfter: expect.stringMatching(/^\d+$/) });

        const refused = await until(
          () => edge.request("GET", `/api/users/${userId}`, { token }),
          (answer) => answer.status !== 200,
          6000,
        );
        expect({ status: refused.status, body: refused.body }).toMatchObject({ status: 503, body: { success: false, errorCode: "SERVICE_UNAVAILABLE" } });
        expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
        expect(Number((await scrape()).match(/^usersvc_replica_staleness_seconds (\S+)$/m)?.[1])).toBeGreaterThan(3);
        expect(await edge.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 503, body: { status: "DOWN" } });
        expect(await edge.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
        // Health stays up to be asked (without details: a bearer is not trusted now).
        expect((await edge.request("GET", "/actuator/health", { token })).body.components.primary).toEqual({ status: "DOWN" });
      } finally {
        await stalePrimary.restore();
      }
      const back = await until(
        () => edge.request("GET", `/api/users/${userId}`, { token }),
        (answer) => answer.status === 200,
        5000,
      );
      expect(back.status).toBe(200);
      expect(await edge.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 200, body: { status: "UP" } });
      expect(await scrape()).toMatch(/^usersvc_primary_up 1$/m);
    },
    60_000,
  );
});
