/**
 * The scope table: every route a narrowed bearer may call, with the scope it needs, and the routes
 * that refuse one whatever its scopes, both read from the rules by path (test/support/access-rules.ts)
 * for the routes the app registers. An API key (test/api-keys.test.ts) and a client's access token
 * (test/oauth-scopes.test.ts) run the same table through `scopeTable`, so the two narrow the API
 * exactly alike.
 */
import { expect, test } from "../legs";
import type { TestApp, TestResponse } from "../helpers";
import type { prepareRouteWalk } from "./route-walk";
import { expectFailure, type Failure } from "../scenario";
import { type Keys, routesOf, ruleFor } from "./access-rules";
import type { Scope } from "../../src/security/caller";

export const NOT_ALLOWED: Failure = { message: "API keys are not accepted on this route", errorCode: "API_KEY_NOT_ALLOWED" };
export const NO_SCOPE: Failure = { message: "The API key lacks the scope this route needs", errorCode: "INSUFFICIENT_SCOPE" };

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

/**
 * The registered routes whose rule's `keys` passes `keys`, in the order the app registers them (the
 * walk's samples change state in that order).
 */
export const routesByRule = (t: TestApp, keys: (rule: Keys) => boolean) =>
  routesOf(t)
    .map(({ route }) => [route, ruleFor(route)?.[2]] as const)
    .filter((entry): entry is readonly [string, Keys] => entry[1] !== undefined && keys(entry[1]));
/** Every route a narrowed bearer may call, with the scope it needs. */
export const scopeTableOf = (t: TestApp) => routesByRule(t, (keys) => keys !== "refused" && keys !== "answered") as [route: string, scope: Scope][];

/** A 403 with `failure`'s envelope, the route named when it is not. */
function refusedAs(route: string, res: TestResponse, failure: Failure) {
  expect({ route, status: res.status, errorCode: res.body?.errorCode }).toEqual({ route, status: 403, errorCode: failure.errorCode });
  expectFailure(res, 403, failure);
}

/** The table's tests for one kind of bearer (`kind`: "a key", "a client's token"); `context` is read when they run. */
export function scopeTable(kind: string, context: () => ScopeTableContext) {
  // Without its scope first: a refusal changes nothing, so the answers below are the walk's.
  test(`each route with ${kind} lacking its scope: 403 INSUFFICIENT_SCOPE`, async () => {
    const c = context();
    for (const [route, scope] of scopeTableOf(c.t)) refusedAs(route, await sendSample(c, route, c.bearers.allBut[scope]), NO_SCOPE);
  });

  test(`each route with ${kind} holding its scope: the route's answer`, async () => {
    const c = context();
    const statuses = [];
    for (const [route] of scopeTableOf(c.t)) statuses.push({ route, status: (await sendSample(c, route, c.bearers.all)).status });
    expect(statuses).toEqual(scopeTableOf(c.t).map(([route]) => ({ route, status: c.routeWalk.samples[route].status })));
  });

  test(`each route the rules refuse to narrowed bearers, with ${kind} holding every scope: 403 API_KEY_NOT_ALLOWED`, async () => {
    const c = context();
    // The walk has a sample for every route of an app without OAUTH_SERVER (it fails otherwise); the
    // provider's own routes, which only an OAUTH_SERVER app has, are refused in their own suite.
    const refused = routesByRule(c.t, (keys) => keys === "refused").filter(([route]) => route in c.routeWalk.samples);
    expect(refused.length).toBeGreaterThan(40);
    for (const [route] of refused) refusedAs(route, await sendSample(c, route, c.bearers.all), NOT_ALLOWED);
  });
}
