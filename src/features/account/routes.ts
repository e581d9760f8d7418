/** Feature folder account/: e-mail verification and password reset: their /api/auth routes, service and the two /account pages. */
/**
 * Account e-mail over HTTP: the verification and password-reset routes under /api/auth
 * (envelopes, like the rest of /api/auth) and the open pages under /account that complete the
 * flows in a browser.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { EnvelopeOf } from "../../envelope";
import { errorResponses } from "../../http/route-docs";
import { clientAddress } from "../../http/client-address";
import { requestQuery } from "../../http/request-url";
import { pageHeaders } from "../../http/security-headers";
import { translate } from "../../catalogue";
import { languageOf } from "../../i18n";
import { User } from "../../models/user";
import { withPasswordPolicy } from "../../security/password-policy";
import { ResetConfirmBody, ResetRequestBody, TokenBody } from "./model";
import { AppError } from "../../errors";
import { assetAnswer } from "../../http/page-bundle";
import { accountAssets } from "./bundle";
import { ACCOUNT_PAGE_POLICY, renderAccountPage, renderAppShell, renderSetupUnavailable, script, styles, type AccountPage, type AppPage } from "./page";
import { confirmPasswordReset, confirmVerification, requestPasswordReset, requestVerification, setupLinkState } from "./service";
import { routeSamples } from "../../http/route-sample";

const langOf = (request: Request) => languageOf(request.headers.get("accept-language"));
// Every route here writes: a busy database answers 503 with Retry-After.

const apiRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/auth", tags: ["Account e-mail"] })
    .use(ctx.auth)
    .post(
      "/verify-email/request",
      async ({ caller, request }) => {
        const sent = await requestVerification(ctx, caller);
        return ctx.ok(null, translate(sent ? "account.verificationSent" : "account.alreadyVerified", langOf(request)));
      },
      {
        access: { allow: "authenticated" },
        sample: () => ({ path: "/api/auth/verify-email/request", status: 200 }),
        response: { 200: EnvelopeOf(t.Null(), "Empty"), ...errorResponses(401, 503) },
        detail: {
          summary: "Send the caller a verification e-mail",
          description: "The mail's link (or code, without PUBLIC_URL) works once, for 24 hours. Nothing is sent to an address that is verified already.",
        },
      },
    )
    .post("/verify-email/confirm", async ({ body, request }) => ctx.ok(await confirmVerification(ctx, body.token), translate("account.verified", langOf(request))), {
      // A token only a mail carries: the refusal is what can be read here.
      sample: () => ({ path: "/api/auth/verify-email/confirm", body: { token: "a".repeat(43) }, token: undefined, status: 400 }),
      body: TokenBody,
      response: { 200: EnvelopeOf(User), ...errorResponses(400, 503) },
      detail: {
        summary: "Confirm an e-mail address with the token from its mail",
        description: "data is the User, emailVerified true. 400 INVALID_TOKEN for an unknown, used or expired token.",
      },
    })
    .post(
      "/password-reset/request",
      async ({ body, request, server }) => {
        await requestPasswordReset(ctx, body.email, clientAddress(server, request, ctx.config.trustProxy));
        return ctx.ok(null, translate("account.resetRequested", langOf(request)));
      },
      {
        sample: () => ({ path: "/api/auth/password-reset/request", body: { email: "mei.lin@example.com" }, token: undefined, status: 200 }),
        body: ResetRequestBody,
        response: { 200: EnvelopeOf(t.Null(), "Empty"), ...errorResponses(400, 429, 503) },
        detail: {
          summary: "Mail a password-reset link",
          description:
            "The same answer whether or not an account uses the address. Limited per e-mail (RESET_MAX_REQUESTS) and per client address (RESET_MAX_REQUESTS_PER_IP) an hour: 429 with Retry-After; login's counters are never touched.",
        },
      },
    )
    .post(
      "/password-reset/confirm",
      async ({ body, request }) => {
        await confirmPasswordReset(ctx, body);
        return ctx.ok(null, translate("account.passwordReset", langOf(request)));
      },
      {
        sample: () => ({
          path: "/api/auth/password-reset/confirm",
          body: { token: "a".repeat(43), newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
          token: undefined,
          status: 400,
        }),
        body: withPasswordPolicy(ResetConfirmBody, ctx.config.passwordPolicy),
        response: { 200: EnvelopeOf(t.Null(), "Empty"), ...errorResponses(400, 503) },
        detail: {
          summary: "Set a new password with the token from a reset mail",
          description:
            "Registration's password rules. Revokes every earlier token of the user (bearer and e-mail), marks the address verified and mails PASSWORD_CHANGED. 400 INVALID_TOKEN for an unknown, used or expired token.",
        },
      },
    );

const PAGE_HEADERS = pageHeaders(ACCOUNT_PAGE_POLICY);
const asset = (body: string, type: string) => () => new Response(body, { headers: { "content-type": type, "cache-control": "public, max-age=3600" } });
const hidden = { detail: { hide: true } };

const pageRoutes = (ctx: AppContext) => {
  const { basePath, passwordPolicy: policy } = ctx.config;
  const page =
    (name: AccountPage) =>
    ({ request }: { request: Request }) =>
      new Response(renderAccountPage(name, langOf(request), basePath, policy), { headers: PAGE_HEADERS });
  const appPage = async (name: AppPage, request: Request) =>
    new Response(renderAppShell(name, langOf(request), basePath, await accountAssets(), policy, ctx.config.oauthServer), { headers: PAGE_HEADERS });
  const html = t.String({ description: "An HTML page", contentMediaType: "text/html" });
  const shown = (summary: string) => ({ response: { 200: html }, detail: { summary } });
  // The setup link's page only while its token can make the first ADMIN; else a page saying why and what to do instead.
  const setupPage = async (request: Request) => {
    const state = await setupLinkState(ctx, new URLSearchParams(requestQuery(request.url)).get("token"));
    if (state === "live") return appPage("setup", request);
    return new Response(renderSetupUnavailable(state, langOf(request), basePath), { status: state === "none" ? 404 : 410, headers: PAGE_HEADERS });
  };
  return (
    new Elysia({ prefix: "/account", tags: ["Account e-mail"] })
      .use(routeSamples)
      .get("", ({ request }) => appPage("sign-in", request), {
        ...shown("Sign in (password, passkey or another provider), then on to /account/security"),
        sample: () => ({ path: "/account", token: undefined, status: 200 }),
      })
      .get("/verify-email", page("verify-email"), {
        ...shown("The page a verification mail links to (?token=…)"),
        sample: () => ({ path: "/account/verify-email", token: undefined, status: 200 }),
      })
      .get("/reset-password", page("reset-password"), {
        ...shown("The page a password-reset mail links to (?token=…)"),
        sample: () => ({ path: "/account/reset-password", token: undefined, status: 200 }),
      })
      .get("/security", ({ request }) => appPage("security", request), {
        ...shown("Sign in and manage sessions, the authenticator app, recovery codes, passkeys, API keys and apps with access"),
        sample: () => ({ path: "/account/security", token: undefined, status: 200 }),
      })
      // OAUTH_SERVER=on: where /oauth2/authorize sends the browser to sign in and consent (its query carries the request).
      .use((app) =>
        ctx.config.oauthServer
          ? app.get("/authorize", ({ request }) => appPage("authorize", request), shown("Sign in and consent for an app (the OpenID Provider's authorization request)"))
          : app,
      )
      .get("/setup", ({ request }) => setupPage(request), {
        // An ADMIN exists in the walk: the page says setup is complete (410).
        sample: () => ({ path: "/account/setup", token: undefined, status: 410 }),
        response: { 200: html, 404: html, 410: html, ...errorResponses(503) },
        detail: {
          summary: "The first-run page the setup link opens (?token=…): it makes the first ADMIN",
          description:
            "200 the setup page while the token is the live one and no ADMIN exists (looking spends nothing); 410 a page saying why not (used, expired or replaced: run `usersvc setup-link`; an ADMIN exists: sign in at /admin); 404 without a token while no ADMIN exists.",
        },
      })
      .get("/assets/account.js", asset(script, "text/javascript; charset=utf-8"), {
        ...hidden,
        sample: () => ({ path: "/account/assets/account.js", token: undefined, status: 200 }),
      })
      .get("/assets/account.css", asset(styles, "text/css; charset=utf-8"), { ...hidden, sample: () => ({ path: "/account/assets/account.css", token: undefined, status: 200 }) })
      .get(
        "/assets/:name",
        async ({ params, request }) => {
          const answer = assetAnswer(await accountAssets(), params.name, request);
          if (!answer) throw new AppError("NOT_FOUND");
          return answer;
        },
        {
          params: t.Object({ name: t.String({ maxLength: 20 }) }),
          ...hidden,
          sample: () => ({
            path: "/account/assets/app.js",
            token: undefined,
            status: 200,
            holdsPrivateData: "the page's script names WebAuthn's publicKey option: code, not a stored key",
          }),
        },
      )
  );
};

export const accountRoutes = (ctx: AppContext) => new Elysia().use(apiRoutes(ctx)).use(pageRoutes(ctx));
