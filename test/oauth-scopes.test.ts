/**
 * A client's access token narrows the API exactly as an API key with the same scopes does: the
 * scope table of test/support/scope-table.ts, run with tokens the walk's ADMIN granted to a
 * first-party client (every scope, every scope but one, one alone). The routes of the provider
 * itself refuse them as they refuse keys.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { SCOPES } from "../src/security/caller";
import { makeTestApp, type TestApp } from "./helpers";
import { prepareRouteWalk } from "./support/route-walk";
import { type NarrowedBearers, NOT_ALLOWED, scopeTable } from "./support/scope-table";
import { expectFailure } from "./scenario";

const ISSUER = "https://id.example.test";
/** Where the test's requests go (the app checks the Host against PUBLIC_URL's only when TRUSTED_HOSTS says so). */
const HERE = "http://localhost";
const REDIRECT = "https://app.example.test/callback";

let t: TestApp;
let routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;
const tokens: NarrowedBearers = { all: "", allBut: {}, only: {} };

/** The provider's form endpoints, as an app calls them. */
const form = (path: string, body: Record<string, string>, client: { clientId: string; clientSecret: string }) =>
  t.app.handle(
    new Request(`${HERE}${path}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${btoa(`${client.clientId}:${client.clientSecret}`)}` },
      body: new URLSearchParams(body),
    }),
  );

beforeAll(async () => {
  t = await makeTestApp({ PUBLIC_URL: ISSUER, OAUTH_SERVER: "on" });
  routeWalk = await prepareRouteWalk(t);
  const adminToken = (await t.request("POST", "/api/auth/login", { body: { email: routeWalk.admin.email, password: "Admin-Passw0rd!" } })).body.data.token as string;
  // First-party: no consent screen, so every authorization comes straight back with a code.
  const created = await t.request("POST", "/api/oauth/clients", { token: adminToken, body: { name: "Walker", redirectUris: [REDIRECT], scopes: SCOPES, firstParty: true } });
  const client = created.body as { clientId: string; clientSecret: string };
  const session = await t.app.handle(new Request(`${HERE}/oauth2/session`, { method: "POST", headers: { authorization: `Bearer ${adminToken}` } }));
  const cookie = session.headers.get("set-cookie")!.split(";")[0];
  const grant = async (scopes: readonly string[]) => {
    const query = new URLSearchParams({ client_id: client.clientId, redirect_uri: REDIRECT, response_type: "code", scope: ["openid", ...scopes].join(" ") });
    const back = new URL((await t.app.handle(new Request(`${HERE}/oauth2/authorize?${query}`, { headers: { cookie } }))).headers.get("location")!);
    const answer = await form("/oauth2/token", { grant_type: "authorization_code", code: back.searchParams.get("code")!, redirect_uri: REDIRECT }, client);
    expect(answer.status).toBe(200);
    return ((await answer.json()) as { access_token: string }).access_token;
  };
  tokens.all = await grant(SCOPES);
  for (const scope of SCOPES) tokens.allBut[scope] = await grant(SCOPES.filter((s) => s !== scope));
  for (const scope of SCOPES) tokens.only[scope] = await grant([scope]);
}, 60_000);
afterAll(() => t.close());

describe("the scope table, with a client's access token", () => {
  scopeTable("a client's token", () => ({ t, routeWalk, bearers: tokens }));

  test("the provider's own API refuses a client's token holding every scope: clients, Apps with access", async () => {
    for (const [method, path] of [
      ["GET", "/api/oauth/clients"],
      ["POST", "/api/oauth/clients"],
      ["DELETE", "/api/oauth/clients/x"],
      ["GET", "/api/account/apps"],
      ["DELETE", "/api/account/apps/x"],
    ]) {
      expectFailure(await t.request(method, path, { token: tokens.all, body: method === "POST" ? { name: "x", redirectUris: [REDIRECT] } : undefined }), 403, NOT_ALLOWED);
    }
  });
});
