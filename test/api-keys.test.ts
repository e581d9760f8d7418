/**
 * API keys (issue 28): creating, listing and revoking one's own keys and, as ADMIN, anyone's; the
 * scope table (test/support/scope-table.ts: every route a key may call, refused without its scope,
 * answered with it; a client's token runs the same table in test/oauth-scopes.test.ts); the routes
 * that refuse keys; a key never exceeds its owner; what stops a key (deactivation, revocation,
 * expiry, a wrong secret); the rate limit per key; lastUsedAt; and that the key itself appears
 * nowhere but in the creation's answer.
 */
import { afterAll, beforeAll, describe, expect, leg, test } from "./legs";
import { desc, eq } from "drizzle-orm";
import { apiKeys, auditLog, outbox, users } from "../src/db/schema";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { renderMail } from "../src/features/notifications/templates";
import { KEY_PATTERN } from "../src/security/api-keys";
import { SCOPES } from "../src/security/caller";
import { makeTestApp, type TestApp, type TestResponse } from "./helpers";
import { prepareRouteWalk } from "./support/route-walk";
import { type NarrowedBearers, NOT_ALLOWED, SCOPE_TABLE, scopeTable, NO_SCOPE, sendSample } from "./support/scope-table";
import { DENIED, expectFailure, invalidBody, type Scenario, scenarios, UNAUTHORIZED } from "./scenario";

const PASSWORD = "Passw0rd!";

let t: TestApp;
let routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;
/** Keys of the walk's ADMIN: `all` holds every scope, `allBut[scope]` every scope but that one, `only[scope]` that one alone. */
const adminKeys: NarrowedBearers = { all: "", allBut: {}, only: {} };
/** A USER with every scope, and their signed-in token. */
let user: { id: number; email: string; token: string; key: string };
let other: { id: number; email: string; token: string };

async function signIn(email: string, app: TestApp = t, password = PASSWORD): Promise<string> {
  const res = await app.request("POST", "/api/auth/login", { body: { email, password } });
  expect(res.status).toBe(200);
  return res.body.data.token as string;
}

async function createKey(token: string, scopes: readonly string[], extra: Record<string, unknown> = {}, app: TestApp = t) {
  const res = await app.request("POST", "/api/account/api-keys", { token, body: { name: "script", scopes, ...extra } });
  expect(res.status).toBe(201);
  return res.body as { id: number; key: string; prefix: string };
}

beforeAll(async () => {
  t = await makeTestApp({ PUBLIC_URL: "https://id.example.test" });
  routeWalk = await prepareRouteWalk(t);
  const adminToken = await signIn(routeWalk.admin.email, t, "Admin-Passw0rd!");
  adminKeys.all = (await createKey(adminToken, SCOPES)).key;
  for (const scope of SCOPES) {
    adminKeys.allBut[scope] = (
      await createKey(
        adminToken,
        SCOPES.filter((s) => s !== scope),
      )
    ).key;
  }
  for (const scope of SCOPES) adminKeys.only[scope] = (await createKey(adminToken, [scope])).key;
  const created = await t.createUser({ password: PASSWORD });
  const token = await signIn(created.email);
  user = { ...created, token, key: (await createKey(token, SCOPES)).key };
  other = await t.createUser({ password: PASSWORD });
}, 60_000);
afterAll(() => t.close());

describe("the scope table", () => {
  test("covers every route that declares an area, and the OpenAPI document shows each scope", async () => {
    const declared = t.app.routes
      .map((r) => ({ route: `${r.method} ${r.path}`, security: (r.hooks as { detail?: { security?: Record<string, string[]>[] } }).detail?.security ?? [] }))
      .filter((r) => r.security.some((s) => s.apiKey));
    expect(declared.map((r) => r.route).sort()).toEqual(SCOPE_TABLE.map(([route]) => route).sort());
    const spec = (await t.request("GET", "/swagger/json")).body;
    for (const [route, scope] of SCOPE_TABLE) {
      const [method, path] = route.split(" ");
      const operation = spec.paths[path.replace(/:([^/]+)/g, "{$1}")][method.toLowerCase()];
      expect({ route, security: operation.security }).toEqual({ route, security: [{ bearerAuth: [] }, { apiKey: [scope] }] });
      expect(operation.responses["429"]).toBeDefined();
    }
    expect(spec.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer" });
  });

  scopeTable("a key", () => ({ t, routeWalk, bearers: adminKeys }));

  test("open routes answer as without a key (health without its ADMIN details)", async () => {
    for (const route of ["GET /actuator/health", "GET /actuator/health/liveness", "GET /actuator/info", "GET /api/version", "GET /", "GET /swagger/json"]) {
      const res = await sendSample({ t, routeWalk, bearers: adminKeys }, route, adminKeys.all);
      expect({ route, status: res.status }).toEqual({ route, status: 200 });
    }
    const health = await t.request("GET", "/actuator/health", { token: adminKeys.all });
    expect(health.body.components.db.details).toBeUndefined();
  });

  test("under BASE_PATH the same paths refuse a key, whatever their query, and the rest answer it", async () => {
    const app = await makeTestApp({ BASE_PATH: "/svc" });
    try {
      const owner = await app.createUser({ password: PASSWORD });
      const { key } = await createKey(await signIn(owner.email, app), SCOPES, {}, app);
      const refused = [
        app.request("POST", "/api/auth/login", { token: key, body: { email: owner.email, password: PASSWORD } }),
        app.request("GET", "/api/account/api-keys?page=0", { token: key }),
        app.request("GET", "/actuator/prometheus", { token: key }),
        app.request("GET", "/actuator/metrics/http.server.requests", { token: key }),
      ];
      for (const res of await Promise.all(refused)) expectFailure(res, 403, NOT_ALLOWED);
      for (const path of ["/actuator/health", "/actuator/health/liveness", "/actuator/info", `/api/users/${owner.id}`, `/api/users/${owner.id}?fields=all`]) {
        expect({ path, status: (await app.request("GET", path, { token: key })).status }).toEqual({ path, status: 200 });
      }
    } finally {
      await app.close();
    }
  });
});

/** The walk's request for `route` with `key`, as the app gets it: `host` as the Host header and, when given, `url` as Bun's request URL. */
function sampleRequest(route: string, key: string | undefined, { host, url }: { host?: string; url?: string } = {}): Request {
  const sample = routeWalk.samples[route];
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (host) headers.host = host;
  let body: RequestInit["body"] = sample.raw;
  if (sample.body !== undefined) {
    body = JSON.stringify(typeof sample.body === "function" ? sample.body() : sample.body);
    headers["content-type"] = "application/json";
  }
  const request = new Request(`http://localhost${sample.path}`, { method: route.slice(0, route.indexOf(" ")), headers, body });
  if (url !== undefined) Object.defineProperty(request, "url", { value: url });
  return request;
}

/** An answer's status and errorCode, read whole. */
async function verdictOf(response: Response) {
  const text = await response.text();
  return { status: response.status, code: (text.startsWith("{") ? JSON.parse(text).errorCode : undefined) as string | undefined };
}

// Issue 40 item 1: with `Host: a/b` Bun's request URL is a bare path, and the boundary read "/auth/refresh" for
// "/api/auth/refresh": a products:read key of an ADMIN refreshed into an unrestricted token.
describe("a key reaches its own scopes and nothing else, whatever the Host header", () => {
  test("with `Host: a/b` (Bun's URL then a bare path) every route answers 400 INVALID_HOST to a key of every scope", async () => {
    for (const scope of SCOPES) {
      for (const route of t.app.routes.map((r) => `${r.method} ${r.path}`)) {
        const answer = await verdictOf(await t.app.handle(sampleRequest(route, adminKeys.only[scope], { host: "a/b", url: routeWalk.samples[route].path })));
        expect({ route, scope, ...answer }).toEqual({ route, scope, status: 400, code: "INVALID_HOST" });
      }
    }
  });

  test("with a good Host a key of one scope gets a refusal on every route outside its scope, or an anonymous caller's answer", async () => {
    for (const scope of SCOPES) {
      const own = new Set(SCOPE_TABLE.filter(([, needs]) => needs === scope).map(([route]) => route));
      for (const route of t.app.routes.map((r) => `${r.method} ${r.path}`)) {
        if (own.has(route)) continue; // answered (the scope table above)
        const answer = await verdictOf(await t.app.handle(sampleRequest(route, adminKeys.only[scope])));
        if (answer.status === 403 && (answer.code === "API_KEY_NOT_ALLOWED" || answer.code === "INSUFFICIENT_SCOPE")) continue;
        // Anything else only where no caller is needed: a page, a document, health (GETs: sending one changes nothing).
        expect({ route, scope, method: route.split(" ")[0] }).toEqual({ route, scope, method: "GET" });
        const anonymous = await verdictOf(await t.app.handle(sampleRequest(route, undefined)));
        expect({ route, scope, ...answer }).toEqual({ route, scope, ...anonymous });
      }
    }
  });

  test("a short Host (`Host: a`) routes no key past the boundary: /xx/api/auth/refresh and /xx/actuator/prometheus are no routes", async () => {
    for (const path of ["/xx/api/auth/refresh", "/xx/actuator/prometheus"]) {
      const method = path.endsWith("refresh") ? "POST" : "GET";
      const answer = await verdictOf(await t.app.handle(new Request(`http://a${path}`, { method, headers: { authorization: `Bearer ${adminKeys.only["products:read"]}` } })));
      expect({ path, ...answer }).toEqual({ path, status: 404, code: "NOT_FOUND" });
    }
  });
});

describe("a key never exceeds its owner", () => {
  scenarios([
    {
      name: "a USER's key with every scope: POST /api/users (ADMIN only)",
      send: () => t.request("POST", "/api/users", { token: user.key, body: { name: "Not Allowed", email: "nope@example.com" } }),
      status: 403,
      failure: DENIED,
    },
    { name: "a USER's key with every scope: GET /actuator/metrics", send: () => t.request("GET", "/actuator/metrics", { token: user.key }), status: 403, failure: NOT_ALLOWED },
    {
      name: "a USER's key with every scope: GET /actuator/prometheus",
      send: () => t.request("GET", "/actuator/prometheus", { token: user.key }),
      status: 403,
      failure: NOT_ALLOWED,
    },
    {
      name: "a USER's key with every scope: GET /actuator/loggers",
      send: () => t.request("GET", "/actuator/loggers", { token: user.key }),
      status: 403,
      failure: NOT_ALLOWED,
    },
    {
      name: "a USER's key with every scope: another user's keys",
      send: () => t.request("GET", `/api/users/${other.id}/api-keys`, { token: user.key }),
      status: 403,
      failure: NOT_ALLOWED,
    },
    {
      name: "a key with operations:read cannot be made (no such scope)",
      send: () => t.request("POST", "/api/account/api-keys", { token: user.token, body: { name: "ops", scopes: ["operations:read"] } }),
      status: 400,
      failure: invalidBody([`scopes[0]: must be one of ${SCOPES.join(", ")}`]),
    },
  ]);

  test("a USER's key reads what the USER reads: their own profile, and 200 on GET /api/users/{id}", async () => {
    const profile = await t.request("GET", "/api/search/profile", { token: user.key });
    expect(profile.status).toBe(200);
    expect(profile.body.email).toBe(user.email);
    expect((await t.request("GET", `/api/users/${other.id}`, { token: user.key })).status).toBe(200);
  });

  // The guard reads the :id user in the key's own statement (readsUser), as for a session token.
  test("GET /api/users/{id} with a key: a session's answer, 404 for an unknown id, the scope and the secret still checked; one round trip", async () => {
    const bySession = await t.request("GET", `/api/users/${other.id}`, { token: user.token });
    const byKey = await t.request("GET", `/api/users/${other.id}`, { token: user.key });
    expect({ status: byKey.status, body: byKey.body, etag: byKey.headers.get("etag") }).toEqual({ status: 200, body: bySession.body, etag: bySession.headers.get("etag") });
    expectFailure(await t.request("GET", "/api/users/7777777", { token: user.key }), 404, { errorCode: "USER_NOT_FOUND" });
    expectFailure(await t.request("GET", `/api/users/${other.id}`, { token: adminKeys.allBut["users:read"] }), 403, NO_SCOPE);
    const tampered = user.key.slice(0, -1) + (user.key.endsWith("A") ? "B" : "A");
    expectUnauthorized(await t.request("GET", `/api/users/${other.id}`, { token: tampered }));
    // The test kit's proxy counts round trips to sqld over HTTP (remote.test.ts).
    if (leg !== "remote-http" || !t.primary) return;
    await t.primary.reset();
    expect((await t.request("GET", `/api/users/${other.id}`, { token: user.key })).status).toBe(200);
    expect(await t.primary.roundTrips()).toBe(1);
  });
});

/**
 * No key changes who holds power, whatever its scopes: roles, passwords, any account's e-mail,
 * activation, deletion, a new or promoted ADMIN. A request that would is refused whole (its other
 * fields are not applied); a key still changes names and departments.
 */
describe("no key changes who holds power", () => {
  /** Another ADMIN, whom the walk's ADMIN's key (every scope) tries to take over; and a plain USER. */
  let victim: { id: number; email: string };
  let plain: { id: number; email: string };
  beforeAll(async () => {
    victim = await t.createUser({ roles: ["USER", "ADMIN"], password: PASSWORD });
    plain = await t.createUser({ password: PASSWORD });
  });
  /** Everything the answer shows of the account, and its password hash. */
  const stateOf = async (id: number) => ({
    user: (await t.request("GET", `/api/users/${id}`, { token: routeWalk.admin.token })).body,
    hash: (await t.db.select({ hash: users.passwordHash }).from(users).where(eq(users.id, id)))[0]?.hash,
  });
  const bothUnchanged = async () => [await stateOf(victim.id), await stateOf(plain.id), await stateOf(user.id)];
  const byEmail = (email: string) => t.db.select({ id: users.id }).from(users).where(eq(users.email, email));
  const refused = (name: string, send: () => Promise<TestResponse>, unchanged: () => Promise<unknown> = bothUnchanged): Scenario => ({
    name,
    send,
    status: 403,
    failure: NOT_ALLOWED,
    unchanged,
  });
  /** Rows sent with the walk's ADMIN's key (every scope): name, method, path and body, made when the row runs. */
  const BY_ADMIN_KEY: [name: string, method: string, path: () => string, body?: () => unknown][] = [
    ["an ADMIN's key moves another ADMIN's e-mail (PATCH)", "PATCH", () => `/api/users/${victim.id}`, () => ({ email: "attacker@evil.example.com" })],
    ["an ADMIN's key moves another ADMIN's e-mail (PUT)", "PUT", () => `/api/users/${victim.id}`, () => ({ name: "Victim", email: "attacker@evil.example.com" })],
    ["a name and a password: neither applied", "PATCH", () => `/api/users/${victim.id}`, () => ({ name: "Renamed", password: "N3w-Passw0rd!" })],
    ["PUT with the same e-mail and a password", "PUT", () => `/api/users/${plain.id}`, () => ({ name: "Plain", email: plain.email, password: "N3w-Passw0rd!" })],
    ["a name and active: false", "PATCH", () => `/api/users/${victim.id}`, () => ({ name: "Renamed", active: false })],
    ["a name and roles (a demotion)", "PATCH", () => `/api/users/${victim.id}`, () => ({ name: "Renamed", roles: ["USER"] })],
    ["roles in a PATCH body (a promotion)", "PATCH", () => `/api/users/${plain.id}`, () => ({ roles: ["USER", "ADMIN"] })],
    ["PUT /api/users/{id}/roles (a promotion)", "PUT", () => `/api/users/${plain.id}/roles`, () => ({ roles: ["USER", "ADMIN"] })],
    ["PUT /api/users/{id}/roles (a demotion)", "PUT", () => `/api/users/${victim.id}/roles`, () => ({ roles: ["USER"] })],
    ["deactivating an ADMIN", "POST", () => `/api/users/${victim.id}/deactivate`],
    ["activating a user", "POST", () => `/api/users/${plain.id}/activate`],
    ["deleting a user", "DELETE", () => `/api/users/${plain.id}`],
    ["deactivating the inactive", "POST", () => "/api/users/deactivate-inactive?before=2100-01-01"],
  ];
  const created = (email: string, extra: object) => () => t.request("POST", "/api/users", { token: adminKeys.all, body: { name: "Made By Key", email, ...extra } });

  scenarios([
    ...BY_ADMIN_KEY.map(([name, method, path, body]) => refused(name, () => t.request(method, path(), { token: adminKeys.all, body: body?.() }))),
    refused("a USER's key moves their own e-mail, with their password", () =>
      t.request("PATCH", `/api/users/${user.id}`, { token: user.key, body: { email: "elsewhere@example.com", currentPassword: PASSWORD } }),
    ),
    refused("creating a user with a password", created("made-by-key@example.com", { password: PASSWORD }), () => byEmail("made-by-key@example.com")),
    refused("creating an ADMIN", created("admin-by-key@example.com", { roles: ["USER", "ADMIN"] }), () => byEmail("admin-by-key@example.com")),
  ]);

  test("a key still changes a name (PATCH) and replaces name and department with the same e-mail (PUT); revoking tokens takes power away, and stays", async () => {
    const patched = await t.request("PATCH", `/api/users/${plain.id}`, { token: adminKeys.all, body: { name: "Renamed By Key" } });
    expect({ status: patched.status, name: patched.body.name, email: patched.body.email }).toEqual({ status: 200, name: "Renamed By Key", email: plain.email });
    const put = await t.request("PUT", `/api/users/${plain.id}`, { token: adminKeys.all, body: { name: "Put By Key", email: plain.email.toUpperCase(), department: "Keys" } });
    expect({ status: put.status, name: put.body.name, email: put.body.email, department: put.body.department }).toEqual({
      status: 200,
      name: "Put By Key",
      email: plain.email,
      department: "Keys",
    });
    const own = await t.request("PATCH", `/api/users/${user.id}`, { token: user.key, body: { name: "Own Name" } });
    expect({ status: own.status, name: own.body.name }).toEqual({ status: 200, name: "Own Name" });
    expect((await t.request("POST", `/api/users/${plain.id}/revoke-tokens`, { token: adminKeys.all })).status).toBe(204);
  });

  test("the OpenAPI document shows no key on the routes that refuse one", async () => {
    const spec = (await t.request("GET", "/swagger/json")).body;
    for (const [path, method] of [
      ["/api/users/{id}", "delete"],
      ["/api/users/{id}/activate", "post"],
      ["/api/users/{id}/deactivate", "post"],
      ["/api/users/{id}/roles", "put"],
      ["/api/users/deactivate-inactive", "post"],
    ]) {
      expect({ path, method, security: spec.paths[path][method].security }).toEqual({ path, method, security: [{ bearerAuth: [] }] });
    }
  });
});

describe("creating, listing and revoking keys", () => {
  test("the key is shown once: usk_<prefix>_<43 base62>, stored as prefix + SHA-256; lists never show it", async () => {
    const created = await t.request("POST", "/api/account/api-keys", { token: user.token, body: { name: "nightly export", scopes: ["users:read", "orders:read"] } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(Number),
      name: "nightly export",
      prefix: expect.stringMatching(/^[0-9A-Za-z]{8}$/),
      scopes: ["users:read", "orders:read"],
      createdAt: expect.any(String),
      expiresAt: null,
      key: expect.stringMatching(/^usk_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}$/),
    });
    const { key, prefix, id } = created.body;
    expect(key.startsWith(`usk_${prefix}_`)).toBe(true);
    expect(KEY_PATTERN.test(`token=${key};`)).toBe(true);
    const [row] = await t.db.select().from(apiKeys).where(eq(apiKeys.id, id));
    const secret = key.split("_")[2];
    expect(row.secretHash).toBe(new Bun.CryptoHasher("sha256").update(secret).digest("base64url"));
    expect(JSON.stringify(row)).not.toContain(secret);
    const mine = await t.request("GET", "/api/account/api-keys", { token: user.token });
    expect(mine.status).toBe(200);
    expect(mine.body.find((k: { id: number }) => k.id === id)).toEqual({
      id,
      name: "nightly export",
      prefix,
      scopes: ["users:read", "orders:read"],
      createdAt: created.body.createdAt,
      expiresAt: null,
      lastUsedAt: null,
      lastUsedFrom: null,
    });
    const admin = await t.request("GET", `/api/users/${user.id}/api-keys`, { token: routeWalk.admin.token });
    expect(admin.body.map((k: { id: number }) => k.id)).toContain(id);
    for (const answer of [mine, admin]) expect(answer.text).not.toContain(secret);
  });

  test("creation is audited and mailed API_KEY_CREATED (en, zh-TW) without the key; revocation is audited", async () => {
    const { key, id, prefix } = await createKey(user.token, ["files:read"], { name: "audited" });
    const secret = key.split("_")[2];
    const [mail] = await t.db.select().from(outbox).where(eq(outbox.kind, "API_KEY_CREATED")).orderBy(desc(outbox.id)).limit(1);
    expect(mail.recipient).toBe(user.email);
    expect(mail.payload).toEqual({ userId: user.id, keyId: id, name: "audited", prefix, scopes: ["files:read"] });
    for (const lang of ["en", "zh-TW"] as const) {
      const rendered = renderMail({ kind: "API_KEY_CREATED", lang, name: "Ada", payload: mail.payload as Record<string, unknown> });
      expect(rendered.text).toContain(`usk_${prefix}_`);
      expect(JSON.stringify(rendered)).not.toContain(secret);
    }
    expect((await t.request("DELETE", `/api/account/api-keys/${id}`, { token: user.token })).status).toBe(204);
    const audit = (await t.db.select().from(auditLog)).filter((r) => (r.details as { keyId?: number } | null)?.keyId === id);
    expect(audit.map((r) => r.action)).toEqual(["API_KEY_CREATED", "API_KEY_REVOKED"]);
    expect(JSON.stringify(audit)).not.toContain(secret);
    expect(JSON.stringify(await t.db.select().from(outbox))).not.toContain(secret);
  });

  scenarios([
    {
      name: "revoking another user's key",
      send: async () => {
        const theirs = await createKey(await signIn(other.email), ["users:read"]);
        return t.request("DELETE", `/api/account/api-keys/${theirs.id}`, { token: user.token });
      },
      status: 404,
      failure: { message: "API key not found", errorCode: "API_KEY_NOT_FOUND" },
    },
    {
      name: "ADMIN revoking a key through the wrong user",
      send: async () => {
        const theirs = await createKey(await signIn(other.email), ["users:read"]);
        return t.request("DELETE", `/api/users/${user.id}/api-keys/${theirs.id}`, { token: routeWalk.admin.token });
      },
      status: 404,
      failure: { message: "API key not found", errorCode: "API_KEY_NOT_FOUND" },
    },
    {
      name: "ADMIN listing a missing user's keys",
      send: () => t.request("GET", "/api/users/999999/api-keys", { token: routeWalk.admin.token }),
      status: 404,
      failure: { errorCode: "USER_NOT_FOUND" },
    },
    {
      name: "an expiry in the past",
      send: () => t.request("POST", "/api/account/api-keys", { token: user.token, body: { name: "old", scopes: ["users:read"], expiresAt: "2020-01-01" } }),
      status: 400,
      failure: invalidBody(["expiresAt: must be in the future"]),
    },
    {
      name: "no scope",
      send: () => t.request("POST", "/api/account/api-keys", { token: user.token, body: { name: "none", scopes: [] } }),
      status: 400,
      failure: invalidBody(["scopes: must have at least 1 entries"]),
    },
    {
      name: "a blank name",
      send: () => t.request("POST", "/api/account/api-keys", { token: user.token, body: { name: "", scopes: ["users:read"] } }),
      status: 400,
      failure: invalidBody(["name: must be at least 1 characters"]),
    },
    {
      name: "anonymous creation",
      send: () => t.request("POST", "/api/account/api-keys", { body: { name: "x", scopes: ["users:read"] } }),
      status: 401,
      failure: UNAUTHORIZED,
    },
  ]);

  test("API_KEY_MAX_PER_USER: the next key is refused 409 until one is revoked", async () => {
    const app = await makeTestApp({ API_KEY_MAX_PER_USER: "2" });
    try {
      const owner = await app.createUser({ password: PASSWORD });
      const token = await signIn(owner.email, app);
      const first = await createKey(token, ["users:read"], {}, app);
      await createKey(token, ["users:read"], {}, app);
      const third = await app.request("POST", "/api/account/api-keys", { token, body: { name: "third", scopes: ["users:read"] } });
      expect(third.status).toBe(409);
      expect(third.body).toMatchObject({ errorCode: "TOO_MANY_API_KEYS", message: "At most 2 API keys per user: revoke one first" });
      expect((await app.request("DELETE", `/api/account/api-keys/${first.id}`, { token })).status).toBe(204);
      await createKey(token, ["users:read"], {}, app);
    } finally {
      await app.close();
    }
  });
});

describe("what stops a key", () => {
  const profileWith = (key: string) => t.request("GET", "/api/search/profile", { token: key });

  test("revoked (by the owner or an ADMIN): 401 on the next request", async () => {
    const own = await createKey(user.token, ["users:read"]);
    const byAdmin = await createKey(user.token, ["users:read"]);
    expect((await profileWith(own.key)).status).toBe(200);
    expect((await profileWith(byAdmin.key)).status).toBe(200);
    expect((await t.request("DELETE", `/api/account/api-keys/${own.id}`, { token: user.token })).status).toBe(204);
    expect((await t.request("DELETE", `/api/users/${user.id}/api-keys/${byAdmin.id}`, { token: routeWalk.admin.token })).status).toBe(204);
    for (const key of [own.key, byAdmin.key]) expectUnauthorized(await profileWith(key));
  });

  test("the owner deactivated: 401 on the next request; deleted: 401, and the key's row goes with the account", async () => {
    const owner = await t.createUser({ password: PASSWORD });
    const { key, id } = await createKey(await signIn(owner.email), ["users:read"]);
    expect((await profileWith(key)).status).toBe(200);
    expect((await t.request("POST", `/api/users/${owner.id}/deactivate`, { token: routeWalk.admin.token })).status).toBe(200);
    expectUnauthorized(await profileWith(key));
    expect((await t.request("POST", `/api/users/${owner.id}/activate`, { token: routeWalk.admin.token })).status).toBe(200);
    expect((await profileWith(key)).status).toBe(200);
    expect((await t.request("DELETE", `/api/users/${owner.id}`, { token: routeWalk.admin.token })).status).toBe(204);
    expectUnauthorized(await profileWith(key));
    expect(await t.db.select().from(apiKeys).where(eq(apiKeys.id, id))).toEqual([]);
  });

  test("tampered (the right prefix, a wrong secret), unknown or malformed: 401", async () => {
    const { key } = await createKey(user.token, ["users:read"]);
    const last = key.at(-1) === "A" ? "B" : "A";
    for (const wrong of [key.slice(0, -1) + last, `usk_ZZZZZZZZ_${key.split("_")[2]}`, `${key}x`, "usk_", `usk_${key.split("_")[1]}`]) {
      expectUnauthorized(await profileWith(wrong));
    }
    expect((await profileWith(key)).status).toBe(200);
  });

  test("logout and a password change leave keys alone", async () => {
    const owner = await t.createUser({ password: PASSWORD });
    const token = await signIn(owner.email);
    const { key } = await createKey(token, ["users:read"]);
    expect((await t.request("POST", "/api/auth/logout?scope=all", { token })).status).toBe(200);
    expect((await profileWith(key)).status).toBe(200);
    const again = await signIn(owner.email);
    const changed = await t.request("POST", "/api/auth/change-password", {
      token: again,
      body: { currentPassword: PASSWORD, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
    });
    expect(changed.status).toBe(200);
    expect((await profileWith(key)).status).toBe(200);
  });

  test("a bootstrap promotion removes the promoted account's keys", async () => {
    const owner = await t.createUser({ password: PASSWORD });
    const { key } = await createKey(await signIn(owner.email), ["users:read"]);
    expect((await profileWith(key)).status).toBe(200);
    await ensureAdmin(t.database, { email: owner.email, password: "B0ss-Passw0rd!" }, Date.now);
    expectUnauthorized(await profileWith(key));
    expect(await t.db.select().from(apiKeys).where(eq(apiKeys.userId, owner.id))).toEqual([]);
  });
});

function expectUnauthorized(res: TestResponse) {
  expect(res.status).toBe(401);
  expect(res.body).toMatchObject({ success: false, errorCode: "UNAUTHORIZED" });
  expect(res.headers.get("www-authenticate")).toBe("Bearer");
}

describe("on a moved clock", () => {
  let clock = Date.now();
  let app: TestApp;
  beforeAll(async () => {
    app = await makeTestApp({}, { now: () => clock });
  });
  afterAll(() => app.close());

  test("creating a key needs a sign-in within 10 minutes: 403 REAUTHENTICATION_REQUIRED after, and for a token without a session", async () => {
    const owner = await app.createUser({ password: PASSWORD });
    const signedIn = await signIn(owner.email, app);
    clock += 601_000;
    const body = { name: "late", scopes: ["users:read"] };
    const stale = await app.request("POST", "/api/account/api-keys", { token: signedIn, body });
    expect(stale.status).toBe(403);
    expect(stale.body).toMatchObject({ success: false, errorCode: "REAUTHENTICATION_REQUIRED" });
    const sessionless = await app.request("POST", "/api/account/api-keys", { token: owner.token, body });
    expect(sessionless.body).toMatchObject({ success: false, errorCode: "REAUTHENTICATION_REQUIRED" });
    expect(await app.db.select().from(apiKeys).where(eq(apiKeys.userId, owner.id))).toEqual([]);
    await createKey(await signIn(owner.email, app), ["users:read"], {}, app);
  });

  test("an expired key: 401 from its expiry on", async () => {
    const token = await signIn((await app.createUser({ password: PASSWORD })).email, app);
    const { key } = await createKey(token, ["users:read"], { expiresAt: new Date(clock + 3_600_000).toISOString() }, app);
    expect((await app.request("GET", "/api/search/profile", { token: key })).status).toBe(200);
    clock += 3_600_000;
    const res = await app.request("GET", "/api/search/profile", { token: key });
    expect(res.status).toBe(401);
    expect(res.body.errorCode).toBe("UNAUTHORIZED");
  });

  test("lastUsedAt and lastUsedFrom are written at most once a minute per key, in batches", async () => {
    const { key, id } = await createKey(await signIn((await app.createUser({ password: PASSWORD })).email, app), ["users:read"], {}, app);
    const usedAt = () => app.db.select({ at: apiKeys.lastUsedAt, from: apiKeys.lastUsedFrom }).from(apiKeys).where(eq(apiKeys.id, id));
    const first = clock;
    expect((await app.request("GET", "/api/search/profile", { token: key })).status).toBe(200);
    await flushed(async () => (await usedAt())[0].at?.getTime() === first);
    expect(await usedAt()).toEqual([{ at: new Date(first), from: "local" }]);
    clock += 30_000;
    expect((await app.request("GET", "/api/search/profile", { token: key })).status).toBe(200);
    await Bun.sleep(2_500);
    expect((await usedAt())[0].at?.getTime()).toBe(first);
    clock += 31_000;
    expect((await app.request("GET", "/api/search/profile", { token: key })).status).toBe(200);
    await flushed(async () => (await usedAt())[0].at?.getTime() === clock);
  }, 30_000);
});

/** Waits until the batched write has happened (it follows the request by a few seconds). */
async function flushed(done: () => Promise<boolean>) {
  for (let i = 0; i < 100; i++) {
    if (await done()) return;
    await Bun.sleep(100);
  }
  throw new Error("the use was never written");
}

describe("the rate limit per key", () => {
  let app: TestApp;
  let keys: { first: string; second: string };
  beforeAll(async () => {
    app = await makeTestApp();
    const owner = await app.createUser({ password: PASSWORD });
    const token = await signIn(owner.email, app);
    keys = { first: (await createKey(token, ["users:read"], {}, app)).key, second: (await createKey(token, ["users:read"], {}, app)).key };
  });
  afterAll(() => app.close());

  test("the 601st request in a minute: 429 with Retry-After and RateLimit-*; wrong secrets don't count; another key is unaffected", async () => {
    const wrong = keys.first.slice(0, -1) + (keys.first.at(-1) === "A" ? "B" : "A");
    for (let i = 0; i < 50; i++) expect((await app.request("GET", "/api/search/profile", { token: wrong })).status).toBe(401);
    for (let i = 1; i <= 600; i++) {
      const res = await app.request("GET", "/api/search/profile", { token: keys.first });
      if (res.status !== 200) throw new Error(`request ${i}: ${res.status}`);
      // A key is told its budget from half of it on (the 301st request leaves 299).
      if (i === 300) expect(res.headers.get("ratelimit-remaining")).toBeNull();
      if (i === 301) expect([res.headers.get("ratelimit-limit"), res.headers.get("ratelimit-remaining")]).toEqual(["600", "299"]);
      if (i === 600) expect(res.headers.get("ratelimit-remaining")).toBe("0");
    }
    const refused = await app.request("GET", "/api/search/profile", { token: keys.first });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ success: false, errorCode: "TOO_MANY_REQUESTS" });
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get("ratelimit-limit")).toBe("600");
    expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    expect(refused.headers.get("ratelimit-reset")).toBe(String(retryAfter));
    const another = await app.request("GET", "/api/search/profile", { token: keys.second });
    expect(another.status).toBe(200);
    expect(another.headers.get("ratelimit-remaining")).toBeNull();
  }, 120_000);
});

describe("the key appears nowhere but in its creation's answer", () => {
  test("not in logs, metrics labels, the audit trail or the outbox", async () => {
    const lines: string[] = [];
    const app = await makeTestApp({ LOG_LEVEL: "info" }, { logs: { write: (line) => void lines.push(line) } });
    try {
      const admin = await app.createUser({ roles: ["USER", "ADMIN"], password: PASSWORD });
      const token = await signIn(admin.email, app);
      const { key } = await createKey(token, SCOPES, {}, app);
      const secret = key.split("_")[2];
      expect((await app.request("GET", `/api/users/${admin.id}`, { token: key })).status).toBe(200);
      expect((await app.request("GET", "/api/audit", { token: key })).status).toBe(403);
      expect((await app.request("GET", "/api/no-such-route", { token: key })).status).toBe(404);
      const tampered = key.slice(0, -1) + (key.at(-1) === "A" ? "B" : "A");
      expect((await app.request("GET", `/api/users/${admin.id}`, { token: tampered })).status).toBe(401);
      const answers = [await app.request("GET", "/api/account/api-keys", { token }), await app.request("GET", `/api/users/${admin.id}/api-keys`, { token })];
      const metrics = await app.request("GET", "/actuator/prometheus", { token });
      expect(metrics.text).toMatch(/http_server_requests_authenticated_total\{kind="api_key"\} [1-9]/);
      expect(metrics.text).toMatch(/http_server_requests_authenticated_total\{kind="session"\} [1-9]/);
      expect(metrics.text).not.toMatch(/http_server_requests_authenticated_total\{[^}]*(key_id|prefix)/);
      await Bun.sleep(50); // access lines are written after the answer is sent
      expect(lines.filter((line) => line.includes('"msg":"request"')).length).toBeGreaterThanOrEqual(6);
      const everything = [
        ...lines,
        ...answers.map((a) => a.text),
        metrics.text,
        JSON.stringify(await app.db.select().from(auditLog)),
        JSON.stringify(await app.db.select().from(outbox)),
        JSON.stringify(await app.db.select().from(apiKeys)),
      ].join("\n");
      expect(everything).not.toContain(secret);
    } finally {
      await app.close();
    }
  });
});
