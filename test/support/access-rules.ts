/**
 * Who may call what, written by path: the expectations every route's `access` declaration is
 * checked against (test/access.test.ts), and by which the API-key suite sends its keys
 * (test/api-keys.test.ts). They are written here by hand, not read from the routes: a route is
 * held to the FIRST rule its "METHOD /template" matches, and a route no rule matches fails both
 * suites. A new route needs a new rule only when none of these already says what it should be.
 *
 * A pattern is a method (or `*`, any) and a path: `*` is one segment, `/**` any number of them
 * (none included), anything else itself. `allow` is the guard's rule, or "open" for a route the
 * guard does not hold (it may still read its bearer itself: those are rows in test/access.test.ts).
 * `keys` is what an API key meets: the scope it needs, "refused" (403 API_KEY_NOT_ALLOWED
 * whatever its scopes), or "answered" (an open route answers a key as it answers anyone).
 */
import type { TestApp } from "../helpers";
import type { Access, AccessRule, Scope } from "../../src/security/caller";

export type Allow = "open" | AccessRule;
export type Keys = Scope | "refused" | "answered";
export type Rule = readonly [pattern: string, allow: Allow, keys: Keys];

export const RULES: readonly Rule[] = [
  // Operations: the probes and the build's description are open; the rest is the ADMIN's, never a key's.
  ["GET /actuator/health/**", "open", "answered"],
  ["GET /actuator/info", "open", "answered"],
  ["GET /actuator/prometheus", "open", "refused"], // METRICS_TOKEN or an ADMIN's bearer, read by the route itself
  ["* /actuator/**", "ADMIN", "refused"],

  // Credentials and the account: no key, ever. Signing in, up and out of trouble is open; the rest needs a bearer.
  ["POST /api/auth/logout", "authenticated", "refused"],
  ["POST /api/auth/change-password", "authenticated", "refused"],
  ["POST /api/auth/verify-email/request", "authenticated", "refused"],
  ["* /api/auth/**", "open", "refused"],
  ["* /api/account/setup", "open", "refused"],
  ["* /api/account/**", "authenticated", "refused"],

  // Administration.
  ["* /api/admin/**", "ADMIN", "refused"],
  ["GET /api/audit", "ADMIN", "refused"],
  ["* /api/oauth/clients/**", "ADMIN", "refused"],

  // People: reading takes users:read, changing users:write; who holds power (roles, state, credentials) changes without keys.
  ["GET /api/users", "USER", "users:read"],
  ["GET /api/users/*", "authenticated", "users:read"],
  ["POST /api/users", "ADMIN", "users:write"],
  ["PUT /api/users/*", "ADMIN", "users:write"],
  ["PATCH /api/users/*", "SELF_OR_ADMIN", "users:write"],
  ["POST /api/users/*/revoke-tokens", "ADMIN", "users:write"],
  ["GET /api/users/*/profile", "SELF_OR_ADMIN", "users:read"],
  ["PUT /api/users/*/profile", "SELF_OR_ADMIN", "users:write"],
  ["* /api/users/**", "ADMIN", "refused"],
  ["GET /api/search/**", "authenticated", "users:read"],
  ["GET /api/departments", "authenticated", "users:read"],
  ["POST /api/departments", "ADMIN", "users:write"],
  ["GET /api/roles", "authenticated", "users:read"],

  // Products, orders and files: anyone signed in reads and orders; ADMINs change the catalogue and list every file.
  ["GET /api/products/**", "authenticated", "products:read"],
  ["* /api/products/**", "ADMIN", "products:write"],
  ["GET /api/orders/**", "authenticated", "orders:read"],
  ["* /api/orders/**", "authenticated", "orders:write"],
  ["GET /api/files", "ADMIN", "files:read"],
  ["GET /api/files/**", "authenticated", "files:read"],
  ["* /api/files/**", "authenticated", "files:write"],

  // Open: the service's version, its documents, pages and assets, the OpenID Provider's protocol endpoints (they read their own credentials).

  ["GET /api/version", "open", "answered"],
  ["GET /", "open", "answered"],
  ["GET /swagger/**", "open", "answered"],
  ["GET /account/**", "open", "answered"],
  ["GET /admin/**", "open", "answered"],
  ["GET /.well-known/**", "open", "answered"],
  ["* /oauth2/**", "open", "answered"],
];

const patternOf = (pattern: string) => {
  const [method, path] = pattern.split(" ");
  const body = path
    .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
    .replace(/\/\*\*$/, "(?:/[^/]+)*")
    .replace(/\/\*(?=\/|$)/g, "/[^/]+");
  return { method, path: new RegExp(`^${body}$`) };
};
const compiled = RULES.map((rule) => ({ rule, ...patternOf(rule[0]) }));

/** The first rule `route` ("METHOD /template") matches, or undefined. */
export function ruleFor(route: string): Rule | undefined {
  const [method, path] = route.split(" ");
  return compiled.find((c) => (c.method === "*" || c.method === method) && c.path.test(path))?.rule;
}

/** What a route declared (the guard leaves it on the route's hooks), or undefined for an open route. */
export const declaredAccess = (hooks: unknown): Access | undefined => (hooks as { declaredAccess?: Access }).declaredAccess;

/** Every route the app registers, "METHOD /template", with its declaration, in the order the app registers them. */
export const routesOf = (t: TestApp) => t.app.routes.map((r) => ({ route: `${r.method} ${r.path}`, method: r.method, path: r.path, access: declaredAccess(r.hooks) }));
