/**
 * The scope table: every route a narrowed bearer may call, with the scope it needs (a GET `:read`,
 * anything else `:write`), and the routes that refuse one whatever its scopes. An API key
 * (test/api-keys.test.ts) and a client's access token (test/oauth-scopes.test.ts) run the same
 * rows through `scopeTable`, so the two narrow the API exactly alike.
 */
import { expect, test } from "../legs";
import type { TestApp, TestResponse } from "../helpers";
import type { prepareRouteWalk } from "./route-walk";
import { type Failure, type Scenario, scenarios } from "../scenario";

export const NOT_ALLOWED: Failure = { message: "API keys are not accepted on this route", errorCode: "API_KEY_NOT_ALLOWED" };
export const NO_SCOPE: Failure = { message: "The API key lacks the scope this route needs", errorCode: "INSUFFICIENT_SCOPE" };

/**
 * Every route a narrowed bearer may call, in the order the app registers them (the walk's samples
 * change state in that order). Every other route refuses one (REFUSED below) or is open.
 */
export const SCOPE_TABLE: [route: string, scope: string][] = [
  ["GET /api/search/profile", "users:read"],
  ["GET /api/users", "users:read"],
  ["GET /api/users/:id", "users:read"],
  ["POST /api/users", "users:write"],
  ["PUT /api/users/:id", "users:write"],
  ["PATCH /api/users/:id", "users:write"],
  ["POST /api/users/:id/revoke-tokens", "users:write"],
  ["GET /api/products", "products:read"],
  ["GET /api/products/:id", "products:read"],
  ["POST /api/products", "products:write"],
  ["PUT /api/products/:id", "products:write"],
  ["POST /api/orders", "orders:write"],
  ["GET /api/orders", "orders:read"],
  ["GET /api/orders/:id", "orders:read"],
  ["POST /api/orders/:id/pay", "orders:write"],
  ["GET /api/files", "files:read"],
  ["POST /api/files/upload", "files:write"],
  ["GET /api/files/download/:fileName", "files:read"],
  ["GET /api/files/info/:id", "files:read"],
  ["GET /api/search/users", "users:read"],
  ["GET /api/search/users/department/:dept/role/:role", "users:read"],
  ["GET /api/search/by-skills", "users:read"],
  ["GET /api/departments", "users:read"],
  ["POST /api/departments", "users:write"],
  ["GET /api/roles", "users:read"],
  ["GET /api/users/:id/profile", "users:read"],
  ["PUT /api/users/:id/profile", "users:write"],
];

/**
 * Routes that refuse a narrowed bearer whoever it stands for: credentials, administration,
 * operations (and /api/auth's open ones), and the changes of who holds power (deleting,
 * activating, deactivating, roles).
 */
export const REFUSED = [
  "DELETE /api/users/:id",
  "POST /api/users/:id/activate",
  "POST /api/users/:id/deactivate",
  "PUT /api/users/:id/roles",
  "POST /api/users/deactivate-inactive",
  "GET /actuator/prometheus",
  "GET /actuator/metrics",
  "GET /actuator/metrics/:name",
  "GET /actuator/loggers",
  "GET /actuator/loggers/:name",
  "POST /actuator/loggers/:name",
  "GET /actuator/threaddump",
  "GET /actuator/heapdump",
  "POST /api/auth/register",
  "GET /api/auth/validate-email",
  "POST /api/auth/login",
  "POST /api/auth/refresh",
  "POST /api/auth/logout",
  "POST /api/auth/change-password",
  "POST /api/auth/verify-email/request",
  "POST /api/auth/verify-email/confirm",
  "POST /api/auth/password-reset/request",
  "POST /api/auth/password-reset/confirm",
  "GET /api/account/sessions",
  "POST /api/account/sessions/revoke-others",
  "DELETE /api/account/sessions/:id",
  "GET /api/users/:id/sessions",
  "DELETE /api/users/:id/sessions/:sid",
  "GET /api/audit",
  "GET /api/admin/outbox",
  "GET /api/admin/backups",
  "POST /api/admin/backups",
  "GET /api/admin/backups/:name",
  "DELETE /api/admin/backups/:name",
  "POST /api/account/api-keys",
  "GET /api/account/api-keys",
  "DELETE /api/account/api-keys/:id",
  "GET /api/users/:id/api-keys",
  "DELETE /api/users/:id/api-keys/:keyId",
];

/** Bearers of the walk's ADMIN: `all` holds every scope, `allBut[scope]` every scope but that one, `only[scope]` that one alone. */
export interface NarrowedBearers {
  all: string;
  allBut: Record<string, string>;
  only: Record<string, string>;
}

export interface ScopeTableContext {
  t: TestApp;
  routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;
  bearers: NarrowedBearers;
}

/** What a narrowed bearer sends instead of the walk's body: the walk's new user has a password, which none may set. */
const NARROWED_BODIES: Record<string, unknown> = { "POST /api/users": { name: "Walk User", email: "walk@example.com" } };

/** The walk's request for `route` ("METHOD /template"), sent with `bearer`. */
export function sendSample(context: ScopeTableContext, route: string, bearer: string): Promise<TestResponse> {
  const sample = context.routeWalk.samples[route];
  const body = route in NARROWED_BODIES ? NARROWED_BODIES[route] : sample.body;
  return context.t.request(route.slice(0, route.indexOf(" ")), sample.path, { token: bearer, body, raw: sample.raw });
}

/** The table's tests for one kind of bearer (`kind`: "a key", "a client's token"); `context` is read when they run. */
export function scopeTable(kind: string, context: () => ScopeTableContext) {
  // Without its scope first: a refusal changes nothing, so the answers below are the walk's.
  scenarios(
    SCOPE_TABLE.map(
      ([route, scope]): Scenario => ({
        name: `${route} with ${kind} lacking ${scope}`,
        send: () => sendSample(context(), route, context().bearers.allBut[scope]),
        status: 403,
        failure: NO_SCOPE,
      }),
    ),
  );

  for (const [route, scope] of SCOPE_TABLE) {
    test(`${route} with ${kind} holding ${scope} → the route's answer`, async () => {
      const res = await sendSample(context(), route, context().bearers.all);
      expect({ route, status: res.status }).toEqual({ route, status: context().routeWalk.samples[route].status });
    });
  }

  scenarios(
    REFUSED.map(
      (route): Scenario => ({
        name: `${route} with ${kind} holding every scope`,
        send: () => sendSample(context(), route, context().bearers.all),
        status: 403,
        failure: NOT_ALLOWED,
      }),
    ),
  );
}
