/**
 * usersvc as an OpenID Provider (issue 44). A certified relying-party library, openid-client 6,
 * drives the provider over the app's own fetch: discovery, the code flow with PKCE, its ID-token
 * checks, userinfo, refresh, revocation and end-session; its errors are this suite's failures.
 * Then the refusals, each with its RFC error, and what a client's access token may reach.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as oidc from "openid-client";
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { issueToken } from "../src/store/account-tokens";
import { decodeProtectedHeader } from "jose";
import { providerKeyrings } from "../src/features/oauth-server/tokens";
import { signingKeys } from "../src/db/schema";
import { configuredTokens } from "../src/security/bearer-tokens";
import { rotateRings } from "../src/security/signing-keys";
import { makeTestApp, TEST_SECRET, type TestApp } from "./helpers";

const ISSUER = "http://localhost";
const PASSWORD = "Passw0rd!";
const REDIRECT = "https://app.example.test/callback";
const LOGGED_OUT = "https://app.example.test/bye";

let t: TestApp;
let adminToken: string;

/** Every request of the library goes to the app itself, as it would over loopback; each answer is checked against the OpenAPI document (t.handle). */
const viaApp = ((url: string, options: RequestInit) => t.handle(new Request(url, options))) as unknown as typeof fetch;

/** What `usersvc keys rotate [--revoke KID]` does with OAUTH_SERVER=on: both rings, on the app's database. */
const keysRotate = (revoke?: string) =>
  rotateRings([configuredTokens(t.config, TEST_SECRET, t.database, t.cipher, Date.now).keyring, ...providerKeyrings(t.config, t.database, t.cipher, Date.now)], revoke);

async function signIn(email: string) {
  const res = await t.request("POST", "/api/auth/login", { body: { email, password: PASSWORD } });
  expect(res.status).toBe(200);
  return res.body.data.token as string;
}

async function newClient(body: Record<string, unknown> = {}) {
  const res = await t.request("POST", "/api/oauth/clients", {
    token: adminToken,
    body: { name: "Dashboard", redirectUris: [REDIRECT], postLogoutRedirectUris: [LOGGED_OUT], scopes: ["offline_access", "users:read"], ...body },
  });
  expect(res.status).toBe(201);
  return res.body as { clientId: string; clientSecret?: string };
}

/** The library's configuration for a client, from discovery. */
async function configFor(client: { clientId: string; clientSecret?: string }) {
  return oidc.discovery(new URL(ISSUER), client.clientId, client.clientSecret, undefined, {
    [oidc.customFetch]: viaApp,
    execute: [oidc.allowInsecureRequests],
  });
}

/** The provider's browser session, as the account page opens it after a sign-in: its cookie. */
async function browserCookie(email: string) {
  const res = await t.app.handle(new Request(`${ISSUER}/oauth2/session`, { method: "POST", headers: { authorization: `Bearer ${await signIn(email)}` } }));
  expect(res.status).toBe(204);
  return res.headers.get("set-cookie")!.split(";")[0];
}

const follow = (url: string | URL, cookie?: string) => t.app.handle(new Request(String(url), { headers: cookie ? { cookie } : {} }));

/** The account page's consent: the authorization request's query, consented. */
async function consent(authorizeUrl: URL, cookie: string) {
  const res = await t.app.handle(
    new Request(`${ISSUER}/oauth2/interaction`, {
      method: "POST",
      headers: { cookie, "content-type": "application/json" },
      body: JSON.stringify({ query: authorizeUrl.search.slice(1), consent: true }),
    }),
  );
  expect(res.status).toBe(200);
  return (await res.json()) as { redirectTo?: string; step?: string; client?: { name: string }; scopes?: string[] };
}

async function codeFlow(config: oidc.Configuration, cookie: string, scope = "openid profile email offline_access users:read", extra: Record<string, string> = {}) {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    nonce,
    ...extra,
  });
  let location = (await follow(url, cookie)).headers.get("location")!;
  if (!location.startsWith(REDIRECT)) {
    expect(location).toStartWith("/account/authorize?");
    location = (await consent(url, cookie)).redirectTo!;
  }
  const tokens = await oidc.authorizationCodeGrant(config, new URL(location), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true });
  return { tokens, verifier, location, url };
}

let user: { id: number; email: string };
/** How far the app's clock runs ahead of the real one: the tests about time move it. */
let skew = 0;
const GRACE_S = 10;

beforeAll(async () => {
  t = await makeTestApp({ OAUTH_SERVER: "on", PUBLIC_URL: ISSUER, TOKEN_SIGNING: "EdDSA", REFRESH_REUSE_GRACE_S: String(GRACE_S) }, { now: () => Date.now() + skew });
  const admin = await t.createUser({ password: PASSWORD, roles: ["USER", "ADMIN"] });
  adminToken = await signIn(admin.email);
  user = await t.createUser({ password: PASSWORD, name: "Ada Lovelace" });
}, 60_000);
afterAll(() => t.close());

describe("openid-client drives the provider", () => {
  test("discovery, code flow with PKCE, ID token, userinfo, refresh, revoke, end-session", async () => {
    const client = await newClient();
    const config = await configFor(client);
    expect(config.serverMetadata().issuer).toBe(ISSUER);
    const cookie = await browserCookie(user.email);
    const { tokens } = await codeFlow(config, cookie);
    const claims = tokens.claims()!;
    expect(claims).toMatchObject({ iss: ISSUER, sub: String(user.id), aud: client.clientId, azp: client.clientId, amr: ["pwd"] });
    expect(typeof claims.auth_time).toBe("number");
    expect(tokens.refresh_token).toBeString();

    const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub);
    expect(JSON.parse(JSON.stringify(info))).toEqual({ sub: String(user.id), name: "Ada Lovelace", email: user.email, email_verified: false });

    // The access token reads users (users:read), and the same through the guard.
    const read = await t.request("GET", `/api/users/${user.id}`, { token: tokens.access_token });
    expect(read.status).toBe(200);

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(refreshed.claims()!.sub).toBe(String(user.id));

    await oidc.tokenRevocation(config, refreshed.refresh_token!);
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    expect((await t.request("GET", `/api/users/${user.id}`, { token: refreshed.access_token })).status).toBe(401);

    const logout = oidc.buildEndSessionUrl(config, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: LOGGED_OUT, state: "s1" });
    const out = await follow(logout, cookie);
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe(`${LOGGED_OUT}?state=s1`);
    // The browser session ended: prompt=none now answers login_required.
    const silent = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid", prompt: "none", code_challenge: "x".repeat(43), code_challenge_method: "S256" });
    expect(new URL((await follow(silent, cookie)).headers.get("location")!).searchParams.get("error")).toBe("login_required");
  });

  test("consent is asked once, then remembered until withdrawn from Apps with access", async () => {
    const client = await newClient({ public: true, scopes: [] });
    const config = await configFor(client);
    const cookie = await browserCookie(user.email);
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid profile", code_challenge: "y".repeat(43), code_challenge_method: "S256" });
    expect((await follow(url, cookie)).headers.get("location")).toStartWith("/account/authorize?");
    const asked = await t.app.handle(
      new Request(`${ISSUER}/oauth2/interaction`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json" },
        body: JSON.stringify({ query: url.search.slice(1) }),
      }),
    );
    expect(await asked.json()).toEqual({ step: "consent", client: { name: "Dashboard" }, scopes: ["openid", "profile"] });
    await codeFlow(config, cookie, "openid profile");
    // Remembered: the next authorization goes straight back with a code.
    expect((await follow(url, cookie)).headers.get("location")).toStartWith(`${REDIRECT}?code=`);
    const token = await signIn(user.email);
    const apps = await t.request("GET", "/api/account/apps", { token });
    expect(apps.body.map((a: { clientId: string }) => a.clientId)).toContain(client.clientId);
    expect((await t.request("DELETE", `/api/account/apps/${client.clientId}`, { token })).status).toBe(204);
    expect((await follow(url, cookie)).headers.get("location")).toStartWith("/account/authorize?");
  });
});

describe("the OpenAPI document (OAUTH_SERVER=on)", () => {
  test("documents discovery and every /oauth2/* route with the protocol's own answers (not the envelope); real answers conform", async () => {
    const spec = (await t.request("GET", "/swagger/json")).body;
    const expected: Record<string, Record<string, string[]>> = {
      "/.well-known/openid-configuration": { get: ["200"] },
      "/oauth2/authorize": { get: ["303", "400"] },
      "/oauth2/interaction": { post: ["200", "400"] },
      "/oauth2/session": { post: ["204", "401"] },
      "/oauth2/token": { post: ["200", "400", "401"] },
      "/oauth2/userinfo": { get: ["200", "401", "403"] },
      "/oauth2/revoke": { post: ["200", "400", "401"] },
      "/oauth2/introspect": { post: ["200", "400", "401"] },
      "/oauth2/end-session": { get: ["200", "303", "400"], post: ["200", "303", "400"] },
    };
    for (const [path, methods] of Object.entries(expected))
      for (const [method, statuses] of Object.entries(methods)) {
        const operation = spec.paths[path]?.[method];
        expect(operation?.summary, `${method} ${path}`).toBeString();
        expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(expect.arrayContaining(statuses));
      }
    const token = spec.paths["/oauth2/token"].post;
    expect(token.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/OAuthTokenAnswer" });
    expect(token.responses["400"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/OAuthError" });
    expect(Object.keys(token.requestBody.content)).toEqual(["application/x-www-form-urlencoded"]);
    expect(spec.paths["/oauth2/authorize"].get.responses["303"].headers).toHaveProperty("Location");
    // Through the conformance check: discovery, a token request without a client, userinfo without a token.
    expect((await t.handle(new Request(`${ISSUER}/.well-known/openid-configuration`))).status).toBe(200);
    const noClient = await t.handle(
      new Request(`${ISSUER}/oauth2/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=authorization_code" }),
    );
    expect([400, 401]).toContain(noClient.status);
    expect((await t.handle(new Request(`${ISSUER}/oauth2/userinfo`))).status).toBe(401);
  });
});

describe("the account pages' sign-in and consent", () => {
  test("/account/authorize: the bundled page (data-page authorize) in the browser's language, framing refused", async () => {
    const res = await t.request("GET", "/account/authorize?client_id=x", { headers: { "accept-language": "zh-TW" } });
    expect(res.status).toBe(200);
    expect(res.text).toContain('data-page="authorize"');
    expect(/<title>([^<]+)<\/title>/.exec(res.text)![1]).toBe("登入");
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const bundle = await (await t.app.handle(new Request(`${ISSUER}${/src="([^"]+app\.js[^"]*)"/.exec(res.text)![1]}`))).text();
    for (const text of ["Allow {client} to use your account?", "允許 {client} 使用您的帳號？", "Apps with access", "可存取的應用程式"]) expect(bundle).toContain(text);
    // The security page lists the apps with access only where the server is a provider.
    expect((await t.request("GET", "/account/security")).text).toContain('data-provider="on"');
  });

  test("Deny on the consent screen: back to the app with access_denied (and its state, and iss)", async () => {
    const client = await newClient({ public: true, scopes: [] });
    const config = await configFor(client);
    const cookie = await browserCookie(user.email);
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid email", code_challenge: "d".repeat(43), code_challenge_method: "S256", state: "den" });
    const res = await t.app.handle(
      new Request(`${ISSUER}/oauth2/interaction`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json" },
        body: JSON.stringify({ query: url.search.slice(1), deny: true }),
      }),
    );
    const back = new URL(((await res.json()) as { redirectTo: string }).redirectTo);
    expect(Object.fromEntries(back.searchParams)).toEqual({ error: "access_denied", error_description: "the user did not allow this app", state: "den", iss: ISSUER });
    expect((await t.request("GET", "/api/account/apps", { token: await signIn(user.email) })).body.map((a: { clientId: string }) => a.clientId)).not.toContain(client.clientId);
  });
});

describe("refusals, each with its RFC error", () => {
  let config: oidc.Configuration;
  let client: { clientId: string; clientSecret?: string };
  let cookie: string;
  beforeAll(async () => {
    client = await newClient();
    config = await configFor(client);
    cookie = await browserCookie(user.email);
  });

  const tokenForm = (form: Record<string, string>, auth = client) =>
    t.app.handle(
      new Request(`${ISSUER}/oauth2/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${btoa(`${auth.clientId}:${auth.clientSecret ?? ""}`)}` },
        body: new URLSearchParams(form),
      }),
    );
  /** A code issued for the request (consented already), not yet redeemed. */
  async function freshCode(extra: Record<string, string> = {}, withChallenge = true) {
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: "openid offline_access",
      ...(withChallenge && { code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: "S256" }),
      ...extra,
    });
    let location = (await follow(url, cookie)).headers.get("location")!;
    if (!location.startsWith(REDIRECT)) location = (await consent(url, cookie)).redirectTo!;
    return { code: new URL(location).searchParams.get("code")!, verifier, location };
  }
  const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;

  test("a replayed code: invalid_grant, and what it issued is revoked", async () => {
    const { code, verifier } = await freshCode();
    const first = await tokenForm({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier });
    expect(first.status).toBe(200);
    const issued = (await first.json()) as { access_token: string; refresh_token: string };
    const again = await tokenForm({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier });
    expect([again.status, await errorOf(again)]).toEqual([400, "invalid_grant"]);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: issued.access_token })).status).toBe(401);
    const refresh = await tokenForm({ grant_type: "refresh_token", refresh_token: issued.refresh_token });
    expect(await errorOf(refresh)).toBe("invalid_grant");
  });

  test("a wrong or missing PKCE verifier: invalid_grant", async () => {
    const wrong = await freshCode();
    expect(await errorOf(await tokenForm({ grant_type: "authorization_code", code: wrong.code, redirect_uri: REDIRECT, code_verifier: oidc.randomPKCECodeVerifier() }))).toBe(
      "invalid_grant",
    );
    const missing = await freshCode();
    expect(await errorOf(await tokenForm({ grant_type: "authorization_code", code: missing.code, redirect_uri: REDIRECT }))).toBe("invalid_grant");
  });

  test("plain is refused: invalid_request on the redirect, with iss", async () => {
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid", code_challenge: "p".repeat(43), code_challenge_method: "plain", state: "st" });
    const back = new URL((await follow(url, cookie)).headers.get("location")!);
    expect(Object.fromEntries(back.searchParams)).toMatchObject({ error: "invalid_request", state: "st", iss: ISSUER });
  });

  test("a verifier for a code issued without a challenge: invalid_grant (no PKCE downgrade)", async () => {
    const { code } = await freshCode({}, false);
    expect(await errorOf(await tokenForm({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: oidc.randomPKCECodeVerifier() }))).toBe("invalid_grant");
  });

  test("a redirect URI that differs by one character: a page, never a redirect", async () => {
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: `${REDIRECT}x`, scope: "openid", code_challenge: "z".repeat(43), code_challenge_method: "S256" });
    const res = await follow(url, cookie);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
  });

  test("a public client without PKCE: invalid_request", async () => {
    const pub = await newClient({ public: true });
    const pubConfig = await configFor(pub);
    const url = oidc.buildAuthorizationUrl(pubConfig, { redirect_uri: REDIRECT, scope: "openid" });
    expect(new URL((await follow(url, cookie)).headers.get("location")!).searchParams.get("error")).toBe("invalid_request");
  });

  test("a confidential client with a wrong secret: 401 invalid_client", async () => {
    const { code, verifier } = await freshCode();
    const res = await tokenForm({ grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier }, { clientId: client.clientId, clientSecret: "wrong" });
    expect([res.status, await errorOf(res)]).toEqual([401, "invalid_client"]);
  });

  test("a refresh token replayed after the grace ends the chain", async () => {
    const clockless = await freshCode();
    const first = (await (await tokenForm({ grant_type: "authorization_code", code: clockless.code, redirect_uri: REDIRECT, code_verifier: clockless.verifier })).json()) as {
      refresh_token: string;
    };
    const second = (await (await tokenForm({ grant_type: "refresh_token", refresh_token: first.refresh_token })).json()) as { refresh_token: string };
    // Within the grace: once more, a sibling.
    const sibling = await tokenForm({ grant_type: "refresh_token", refresh_token: first.refresh_token });
    expect(sibling.status).toBe(200);
    // Again: past its one grace answer, a replay: the whole grant ends.
    const replay = await tokenForm({ grant_type: "refresh_token", refresh_token: first.refresh_token });
    expect(await errorOf(replay)).toBe("invalid_grant");
    expect(await errorOf(await tokenForm({ grant_type: "refresh_token", refresh_token: second.refresh_token }))).toBe("invalid_grant");
  });

  test("a token used after its client was deleted: 401", async () => {
    const gone = await newClient();
    const goneConfig = await configFor(gone);
    const { tokens } = await codeFlow(goneConfig, cookie);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: tokens.access_token })).status).toBe(200);
    expect((await t.request("DELETE", `/api/oauth/clients/${gone.clientId}`, { token: adminToken })).status).toBe(204);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: tokens.access_token })).status).toBe(401);
  });

  test("prompt=none without a session: login_required", async () => {
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid", prompt: "none", state: "n" });
    expect(Object.fromEntries(new URL((await follow(url)).headers.get("location")!).searchParams)).toMatchObject({ error: "login_required", state: "n", iss: ISSUER });
  });

  test("a scope the client may not ask for: invalid_scope", async () => {
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid orders:write" });
    expect(new URL((await follow(url, cookie)).headers.get("location")!).searchParams.get("error")).toBe("invalid_scope");
  });

  test("an id_token_hint of another issuer: a page", async () => {
    const { SignJWT, generateKeyPair } = await import("jose");
    const { privateKey } = await generateKeyPair("RS256");
    const foreign = await new SignJWT({ sub: String(user.id), aud: client.clientId })
      .setProtectedHeader({ alg: "RS256", kid: "x" })
      .setIssuer("https://evil.example")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
    const res = await follow(`${ISSUER}/oauth2/end-session?id_token_hint=${foreign}&post_logout_redirect_uri=${encodeURIComponent(LOGGED_OUT)}`, cookie);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
  });

  test("client_credentials from a client not created with it: unauthorized_client; with it: the client as USER", async () => {
    expect(await errorOf(await tokenForm({ grant_type: "client_credentials" }))).toBe("unauthorized_client");
    const machine = await newClient({ grantTypes: ["client_credentials"], scopes: ["users:read"], redirectUris: [] });
    const res = await tokenForm({ grant_type: "client_credentials", scope: "users:read" }, machine);
    const answer = (await res.json()) as { access_token: string; refresh_token?: string; id_token?: string };
    expect([res.status, answer.refresh_token, answer.id_token]).toEqual([200, undefined, undefined]);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: answer.access_token })).status).toBe(200);
    expect((await t.request("POST", "/api/users", { token: answer.access_token, body: { name: "x", email: "x@example.com" } })).status).toBe(403);
    expect((await t.request("GET", "/api/oauth/clients", { token: answer.access_token })).status).toBe(403);
  });

  test("a client acting as itself (client_credentials) reaches no route that acts for a user: 403 CLIENT_WITHOUT_USER, never a 500", async () => {
    const machine = await newClient({
      grantTypes: ["client_credentials"],
      scopes: ["users:read", "orders:read", "orders:write", "files:write", "products:read"],
      redirectUris: [],
    });
    const res = await tokenForm({ grant_type: "client_credentials" }, machine);
    const token = ((await res.json()) as { access_token: string }).access_token;
    const product = await t.request("POST", "/api/products", { token: adminToken, body: { name: "Widget", code: `W-${crypto.randomUUID().slice(0, 8)}`, price: 5, stock: 10 } });
    expect(product.status).toBe(201);
    const refused = [
      await t.request("POST", "/api/orders", { token, body: { items: [{ productId: product.body.id, quantity: 1 }] } }),
      await t.request("GET", "/api/orders", { token }),
      await t.request("GET", "/api/search/profile", { token }),
      await t.request("POST", `/api/orders/1/pay`, { token, body: { method: "CARD", cardNumber: "4242424242424242" } }),
    ];
    expect(refused.map((r) => [r.status, r.body.errorCode])).toEqual(Array(refused.length).fill([403, "CLIENT_WITHOUT_USER"]));
    // Reads of what is nobody's own still answer.
    expect((await t.request("GET", `/api/users/${user.id}`, { token })).status).toBe(200);
    expect((await t.request("GET", "/api/products", { token })).status).toBe(200);
  });

  test("an ID token presented as a bearer: 401, here and at userinfo", async () => {
    const { tokens } = await codeFlow(config, cookie);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: tokens.id_token! })).status).toBe(401);
    const info = await t.app.handle(new Request(`${ISSUER}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.id_token}` } }));
    expect(info.status).toBe(401);
  });

  test("an access token without API scopes reaches only userinfo; none touches /api/oauth or /api/account", async () => {
    const bare = await newClient({ scopes: [] });
    const { tokens } = await codeFlow(await configFor(bare), cookie, "openid profile");
    expect((await t.request("GET", `/api/users/${user.id}`, { token: tokens.access_token })).body.errorCode).toBe("INSUFFICIENT_SCOPE");
    expect((await t.request("GET", "/api/account/apps", { token: tokens.access_token })).body.errorCode).toBe("API_KEY_NOT_ALLOWED");
    expect((await t.request("GET", "/api/oauth/clients", { token: tokens.access_token })).body.errorCode).toBe("API_KEY_NOT_ALLOWED");
    expect((await t.app.handle(new Request(`${ISSUER}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }))).status).toBe(200);
  });

  test("revoke-tokens (what a password change bumps, the token version) ends the client's tokens", async () => {
    const changer = await t.createUser({ password: PASSWORD });
    const own = await browserCookie(changer.email);
    const { tokens } = await codeFlow(config, own);
    expect((await t.request("GET", `/api/users/${changer.id}`, { token: tokens.access_token })).status).toBe(200);
    expect((await t.request("POST", `/api/users/${changer.id}/revoke-tokens`, { token: adminToken })).status).toBeLessThan(300);
    expect((await t.request("GET", `/api/users/${changer.id}`, { token: tokens.access_token })).status).toBe(401);
  });
});

describe("what ends a client's tokens", () => {
  let config: oidc.Configuration;
  beforeAll(async () => {
    config = await configFor(await newClient({ firstParty: true }));
  });

  /** A fresh user signed in to the provider, and the tokens the client got for them (with offline_access or not). */
  async function signedInClient(offline: boolean) {
    const someone = await t.createUser({ password: PASSWORD });
    const sessionToken = await signIn(someone.email);
    const session = await t.app.handle(new Request(`${ISSUER}/oauth2/session`, { method: "POST", headers: { authorization: `Bearer ${sessionToken}` } }));
    const cookie = session.headers.get("set-cookie")!.split(";")[0];
    const { tokens } = await codeFlow(config, cookie, `openid users:read${offline ? " offline_access" : ""}`);
    expect((await t.request("GET", `/api/users/${someone.id}`, { token: tokens.access_token })).status).toBe(200);
    return { someone, sessionToken, cookie, tokens };
  }
  /** Whether the access token still reads and (when there is one) the refresh token still refreshes. */
  async function stillWorks({ someone, tokens }: Awaited<ReturnType<typeof signedInClient>>) {
    const read = (await t.request("GET", `/api/users/${someone.id}`, { token: tokens.access_token })).status === 200;
    if (!tokens.refresh_token) return { read };
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token).then(
      () => true,
      () => false,
    );
    return { read, refreshed };
  }

  test("a refresh token replayed after the grace, by time: invalid_grant, and the chain ends", async () => {
    const { tokens } = await signedInClient(true);
    const next = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    skew += (GRACE_S + 1) * 1000;
    await expect(oidc.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    await expect(oidc.refreshTokenGrant(config, next.refresh_token!)).rejects.toMatchObject({ error: "invalid_grant" });
    expect((await t.request("GET", `/api/users/${user.id}`, { token: next.access_token })).status).toBe(401);
  });

  test("deactivating the user ends them", async () => {
    const held = await signedInClient(true);
    expect((await t.request("POST", `/api/users/${held.someone.id}/deactivate`, { token: adminToken })).status).toBe(200);
    expect(await stillWorks(held)).toEqual({ read: false, refreshed: false });
  });

  test("deleting the user ends them", async () => {
    const held = await signedInClient(true);
    expect((await t.request("DELETE", `/api/users/${held.someone.id}`, { token: adminToken })).status).toBe(204);
    expect(await stillWorks(held)).toEqual({ read: false, refreshed: false });
  });

  test("a password change ends them", async () => {
    const held = await signedInClient(true);
    const changed = await t.request("POST", "/api/auth/change-password", {
      token: held.sessionToken,
      body: { currentPassword: PASSWORD, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
    });
    expect(changed.status).toBe(200);
    expect(await stillWorks(held)).toEqual({ read: false, refreshed: false });
  });

  test("a password reset ends them", async () => {
    const held = await signedInClient(true);
    // The link's token, as the reset mail carries it.
    const token = await t.database.write((tx) => issueToken(tx, held.someone.id, "PASSWORD_RESET", Date.now() + skew));
    const reset = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } });
    expect(reset.status).toBe(200);
    expect(await stillWorks(held)).toEqual({ read: false, refreshed: false });
  });

  test("without offline_access they end with the provider session (logout); with it they outlive it", async () => {
    const bound = await signedInClient(false);
    const offline = await signedInClient(true);
    for (const held of [bound, offline]) expect((await t.request("POST", "/api/auth/logout", { token: held.sessionToken })).status).toBe(200);
    expect(await stillWorks(bound)).toEqual({ read: false });
    expect(await stillWorks(offline)).toEqual({ read: true, refreshed: true });
  });

  test("end-session as a form POST without the cookie (a cross-site form): the hint's session ends, back to the registered address", async () => {
    const bound = await signedInClient(false);
    const res = await t.app.handle(
      new Request(`${ISSUER}/oauth2/end-session`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ id_token_hint: bound.tokens.id_token!, post_logout_redirect_uri: LOGGED_OUT, state: "p1" }),
      }),
    );
    expect([res.status, res.headers.get("location")]).toEqual([303, `${LOGGED_OUT}?state=p1`]);
    expect(await stillWorks(bound)).toEqual({ read: false });
    // Its browser session ended with it: prompt=none now answers login_required.
    const silent = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT, scope: "openid", prompt: "none", code_challenge: "s".repeat(43), code_challenge_method: "S256" });
    expect(new URL((await follow(silent, bound.cookie)).headers.get("location")!).searchParams.get("error")).toBe("login_required");
  });

  test("without offline_access they end with end-session too", async () => {
    const bound = await signedInClient(false);
    const out = await follow(oidc.buildEndSessionUrl(config, { id_token_hint: bound.tokens.id_token! }), bound.cookie);
    expect(out.status).toBe(200);
    expect(await stillWorks(bound)).toEqual({ read: false });
  });

  test("`usersvc keys rotate --revoke KID` of the provider's RS256 key refuses its client tokens at once (the API and userinfo); a sign-in after gets the new key; the user tokens' ring is untouched", async () => {
    const held = await signedInClient(true);
    const kid = decodeProtectedHeader(held.tokens.access_token).kid as string;
    const sessionKid = decodeProtectedHeader(held.sessionToken).kid as string;
    expect((await oidc.fetchUserInfo(config, held.tokens.access_token, String(held.someone.id))).sub).toBe(String(held.someone.id));
    const [rotated] = await keysRotate(kid);
    expect(rotated).toMatchObject({ revoked: kid });
    expect((await t.request("GET", `/api/users/${held.someone.id}`, { token: held.tokens.access_token })).status).toBe(401);
    await expect(oidc.fetchUserInfo(config, held.tokens.access_token, String(held.someone.id))).rejects.toThrow();
    // The session token's EdDSA key still signs and verifies.
    expect((await t.request("GET", `/api/users/${held.someone.id}`, { token: held.sessionToken })).status).toBe(200);
    const again = await codeFlow(config, held.cookie, "openid users:read");
    expect(decodeProtectedHeader(again.tokens.access_token)).toMatchObject({ alg: "RS256", kid: rotated.kid });
    expect(decodeProtectedHeader(again.tokens.id_token!).kid).toBe(rotated.kid);
    expect((await t.request("GET", `/api/users/${held.someone.id}`, { token: again.tokens.access_token })).status).toBe(200);
    // Without --revoke, both rings publish their next key.
    const both = await keysRotate();
    expect(both.map((r) => r.kid)).not.toContain(sessionKid);
    const stored = await t.db.select().from(signingKeys);
    expect(both.map((r) => stored.find((k) => k.kid === r.kid)?.alg).sort()).toEqual(["ES256", "EdDSA", "EdDSA", "RS256"]);
  });
});

describe("ID tokens signed as the client chose (id_token_signed_response_alg)", () => {
  const ALGS = ["RS256", "ES256", "EdDSA"] as const;
  const jwks = async () => (await (await t.app.handle(new Request(`${ISSUER}/.well-known/jwks.json`))).json()) as { keys: { kid: string; alg: string; use: string }[] };

  test("discovery offers RS256, ES256 and EdDSA; a client created without a choice gets RS256", async () => {
    const discovered = (await (await t.app.handle(new Request(`${ISSUER}/.well-known/openid-configuration`))).json()) as Record<string, unknown>;
    expect(discovered.id_token_signing_alg_values_supported).toEqual([...ALGS]);
    const res = await t.request("POST", "/api/oauth/clients", { token: adminToken, body: { name: "Plain", redirectUris: [REDIRECT] } });
    expect(res.body.idTokenSignedResponseAlg).toBe("RS256");
  });

  for (const alg of ALGS) {
    test(`${alg}: openid-client checks the ID token's signature through discovery and the JWKS; jose verifies it with the published key`, async () => {
      const client = await newClient({ idTokenSignedResponseAlg: alg });
      const listed = await t.request("GET", "/api/oauth/clients", { token: adminToken });
      expect(listed.body.find((c: { clientId: string }) => c.clientId === client.clientId).idTokenSignedResponseAlg).toBe(alg);
      // enableNonRepudiationChecks: the library fetches jwks_uri and verifies the signature (by default it trusts the token endpoint's TLS).
      const config = await oidc.discovery(new URL(ISSUER), client.clientId, { client_secret: client.clientSecret, id_token_signed_response_alg: alg }, undefined, {
        [oidc.customFetch]: viaApp,
        execute: [oidc.allowInsecureRequests, oidc.enableNonRepudiationChecks],
      });
      const { tokens } = await codeFlow(config, await browserCookie(user.email), "openid profile");
      const header = decodeProtectedHeader(tokens.id_token!);
      expect(header).toMatchObject({ alg, typ: "JWT" });
      const published = (await jwks()).keys.find((k) => k.kid === header.kid);
      expect(published).toMatchObject({ alg, use: "sig" });
      const { createLocalJWKSet, jwtVerify } = await import("jose");
      const { payload } = await jwtVerify(tokens.id_token!, createLocalJWKSet(await jwks()), { issuer: ISSUER, audience: client.clientId, algorithms: [alg] });
      expect(payload.sub).toBe(String(user.id));
      // The access token stays RS256 whatever the client chose for its ID tokens, and end-session takes the hint.
      expect(decodeProtectedHeader(tokens.access_token).alg).toBe("RS256");
      const out = await follow(oidc.buildEndSessionUrl(config, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: LOGGED_OUT }));
      expect([out.status, out.headers.get("location")]).toEqual([303, LOGGED_OUT]);
    });
  }

  test("the JWKS publishes a key of each algorithm with its alg and kid; `keys rotate` keeps the old public keys published", async () => {
    const before = (await jwks()).keys.filter((k) => ALGS.includes(k.alg as (typeof ALGS)[number]));
    for (const alg of ALGS) expect(before.some((k) => k.alg === alg && typeof k.kid === "string")).toBe(true);
    const rotated = await keysRotate();
    // The server reads the set again a minute after it last did.
    skew += 61_000;
    const after = (await jwks()).keys.map((k) => k.kid);
    for (const key of before) expect(after).toContain(key.kid);
    for (const { kid } of rotated) expect(after).toContain(kid);
    expect(rotated).toHaveLength(4);
  });

  test("an unknown algorithm: 400 from the admin API, naming it", async () => {
    for (const alg of ["HS256", "none", "PS256"]) {
      const res = await t.request("POST", "/api/oauth/clients", { token: adminToken, body: { name: "Odd", redirectUris: [REDIRECT], idTokenSignedResponseAlg: alg } });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain("idTokenSignedResponseAlg");
    }
  });
});

describe("dynamic registration (OAUTH_DYNAMIC_REGISTRATION=on)", () => {
  let d: TestApp;
  const viaDynamic = ((url: string, options: RequestInit) => d.app.handle(new Request(url, options))) as unknown as typeof fetch;
  const register = (metadata: Record<string, unknown>) =>
    d.app.handle(new Request(`${ISSUER}/oauth2/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(metadata) }));
  beforeAll(async () => {
    d = await makeTestApp({ OAUTH_SERVER: "on", PUBLIC_URL: ISSUER, OAUTH_DYNAMIC_REGISTRATION: "on", OAUTH_REGISTER_MAX_PER_IP: "12" });
  });
  afterAll(() => d.close());

  test("openid-client registers a public client and signs in with PKCE; the consent screen shows every time", async () => {
    const config = await oidc.dynamicClientRegistration(
      new URL(ISSUER),
      { redirect_uris: [REDIRECT], client_name: "Self-registered", token_endpoint_auth_method: "none" },
      oidc.None(),
      { [oidc.customFetch]: viaDynamic, execute: [oidc.allowInsecureRequests] },
    );
    expect(config.serverMetadata().registration_endpoint).toBe(`${ISSUER}/oauth2/register`);
    expect(config.clientMetadata()).toMatchObject({
      client_name: "Self-registered",
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      scope: "openid profile email",
    });
    const someone = await d.createUser({ password: PASSWORD });
    const token = (await d.request("POST", "/api/auth/login", { body: { email: someone.email, password: PASSWORD } })).body.data.token as string;
    const cookie = (await d.app.handle(new Request(`${ISSUER}/oauth2/session`, { method: "POST", headers: { authorization: `Bearer ${token}` } }))).headers
      .get("set-cookie")!
      .split(";")[0];
    for (let round = 0; round < 2; round++) {
      const verifier = oidc.randomPKCECodeVerifier();
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: REDIRECT,
        scope: "openid email",
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: "S256",
      });
      // Consent always: the first time and after it was given.
      expect((await d.app.handle(new Request(String(url), { headers: { cookie } }))).headers.get("location")).toStartWith("/account/authorize?");
      const consented = await d.app.handle(
        new Request(`${ISSUER}/oauth2/interaction`, {
          method: "POST",
          headers: { cookie, "content-type": "application/json" },
          body: JSON.stringify({ query: url.search.slice(1), consent: true }),
        }),
      );
      const back = ((await consented.json()) as { redirectTo: string }).redirectTo;
      const tokens = await oidc.authorizationCodeGrant(config, new URL(back), { pkceCodeVerifier: verifier, idTokenExpected: true });
      expect(tokens.claims()!.sub).toBe(String(someone.id));
    }
  });

  test("refusals: a confidential client, a scope beyond openid profile email, a redirect that is not https or loopback; an authorization error is a page", async () => {
    const refusals = [
      [{ redirect_uris: [REDIRECT], token_endpoint_auth_method: "client_secret_basic" }, "invalid_client_metadata"],
      [{ redirect_uris: [REDIRECT], scope: "openid users:read" }, "invalid_client_metadata"],
      [{ redirect_uris: ["http://app.example.test/cb"] }, "invalid_redirect_uri"],
      [{ redirect_uris: [REDIRECT], id_token_signed_response_alg: "HS256" }, "invalid_client_metadata"],
      [{ redirect_uris: [REDIRECT], id_token_signed_response_alg: 256 }, "invalid_client_metadata"],
    ] as const;
    for (const [metadata, error] of refusals) {
      const res = await register(metadata);
      expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([400, error]);
    }
    const res = await register({ redirect_uris: [REDIRECT] });
    const clientId = ((await res.json()) as { client_id: string }).client_id;
    // No PKCE (a public client must): shown as a page, never sent to the redirect of an app nobody vetted.
    const page = await d.app.handle(new Request(`${ISSUER}/oauth2/authorize?client_id=${clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=openid`));
    expect([page.status, page.headers.get("location")]).toEqual([400, null]);
  });

  test("id_token_signed_response_alg: ES256 or EdDSA registered and answered; RS256 when not given", async () => {
    for (const alg of ["ES256", "EdDSA", undefined]) {
      const res = await register({ redirect_uris: [REDIRECT], ...(alg && { id_token_signed_response_alg: alg }) });
      expect([res.status, ((await res.json()) as { id_token_signed_response_alg: string }).id_token_signed_response_alg]).toEqual([201, alg ?? "RS256"]);
    }
  });

  test("limited per client address: past OAUTH_REGISTER_MAX_PER_IP an hour, 429 with Retry-After", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await register({ redirect_uris: [REDIRECT] })).status);
    expect(statuses.at(-1)).toBe(429);
    const last = await register({ redirect_uris: [REDIRECT] });
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

test("off unless OAUTH_SERVER=on: no discovery, and OAUTH_SERVER=on needs PUBLIC_URL", async () => {
  const off = await makeTestApp();
  try {
    expect((await off.app.handle(new Request("http://localhost/.well-known/openid-configuration"))).status).toBe(401);
    expect((await off.app.handle(new Request("http://localhost/account/authorize"))).status).toBe(401);
    expect(await (await off.app.handle(new Request("http://localhost/account/security"))).text()).not.toContain("data-provider");
    // Registration is off unless OAUTH_DYNAMIC_REGISTRATION=on: the provider has no such route, nor discovery a registration_endpoint.
    expect((await t.app.handle(new Request(`${ISSUER}/oauth2/register`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }))).status).toBe(401);
    expect(await (await t.app.handle(new Request(`${ISSUER}/.well-known/openid-configuration`))).json()).not.toHaveProperty("registration_endpoint");
  } finally {
    await off.close();
  }
  await expect(makeTestApp({ OAUTH_SERVER: "on" })).rejects.toThrow(/PUBLIC_URL/);
});

test("usersvc clients create prints the client id and, once, the secret; list shows no secret", async () => {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-clients-"));
  const main = join(import.meta.dir, "../src/main.ts");
  const run = (...args: string[]) => Bun.spawnSync([process.execPath, main, "clients", ...args], { cwd: dir, env: { PATH: process.env.PATH, LOG_LEVEL: "silent" } });
  try {
    const created = run("create", "--name", "Dash", "--redirect-uri", REDIRECT, "--scopes", "offline_access,users:read");
    expect(created.exitCode).toBe(0);
    const [, clientId, secret] = created.stdout.toString().match(/^client_id: (\S+)\nclient_secret: (\S+) \(shown once\)\n$/)!;
    const listed = run("list").stdout.toString();
    expect(listed).toContain(clientId);
    expect(listed).not.toContain(secret);
    expect(run("create", "--name", "Bad", "--redirect-uri", "nope").exitCode).toBe(2);
    expect(run("create", "--name", "Signed", "--redirect-uri", REDIRECT, "--id-token-alg", "EdDSA").exitCode).toBe(0);
    expect(run("list").stdout.toString()).toMatch(/\tSigned\t.*\tEdDSA\n?$/m);
    const odd = run("create", "--name", "Odd", "--redirect-uri", REDIRECT, "--id-token-alg", "HS256");
    expect([odd.exitCode, odd.stderr.toString()]).toEqual([2, expect.stringContaining("HS256")]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
