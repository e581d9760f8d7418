/**
 * The access table, the contract of who may call each route. First every route the app registers
 * against the rules by path (test/support/access-rules.ts): its declaration says what its rule says,
 * and the guard refuses whom the rule refuses (401 UNAUTHORIZED with WWW-Authenticate: Bearer
 * without a valid token, 403 ACCESS_DENIED without the role). Then particular rows, for an
 * anonymous caller, an authenticated caller without roles, a USER and an ADMIN: the route's own
 * answer when access passes, the routes that read their bearer themselves, unknown paths.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { EMPTY_REGISTRATION_ERRORS, makeTestApp, uniqueEmail, type TestApp, type TestResponse } from "./helpers";
import { refusesKeys } from "../src/security/api-keys";
import { type Allow, ruleFor, routesOf } from "./support/access-rules";
import { DENIED, type Failure, invalidBody, type Scenario, scenarios, UNAUTHORIZED } from "./scenario";

type Who = "anonymous" | "noRole" | "user" | "admin";
type Session = { id: number; email: string; token: string };

let t: TestApp;
const who: Partial<Record<Who, Session>> = {};

beforeAll(async () => {
  t = await makeTestApp();
  who.noRole = await t.createUser({ roles: [] });
  who.user = await t.createUser({ roles: ["USER"] });
  who.admin = await t.admin();
});
afterAll(() => t.close());

/** A user to act on, so DELETE and PUT never hit the callers themselves. */
const target = () => t.createUser({ email: uniqueEmail("access") });

interface Row {
  request: string;
  send: (token: string | undefined, self: Session | undefined) => Promise<TestResponse>;
  expect: Record<Who, number>;
  /** An open route's own error answers, by status (the guard's are GUARD's). */
  own?: Record<number, Failure>;
}

const rows: Row[] = [
  {
    request: "GET /api/auth/validate-email (open)",
    send: (token) => t.request("GET", "/api/auth/validate-email?email=free@example.com", { token }),
    expect: { anonymous: 200, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "POST /api/auth/login (open: reaches the handler)",
    send: (token) => t.request("POST", "/api/auth/login", { token, body: { email: "nobody@example.com", password: "x" } }),
    expect: { anonymous: 401, noRole: 401, user: 401, admin: 401 },
    own: { 401: { message: "Invalid e-mail or password", errorCode: "INVALID_CREDENTIALS" } },
  },
  {
    request: "POST /api/auth/register (open)",
    send: (token) => t.request("POST", "/api/auth/register", { token, body: {} }),
    expect: { anonymous: 400, noRole: 400, user: 400, admin: 400 },
    own: {
      400: invalidBody(EMPTY_REGISTRATION_ERRORS),
    },
  },
  {
    request: "GET /api/account/setup (open: first run's status)",
    send: (token) => t.request("GET", "/api/account/setup", { token }),
    expect: { anonymous: 200, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "POST /api/account/setup (open: reaches the handler; the token is void, an ADMIN exists)",
    send: (token) => t.request("POST", "/api/account/setup", { token, body: { token: "x", name: "Late Admin", email: "late@example.com", password: "Passw0rd!" } }),
    expect: { anonymous: 400, noRole: 400, user: 400, admin: 400 },
    own: { 400: { message: "The link is invalid, used or expired; ask for a new one", errorCode: "INVALID_TOKEN" } },
  },
  {
    request: "GET /account/security (open page)",
    send: (token) => t.request("GET", "/account/security", { token }),
    expect: { anonymous: 200, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /swagger/json (open)",
    send: (token) => t.request("GET", "/swagger/json", { token }),
    expect: { anonymous: 200, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /actuator/health (open)",
    send: (token) => t.request("GET", "/actuator/health", { token }),
    expect: { anonymous: 200, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /actuator/prometheus (ADMIN)",
    send: (token) => t.request("GET", "/actuator/prometheus", { token }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "GET /api/users (USER; ADMIN includes USER)",
    send: (token) => t.request("GET", "/api/users", { token }),
    expect: { anonymous: 401, noRole: 403, user: 200, admin: 200 },
  },
  {
    request: "POST /api/users (ADMIN)",
    send: (token) => t.request("POST", "/api/users", { token, body: { name: "New Person", email: uniqueEmail("access") } }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 201 },
  },
  {
    request: "POST /api/users with an invalid body (access is decided first)",
    send: (token) => t.request("POST", "/api/users", { token, body: { name: "" } }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 400 },
  },
  {
    request: "PUT /api/users/{id} (ADMIN)",
    send: async (token) => t.request("PUT", `/api/users/${(await target()).id}`, { token, body: { name: "Renamed", email: uniqueEmail("access") } }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "PUT /api/users/{own id} (ADMIN, even for oneself)",
    send: (token, self) => t.request("PUT", `/api/users/${self?.id ?? 1}`, { token, body: { name: "Renamed", email: self?.email ?? uniqueEmail("access") } }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "DELETE /api/users/{id} (ADMIN)",
    send: async (token) => t.request("DELETE", `/api/users/${(await target()).id}`, { token }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 204 },
  },
  {
    request: "POST /api/users/{id}/unlock (ADMIN)",
    send: async (token) => t.request("POST", `/api/users/${(await target()).id}/unlock`, { token }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 204 },
  },
  {
    request: "PATCH /api/users/{own id} (self or ADMIN)",
    send: (token, self) => t.request("PATCH", `/api/users/${self?.id ?? 1}`, { token, body: { name: "Self Renamed" } }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "PATCH /api/users/{someone else} (self or ADMIN)",
    send: async (token) => t.request("PATCH", `/api/users/${(await target()).id}`, { token, body: { name: "Not Yours" } }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "GET /api/users/{id} (authenticated)",
    send: async (token) => t.request("GET", `/api/users/${(await target()).id}`, { token }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /api/search/profile (authenticated)",
    send: (token) => t.request("GET", "/api/search/profile", { token }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "POST /api/auth/refresh (open path, authenticates its bearer)",
    send: (token) => t.request("POST", "/api/auth/refresh", { token }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /api/account/api-keys (authenticated)",
    send: (token) => t.request("GET", "/api/account/api-keys", { token }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /api/users/{id}/api-keys (ADMIN)",
    send: (token, self) => t.request("GET", `/api/users/${self?.id ?? 1}/api-keys`, { token }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "GET /api/no-such-thing (unknown path)",
    send: (token) => t.request("GET", "/api/no-such-thing", { token }),
    expect: { anonymous: 401, noRole: 404, user: 404, admin: 404 },
  },
  {
    request: "GET /totally/unknown (unknown path outside /api)",
    send: (token) => t.request("GET", "/totally/unknown", { token }),
    expect: { anonymous: 401, noRole: 404, user: 404, admin: 404 },
  },
  {
    request: "GET /api/account/mfa (any signed-in caller: their own factors)",
    send: (token) => t.request("GET", "/api/account/mfa", { token }),
    expect: { anonymous: 401, noRole: 200, user: 200, admin: 200 },
  },
  {
    request: "GET /api/users/{id}/mfa (ADMIN)",
    send: async (token) => t.request("GET", `/api/users/${(await target()).id}/mfa`, { token }),
    expect: { anonymous: 401, noRole: 403, user: 403, admin: 200 },
  },
  {
    request: "POST /api/auth/passkey/options (open: reaches the handler; no PUBLIC_URL here)",
    send: (token) => t.request("POST", "/api/auth/passkey/options", { token }),
    expect: { anonymous: 400, noRole: 400, user: 400, admin: 400 },
    own: { 400: { message: "Passkeys are not configured on this server (PUBLIC_URL or RP_ID)", errorCode: "PASSKEYS_NOT_CONFIGURED" } },
  },
];

/** The guard's answers. */
const GUARD: Record<number, Failure> = {
  401: UNAUTHORIZED,
  403: DENIED,
  404: { message: "No resource at this path", errorCode: "NOT_FOUND" },
};

/** A cell: the guard's (or an open route's own) error envelope, or any answer of the route when access passes. */
function cell(row: Row, caller: Who): Scenario {
  const status = row.expect[caller];
  const send = () => row.send(who[caller]?.token, who[caller]);
  const failure = row.own?.[status] ?? GUARD[status];
  if (failure) return { name: row.request, send, status, failure };
  return { name: row.request, send, status, body: status === 204 ? undefined : expect.anything() };
}

for (const caller of ["anonymous", "noRole", "user", "admin"] as Who[]) {
  describe(caller, () => scenarios(rows.map((row) => cell(row, caller))));
}

/** Who each rule refuses, among the callers without ADMIN (an ADMIN passes every rule). */
const REFUSES: Record<Allow, Who[]> = {
  open: [],
  authenticated: ["anonymous"],
  USER: ["anonymous", "noRole"],
  SELF_OR_ADMIN: ["anonymous", "noRole", "user"],
  ADMIN: ["anonymous", "noRole", "user"],
};

describe("every route against the rules by path", () => {
  /** Every route there is: the OpenID Provider's too. */
  let whole: TestApp;
  beforeAll(async () => {
    whole = await makeTestApp({ PUBLIC_URL: "https://id.example.test", OAUTH_SERVER: "on" });
  });
  afterAll(() => whole?.close());

  test("each route matches a rule (a new route with none needs one in test/support/access-rules.ts) and declares what it says", () => {
    const routes = routesOf(whole);
    expect(routes.filter(({ route }) => !ruleFor(route)).map(({ route }) => route)).toEqual([]);
    const declared = routes.map(({ route, path, access }) => ({
      route,
      allow: access?.allow ?? "open",
      keys: refusesKeys(path) ? "refused" : access ? (access.scope ?? "refused") : "answered",
    }));
    const ruled = routes.map(({ route }) => {
      const [, allow, keys] = ruleFor(route)!;
      return { route, allow, keys };
    });
    expect(declared).toEqual(ruled);
  });

  test("the guard refuses whom each route's rule refuses, whatever the route's body", async () => {
    const callers: [Who, string | undefined][] = [
      ["anonymous", undefined],
      ["noRole", who.noRole!.token],
      ["user", who.user!.token],
    ];
    const expected: unknown[] = [];
    const answered: unknown[] = [];
    for (const { route, method, path } of routesOf(t)) {
      const refused = REFUSES[ruleFor(route)?.[1] ?? "open"];
      // Any value for a parameter: the guard answers before the route reads it (and SELF_OR_ADMIN's :id names nobody here).
      const url = path.replace(/:[^/]+/g, "999999");
      for (const [caller, token] of callers) {
        if (!refused.includes(caller)) continue;
        const res = await t.request(method, url, { token });
        const failure = caller === "anonymous" ? UNAUTHORIZED : DENIED;
        expected.push({ route, caller, status: caller === "anonymous" ? 401 : 403, errorCode: failure.errorCode });
        answered.push({ route, caller, status: res.status, errorCode: res.body?.errorCode });
        if (caller === "anonymous") expect(res.headers.get("www-authenticate")).toBe("Bearer");
      }
    }
    expect(answered).toEqual(expected);
    expect(expected.length).toBeGreaterThan(100);
  });
});
