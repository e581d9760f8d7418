/** Feature folder oauth-server/: usersvc as an OpenID Provider (OAUTH_SERVER=on; docs/openid-provider.md). */
/**
 * Discovery, /oauth2/* (the protocol: answers and errors as the RFCs shape them, not the API's
 * envelope), the provider's browser session (a cookie only these routes set), the interaction the
 * account pages drive (sign-in, consent), "Apps with access", and /api/oauth/clients (ADMIN).
 */
import { requestQuery } from "../../http/request-url";
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { AppError } from "../../errors";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { escapeHtml } from "../../http/html";
import { bearerToken } from "../../security/guard";
import { consentsOfUser } from "../../store/oauth";
import { clientAddress } from "../../http/client-address";
import { addressCounter } from "../../store/throttle";
import { refuseUntil } from "../../security/password-check";
import { type ClientMetadata, createClient, deleteClientById, listClients, registerClient } from "./clients";
import {
  ClientBody,
  ClientIdParams,
  CreatedClient,
  DiscoveryDocument,
  formBody,
  IntrospectionAnswer,
  OAuthClient,
  OAuthErrorAnswer,
  Onward,
  Page,
  RegisteredClient,
  TokenAnswer,
  UserInfoAnswer,
} from "./model";
import {
  checkedClient,
  withdrawAppConsent,
  checkedRequest,
  endSession,
  introspect,
  issueCode,
  nextStep,
  OAuthError,
  OPEN_SCOPES,
  type ProviderDeps,
  redirectBack,
  revoke,
  signedInSession,
  tokenRequest,
  userinfo,
} from "./service";
import { ID_TOKEN_ALGS, type ProviderTokens } from "./tokens";

/** The routes that read their own (form) body: the body parser leaves them alone. */
export const FORM_ROUTES = ["/oauth2/token", "/oauth2/revoke", "/oauth2/introspect", "/oauth2/end-session"];

const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };
const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...NO_STORE, ...headers } });
const redirect = (location: string) => new Response(null, { status: 303, headers: { location, ...NO_STORE } });

/** A protocol error as JSON (token, revoke, introspect, userinfo). */
const oauthAnswer = (error: unknown) => {
  if (!(error instanceof OAuthError)) throw error;
  const headers: Record<string, string> =
    error.status === 401 ? { "www-authenticate": error.error === "invalid_client" ? 'Basic realm="oauth2"' : `Bearer error="${error.error}"` } : {};
  return json({ error: error.error, error_description: error.description }, error.status, headers);
};

/** An error shown as a page: the redirect URI is unknown, or not to be trusted. */
const errorPage = (error: OAuthError) =>
  new Response(
    `<!doctype html><meta charset="utf-8"><title>Sign-in error</title><h1>This sign-in cannot go on</h1><p>${escapeHtml(error.error)}: ${escapeHtml(error.description)}</p>`,
    { status: 400, headers: { "content-type": "text/html; charset=utf-8", ...NO_STORE, "x-frame-options": "DENY", "content-security-policy": "frame-ancestors 'none'" } },
  );

/** End-session's answers: back to the app's registered address, or a page (signed out, or an error). */
const signedOut = { 200: Page, 303: Onward, 400: Page };
const endSessionDocs = {
  description:
    "OpenID Connect RP-Initiated Logout 1.0 (id_token_hint, post_logout_redirect_uri registered exactly, state, client_id): ends the provider's browser session (or the one the hint names), then 303 back, or a page.",
  ...documentedHeaders({ 303: ["Location"] }),
};

const formOf = async (request: Request) => new URLSearchParams(await request.text());
const queryOf = (request: Request) => Object.fromEntries(new URLSearchParams(requestQuery(request.url))) as Record<string, string | undefined>;

export function oauthServerRoutes(ctx: AppContext, tokens: ProviderTokens) {
  const deps: ProviderDeps = { ctx, tokens };
  const { config } = ctx;
  const secure = tokens.issuer.startsWith("https:");
  // __Host-: Secure, Path=/ and no Domain, so no other host or path can set or shadow it.
  const cookieName = secure ? "__Host-usersvc_op" : "usersvc_op";
  const accountPage = `${config.basePath}/account/authorize`;

  const sessionOf = (request: Request) => {
    const cookie = request.headers.get("cookie") ?? "";
    const value = cookie
      .split(";")
      .map((part) => part.trim())
      .find((part) => part.startsWith(`${cookieName}=`))
      ?.slice(cookieName.length + 1);
    if (!value) return undefined;
    try {
      return ctx.cipher.open(decodeURIComponent(value)).toString("utf8");
    } catch {
      return undefined;
    }
  };
  const cookie = (value: string, maxAge?: number) =>
    `${cookieName}=${encodeURIComponent(value)}; Path=/; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}${maxAge === undefined ? "" : `; Max-Age=${maxAge}`}`;

  /** Authorize's answer for the query: on to the client with a code or an error, or to the account page. */
  async function authorize(query: Record<string, string | undefined>, request: Request, options: { fresh?: boolean; consent?: boolean; deny?: boolean } = {}) {
    let client: Awaited<ReturnType<typeof checkedClient>>;
    try {
      client = await checkedClient(deps, query);
    } catch (error) {
      if (error instanceof OAuthError) return { page: error };
      throw error;
    }
    try {
      const checked = checkedRequest(client.client, client.redirectUri, query);
      // The consent screen's "Deny": the client hears it as RFC 6749's access_denied.
      if (options.deny) throw new OAuthError("access_denied", "the user did not allow this app");
      const session = await signedInSession(deps, sessionOf(request));
      const step = await nextStep(deps, checked, session, options.fresh === true);
      if (step === "issue" || (step === "consent" && options.consent && session)) return { redirect: await issueCode(deps, checked, session!, step === "consent") };
      if (checked.prompt.has("none")) throw new OAuthError(step === "login" ? "login_required" : "consent_required", step === "login" ? "no sign-in" : "consent needed");
      return { step, client: checked.client, scopes: checked.scopes };
    } catch (error) {
      if (!(error instanceof OAuthError)) throw error;
      // An app that registered itself is nobody's to trust with an error on its redirect: a page instead.
      if (client.client.dynamic) return { page: error };
      return { redirect: redirectBack(tokens.issuer, client.redirectUri, { error: error.error, error_description: error.description, state: query.state }) };
    }
  }

  const discovery = {
    issuer: tokens.issuer,
    authorization_endpoint: `${tokens.issuer}/oauth2/authorize`,
    token_endpoint: `${tokens.issuer}/oauth2/token`,
    userinfo_endpoint: `${tokens.issuer}/oauth2/userinfo`,
    jwks_uri: `${tokens.issuer}/.well-known/jwks.json`,
    revocation_endpoint: `${tokens.issuer}/oauth2/revoke`,
    introspection_endpoint: `${tokens.issuer}/oauth2/introspect`,
    end_session_endpoint: `${tokens.issuer}/oauth2/end-session`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token", "client_credentials"],
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: [...ID_TOKEN_ALGS],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
    code_challenge_methods_supported: ["S256"],
    scopes_supported: [
      ...OPEN_SCOPES,
      "offline_access",
      "users:read",
      "users:write",
      "files:read",
      "files:write",
      "orders:read",
      "orders:write",
      "products:read",
      "products:write",
    ],
    claims_supported: ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "amr", "azp", "at_hash", "sid", "name", "email", "email_verified"],
    prompt_values_supported: ["none", "login", "consent"],
    authorization_response_iss_parameter_supported: true,
    ...(config.oauthDynamicRegistration && { registration_endpoint: `${tokens.issuer}/oauth2/register` }),
  };
  const countRegistration = addressCounter("oauth-register", 60 * 60 * 1000);

  /** End-session's answer: the cookie cleared, then back to the app's registered address, or a page. */
  async function signOut(request: Request, params: Record<string, string | undefined>) {
    try {
      const back = await endSession(deps, params, sessionOf(request));
      const headers = { ...NO_STORE, "set-cookie": cookie("", 0) };
      if (back) return new Response(null, { status: 303, headers: { ...headers, location: back } });
      return new Response("<!doctype html><meta charset=utf-8><title>Signed out</title><p>You are signed out.</p>", {
        headers: { ...headers, "content-type": "text/html; charset=utf-8" },
      });
    } catch (error) {
      if (error instanceof OAuthError) return errorPage(error);
      throw error;
    }
  }

  const protocol = new Elysia({ tags: ["OpenID Provider"] })
    .get("/.well-known/openid-configuration", () => json(discovery), {
      response: { 200: DiscoveryDocument },
      detail: {
        summary: "OpenID Provider discovery",
        description: "OpenID Connect Discovery 1.0: the endpoints below, the scopes, ID tokens signed RS256, ES256 or EdDSA as each client registered, PKCE S256.",
      },
    })
    .get(
      "/oauth2/authorize",
      async ({ request }) => {
        const query = queryOf(request);
        const answer = await authorize(query, request);
        if ("page" in answer) return errorPage(answer.page!);
        if (answer.redirect) return redirect(answer.redirect);
        return redirect(`${accountPage}?${requestQuery(request.url)}`);
      },
      {
        response: { 303: Onward, 400: Page },
        detail: {
          summary: "Authorization endpoint (code + PKCE S256)",
          description:
            "A browser navigation (response_type=code, client_id, redirect_uri, scope, state, nonce, code_challenge with S256; prompt none|login|consent, max_age, login_hint): 303 to the account pages to sign in and consent, or back to the registered redirect_uri with code or error, and iss (RFC 9207). An unknown client or redirect URI: a 400 page.",
          ...documentedHeaders({ 303: ["Location"] }),
        },
      },
    )
    .post(
      "/oauth2/interaction",
      async ({ request, body }) => {
        // The account page's step: JSON only (a cross-site form cannot send it), with the cookie.
        const query = Object.fromEntries(new URLSearchParams(body.query)) as Record<string, string | undefined>;
        const answer = await authorize(query, request, { fresh: body.fresh, consent: body.consent, deny: body.deny });
        if ("page" in answer) throw new AppError("OAUTH_REQUEST_INVALID", { reason: answer.page!.description });
        if (answer.redirect) return { redirectTo: answer.redirect };
        return { step: answer.step, client: { name: answer.client!.name }, scopes: answer.scopes! };
      },
      {
        body: t.Object({
          query: t.String({ maxLength: 8192 }),
          fresh: t.Optional(t.Boolean()),
          consent: t.Optional(t.Boolean()),
          deny: t.Optional(t.Boolean()),
        }),
        response: {
          200: t.Object({
            redirectTo: t.Optional(t.String()),
            step: t.Optional(t.String()),
            client: t.Optional(t.Object({ name: t.String() })),
            scopes: t.Optional(t.Array(t.String())),
          }),
          ...errorResponses(400),
        },
        detail: { summary: "The sign-in and consent pages' step of an authorization", description: "For the account pages: JSON only, with the provider's cookie." },
      },
    )
    .post(
      "/oauth2/session",
      async ({ request, set }) => {
        // The account page signed in (any method, with its second step): its session becomes the provider's browser session.
        const caller = await ctx.authenticator.callerOf(request);
        if (!caller?.session || caller.apiKey || caller.enrolOnly) throw new AppError("UNAUTHORIZED");
        set.headers["set-cookie"] = cookie(ctx.cipher.seal(caller.session.id));
        set.status = 204;
      },
      {
        response: { 204: t.Void(), ...errorResponses(401) },
        detail: { summary: "Open the provider's browser session from a sign-in", description: "For the account pages: the bearer's session becomes the provider's cookie." },
      },
    )
    .post(
      "/oauth2/token",
      async ({ request }) => {
        try {
          return json(await tokenRequest(deps, request.headers.get("authorization"), await formOf(request)));
        } catch (error) {
          return oauthAnswer(error);
        }
      },
      {
        response: { 200: TokenAnswer, 400: OAuthErrorAnswer, 401: OAuthErrorAnswer },
        detail: {
          summary: "Token endpoint",
          description:
            "RFC 6749: grant_type authorization_code (with code_verifier), refresh_token (rotated) or client_credentials (clients created with it). The client authenticates with HTTP Basic (client_secret_basic) or client_id and client_secret in the form; a public client sends client_id alone.",
          ...formBody({
            grant_type: { description: "authorization_code, refresh_token or client_credentials", required: true },
            code: { description: "authorization_code: the code" },
            redirect_uri: { description: "authorization_code: the redirect URI of the authorization" },
            code_verifier: { description: "authorization_code: the PKCE verifier" },
            refresh_token: { description: "refresh_token: the refresh token" },
            scope: { description: "client_credentials: the scopes asked for" },
            client_id: { description: "client_secret_post, or a public client" },
            client_secret: { description: "client_secret_post" },
          }),
        },
      },
    )
    .get(
      "/oauth2/userinfo",
      async ({ request }) => {
        try {
          return json(await userinfo(deps, bearerToken(request)));
        } catch (error) {
          return oauthAnswer(error);
        }
      },
      {
        response: { 200: UserInfoAnswer, 401: OAuthErrorAnswer, 403: OAuthErrorAnswer },
        detail: { summary: "UserInfo endpoint", description: "With a client's access token holding openid: sub, and name (profile), email and email_verified (email)." },
      },
    )
    .post(
      "/oauth2/revoke",
      async ({ request }) => {
        try {
          await revoke(deps, request.headers.get("authorization"), await formOf(request));
          return new Response(null, { status: 200, headers: NO_STORE });
        } catch (error) {
          return oauthAnswer(error);
        }
      },
      {
        response: { 200: t.Void({ description: "Revoked, or not a token of this client's (the same answer)" }), 400: OAuthErrorAnswer, 401: OAuthErrorAnswer },
        detail: {
          summary: "Token revocation (RFC 7009)",
          description: "An access or refresh token of the authenticated client ends its grant: every token it issued.",
          ...formBody({
            token: { description: "The token", required: true },
            token_type_hint: { description: "Ignored" },
            client_id: { description: "As at the token endpoint" },
            client_secret: { description: "As at the token endpoint" },
          }),
        },
      },
    )
    .post(
      "/oauth2/introspect",
      async ({ request }) => {
        try {
          return json(await introspect(deps, request.headers.get("authorization"), await formOf(request)));
        } catch (error) {
          return oauthAnswer(error);
        }
      },
      {
        response: { 200: IntrospectionAnswer, 400: OAuthErrorAnswer, 401: OAuthErrorAnswer },
        detail: {
          summary: "Token introspection (RFC 7662)",
          description: "For confidential clients: whether a token of theirs is active, and what it is.",
          ...formBody({
            token: { description: "The token", required: true },
            token_type_hint: { description: "Ignored" },
            client_id: { description: "As at the token endpoint" },
            client_secret: { description: "As at the token endpoint" },
          }),
        },
      },
    )
    // RP-initiated logout, GET or a form POST (OpenID Connect RP-Initiated Logout 1.0 §2 asks for both).
    .get("/oauth2/end-session", ({ request }) => signOut(request, queryOf(request)), { response: signedOut, detail: { summary: "RP-initiated logout", ...endSessionDocs } })
    .post("/oauth2/end-session", async ({ request }) => signOut(request, Object.fromEntries(await formOf(request))), {
      response: signedOut,
      detail: {
        summary: "RP-initiated logout (form POST)",
        ...endSessionDocs,
        ...formBody({
          id_token_hint: { description: "An ID token we issued (expired or not)" },
          post_logout_redirect_uri: { description: "Registered exactly" },
          state: { description: "Given back" },
          client_id: { description: "The client" },
        }),
      },
    });

  // OAUTH_DYNAMIC_REGISTRATION=on: RFC 7591, open, limited per client address.
  const registration = new Elysia({ tags: ["OpenID Provider"] }).post(
    "/oauth2/register",
    async ({ request, server, body }) => {
      const now = ctx.now();
      const { requests, endsAt } = await countRegistration(ctx.db, clientAddress(server, request, config.trustProxy), now);
      if (requests > config.oauthRegisterMaxPerIp) refuseUntil(endsAt, now);
      try {
        return json(await registerClient(ctx, (body ?? {}) as ClientMetadata), 201);
      } catch (error) {
        return oauthAnswer(error);
      }
    },
    {
      response: { 201: RegisteredClient, 400: OAuthErrorAnswer, ...errorResponses(429) },
      detail: {
        summary: "Dynamic client registration (RFC 7591)",
        description:
          "Only with OAUTH_DYNAMIC_REGISTRATION=on: a public client (PKCE) for openid profile email, consent always shown; OAUTH_REGISTER_MAX_PER_IP an hour per client address.",
      },
    },
  );

  const apps = new Elysia({ tags: ["OpenID Provider"] })
    .use(ctx.auth)
    .get(
      "/api/account/apps",
      async ({ caller }) =>
        (await consentsOfUser(ctx.db, caller.id)).map((row) => ({ clientId: row.clientId, name: row.name, scopes: row.scopes.split(","), createdAt: row.createdAt.toISOString() })),
      {
        access: { allow: "authenticated" },
        response: { 200: t.Array(t.Object({ clientId: t.String(), name: t.String(), scopes: t.Array(t.String()), createdAt: t.String() })), ...errorResponses(401, 403) },
        detail: { summary: "Apps with access: the clients the caller consented to" },
      },
    )
    .delete(
      "/api/account/apps/:clientId",
      async ({ caller, params, set }) => {
        await withdrawAppConsent(ctx, caller.id, params.clientId);
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        params: ClientIdParams,
        response: { 204: t.Void(), ...errorResponses(401, 403, 404) },
        detail: { summary: "Withdraw consent from an app", description: "Ends every token the app holds for the caller; its next sign-in asks again." },
      },
    )
    .post(
      "/api/oauth/clients",
      async ({ body, set }) => {
        set.status = 201;
        return createClient(ctx, body);
      },
      {
        access: { allow: "ADMIN" },
        body: ClientBody,
        response: { 201: CreatedClient, ...errorResponses(400, 401, 403) },
        detail: { summary: "Register a client (an app that signs its users in through usersvc)", description: "clientSecret is in this answer only (confidential clients)." },
      },
    )
    .get("/api/oauth/clients", () => listClients(ctx), {
      access: { allow: "ADMIN" },
      response: { 200: t.Array(OAuthClient), ...errorResponses(401, 403) },
      detail: { summary: "The registered clients" },
    })
    .delete(
      "/api/oauth/clients/:clientId",
      async ({ params, set }) => {
        await deleteClientById(ctx, params.clientId);
        set.status = 204;
      },
      {
        access: { allow: "ADMIN" },
        params: ClientIdParams,
        response: { 204: t.Void(), ...errorResponses(401, 403, 404) },
        detail: { summary: "Delete a client", description: "Its consents, grants and every token it holds end with it." },
      },
    );

  return new Elysia({ name: "oauth-server" })
    .use(protocol)
    .use(config.oauthDynamicRegistration ? registration : new Elysia())
    .use(apps);
}
