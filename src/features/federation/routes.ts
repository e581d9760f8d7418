/** Feature folder federation/: sign-in with other providers (OpenID Connect, GitHub) and the identities linked to an account. */
/**
 * /api/auth/oidc (open: the browser's way through a provider, and the page's exchange) and
 * /api/account/identities (the caller's linked identities), /api/users/{id}/identities (ADMIN).
 */
import { Elysia, t, type TSchema } from "elysia";
import { translate } from "../../catalogue";
import type { AppContext } from "../../context";
import { routeSamples, type Walk } from "../../http/route-sample";
import { EnvelopeOf } from "../../envelope";
import { clientAddress } from "../../http/client-address";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { languageOf } from "../../i18n";
import { UserIdParams, userId } from "../../models/user";
import { deviceOf } from "../../security/device-label";
import { StepUp } from "../../models/step-up";
import { checkedStepUp } from "../../security/step-up";
import type { FederationDeps, SignInPort } from "./deps";
import { completeCallback, completeLink, completeStepUp, exchangeCode, providerOf, startFlow, startStepUp } from "./flow";
import { identitiesOfUser, identityOf, listIdentities, unlinkIdentity } from "./identities";
import { CodeExchangeBody, Identity, LinkStartBody, ProviderButton, ProviderParams, Redirect, StartQuery, StepUpStartBody } from "./model";
import { connectionsOf } from "./providers";
import { identitiesOf } from "../../store/identities";

/** The page's exchange: CORS answers the origins of OIDC_RETURN_URLS here (app.ts), a page elsewhere redeeming its code. */
export const EXCHANGE_PATH = "/api/auth/oidc/exchange";

const langOf = (request: Request) => languageOf(request.headers.get("accept-language"));
const redirect = { 302: t.Void({ description: "A redirect (Location)" }) };

/** `signIn`: the sign-in's end and the schema of its answer (the login answer), from app.ts. */
export function federationRoutes(ctx: AppContext, signIn: SignInPort & { answer: TSchema }) {
  const { federation } = ctx.config;
  const providers = federation?.providers ?? [];
  const labels = new Map(providers.map((p) => [p.name, p.label]));
  const deps: FederationDeps = {
    db: ctx.db,
    now: ctx.now,
    cipher: ctx.cipher,
    config: { ...ctx.config, federation: federation ?? { providers: [], signup: false } },
    connections: connectionsOf(providers),
    signIn,
  };
  const addressOf = (request: Request, server: Parameters<typeof clientAddress>[0]) => clientAddress(server, request, ctx.config.trustProxy);

  const auth = new Elysia({ prefix: "/api/auth/oidc", tags: ["Sign-in with other providers"] })
    .use(routeSamples)
    .get("/providers", () => providers.map(({ name, label, kind }) => ({ name, label, stepUp: kind === "oidc" })), {
      sample: () => ({ path: "/api/auth/oidc/providers", token: undefined, status: 200 }),
      response: { 200: t.Array(ProviderButton) },
      detail: {
        summary: "The providers a sign-in page offers",
        description: "OIDC_PROVIDERS in order: a button per provider (Sign in with label); stepUp: whether it can confirm a fresh sign-in for a step-up.",
      },
    })
    .get(
      "/:provider/start",
      async ({ params, query, request, server, set }) => {
        set.status = 302;
        set.headers.location = await startFlow(deps, params.provider, query, request, addressOf(request, server));
      },
      {
        // No provider is configured in the walk: the flow's routes refuse or send the browser back (test/federation.test.ts walks them).
        sample: () => ({ path: `/api/auth/oidc/corp/start?returnTo=%2Faccount&codeChallenge=${"c".repeat(43)}`, token: undefined, status: 404 }),
        params: ProviderParams,
        query: StartQuery,
        response: { ...redirect, ...errorResponses(400, 404, 429, 503) },
        detail: {
          summary: "Begin a sign-in at a provider",
          description: `A browser navigation: 302 to the provider with state, nonce and PKCE (S256), kept 10 minutes, single use. The page keeps the verifier of codeChallenge for POST /api/auth/oidc/exchange. A provider that cannot be reached: 302 to returnTo with #error=PROVIDER_UNAVAILABLE. 400 INVALID_RETURN_URL; 404 PROVIDER_NOT_FOUND; 429 past OIDC_START_MAX_PER_IP starts a minute per client address.`,
          ...documentedHeaders({ 302: ["Location"] }),
        },
      },
    )
    .get(
      "/:provider/callback",
      async ({ params, request, server, set }) => {
        set.status = 302;
        set.headers.location = await completeCallback(deps, params.provider, request, addressOf(request, server));
      },
      {
        sample: () => ({ path: "/api/auth/oidc/corp/callback?state=unknown", token: undefined, status: 302 }),
        params: ProviderParams,
        response: { ...redirect, ...errorResponses(400, 404, 503) },
        detail: {
          summary: "The provider's answer (the redirect URI to register)",
          description:
            "Checks state, exchanges the code, verifies the ID token (signature by the provider's JWKS, iss, aud, exp, nonce) and userinfo's sub, then finds, links or makes the account. 302 to returnTo with #code=… (60 s, single use; for POST /api/auth/oidc/exchange), or #error=CODE: PROVIDER_DENIED, PROVIDER_REJECTED, PROVIDER_UNAVAILABLE, ACCOUNT_EXISTS, SIGNUP_DISABLED, VERIFICATION_SENT (a new account whose address the provider did not verify: confirm our mail first), TOO_MANY_REQUESTS; an unknown, used or expired state: to /account with #error=INVALID_OIDC_STATE.",
          ...documentedHeaders({ 302: ["Location"] }),
        },
      },
    )
    .post(
      "/exchange",
      async ({ body, request, server }) => {
        const answer = await exchangeCode(deps, body, { address: addressOf(request, server), ...(await deviceOf(request)) });
        return ctx.ok(answer, translate(typeof answer === "object" && answer && "mfaRequired" in answer ? "auth.mfaRequired" : "auth.loggedIn", langOf(request)));
      },
      {
        sample: () => ({ path: "/api/auth/oidc/exchange", token: undefined, body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 }),
        body: CodeExchangeBody,
        response: { 200: EnvelopeOf(signIn.answer), ...errorResponses(400, 401, 403, 429, 503) },
        detail: {
          summary: "Turn the fragment's code into the login answer",
          description:
            "{code, codeVerifier}: only the verifier whose S256 challenge began the flow redeems the code (used up either way). The login answer (amr fed), or MfaRequired for an account with a second factor (then POST /api/auth/login/mfa). 401 INVALID_OIDC_CODE; 403 ACCOUNT_DISABLED; 429 while the e-mail is locked out from this network. CORS answers the origins of OIDC_RETURN_URLS here (a page elsewhere redeems its code), besides CORS_ORIGINS.",
        },
      },
    );

  const account = new Elysia({ tags: ["Sign-in with other providers"] })
    .use(ctx.auth)
    .get("/api/account/identities", ({ caller }) => listIdentities(ctx.db, caller.id, labels), {
      access: { allow: "authenticated" },
      sample: () => ({ path: "/api/account/identities", status: 200 }),
      response: { 200: t.Array(Identity), ...errorResponses(401, 503) },
      detail: { summary: "The caller's linked sign-ins", description: "Oldest first: provider, the e-mail it gave, linked at, last used." },
    })
    .post(
      "/api/account/identities/:provider/start",
      async ({ caller, params, body, request, server }) => {
        providerOf(deps, params.provider);
        await ctx.db.write(checkedStepUp(ctx, caller, body.stepUpToken));
        return { url: await startFlow(deps, params.provider, body, request, addressOf(request, server), { linkTo: caller.id }) };
      },
      {
        access: { allow: "authenticated" },
        sample: () => ({ path: "/api/account/identities/corp/start", body: { returnTo: "/account/security", codeChallenge: "c".repeat(43), stepUpToken: "not-one" }, status: 404 }),
        params: ProviderParams,
        body: LinkStartBody,
        response: { 200: Redirect, ...errorResponses(400, 401, 403, 404, 429, 503) },
        detail: {
          summary: "Begin linking a provider to the caller's account",
          description:
            "Needs a step-up first: {stepUpToken} from POST /api/account/step-up or from a fresh sign-in at another linked provider (403 INVALID_STEP_UP when wrong, used, expired or another session's). The browser goes to url; the provider's answer comes back to returnTo with #code=…, which POST /api/account/identities/link redeems with the verifier. 409 IDENTITY_IN_USE (in the fragment) when another account holds that identity.",
        },
      },
    )
    .post(
      "/api/account/identities/link",
      async ({ caller, body, set }) => {
        const id = await completeLink(deps, caller, body);
        set.status = 201;
        const row = (await identitiesOf(ctx.db, caller.id)).find((r) => r.id === id);
        return identityOf(row!, labels);
      },
      {
        access: { allow: "authenticated" },
        sample: () => ({ path: "/api/account/identities/link", body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 }),
        body: CodeExchangeBody,
        response: { 201: Identity, ...errorResponses(400, 401, 409, 503) },
        detail: { summary: "Complete a link with the fragment's code and the page's verifier", description: "Mails IDENTITY_LINKED. 401 INVALID_OIDC_CODE; 409 IDENTITY_IN_USE." },
      },
    )
    .delete(
      "/api/account/identities/:id",
      async ({ caller, params, set }) => {
        await unlinkIdentity(ctx, caller, userId(params));
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: () => ({ path: "/api/account/identities/999999", status: 404 }),
        params: UserIdParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 404, 409, 503) },
        detail: {
          summary: "Unlink one of the caller's sign-ins",
          description: "The identity no longer signs in. 409 LAST_SIGN_IN_METHOD when the account would have no password, passkey or other identity left; 404 IDENTITY_NOT_FOUND.",
        },
      },
    )
    .post(
      "/api/account/step-up/:provider/start",
      async ({ caller, params, body, request, server }) => ({ url: await startStepUp(deps, caller, params.provider, body, request, addressOf(request, server)) }),
      {
        access: { allow: "authenticated" },
        sample: () => ({ path: "/api/account/step-up/corp/start", body: { returnTo: "/account/security", codeChallenge: "c".repeat(43) }, status: 404 }),
        params: ProviderParams,
        body: StepUpStartBody,
        response: { 200: Redirect, ...errorResponses(400, 401, 403, 404, 429, 503) },
        detail: {
          summary: "Confirm it is you at a linked provider: begin a step-up",
          description:
            "For an account without a password (or any): the provider is asked for a fresh sign-in (prompt=login, max_age=0); its auth_time must be later than this request. The browser goes to url; the answer comes back to returnTo with #code=…, which POST /api/account/step-up/exchange turns into a step-up token; or #error=IDENTITY_NOT_LINKED when the provider account signed in is not one linked to the caller, PROVIDER_REJECTED when the provider did not prove a fresh sign-in. 404 IDENTITY_NOT_FOUND when no identity of the caller's is at that provider; 400 STEP_UP_NOT_SUPPORTED for GitHub (no proof of a fresh sign-in).",
        },
      },
    )
    .post("/api/account/step-up/exchange", ({ caller, body }) => completeStepUp(deps, caller, body), {
      access: { allow: "authenticated" },
      sample: () => ({ path: "/api/account/step-up/exchange", body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 }),
      body: CodeExchangeBody,
      response: { 200: StepUp, ...errorResponses(400, 401, 403, 503) },
      detail: {
        summary: "Turn a step-up's code into a step-up token",
        description: "{code, codeVerifier} from the fragment and the page: a step-up token (method fed), single use, 5 minutes, this session's. 401 INVALID_OIDC_CODE.",
      },
    })
    .get("/api/users/:id/identities", ({ params }) => identitiesOfUser(ctx.db, userId(params), labels), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.admin.id}/identities`, status: 200 }),
      params: UserIdParams,
      response: { 200: t.Array(Identity), ...errorResponses(400, 401, 403, 404, 503) },
      detail: { summary: "A user's linked sign-ins" },
    });

  return new Elysia().use(auth).use(account);
}
