/** Feature folder auth/: registration, login, refresh, logout and password change under /api/auth, and the ADMIN bootstrap. */
/**
 * /api/auth: registration and sessions (open in the access table: the session routes
 * authenticate their bearer through the guard themselves). Answers are envelopes.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { routeSamples, type Walk } from "../../http/route-sample";
import { EnvelopeOf } from "../../envelope";
import { errorResponses } from "../../http/route-docs";
import { translate } from "../../catalogue";
import { languageOf } from "../../i18n";
import { User } from "../../models/user";
import {
  ChangePasswordBody,
  LoginAnswer,
  LoginBody,
  LoginMfaBody,
  LogoutQuery,
  PasskeyRequestOptions,
  PasskeySignInBody,
  RefreshBody,
  RegistrationBody,
  SetupBody,
  SetupStatus,
  TokenResponse,
  ValidateEmailQuery,
} from "./model";
import { clientAddress } from "../../http/client-address";
import { deviceOf } from "../../security/device-label";
import { callerOutsideGuard, unauthorized } from "../../security/guard";
import { withPasswordPolicy } from "../../security/password-policy";
import { emailAvailable, register } from "./register";
import { changePassword, login, logout, refresh, refreshWithToken } from "./service";
import { completeSecondStep, passkeySignIn, passkeySignInOptions } from "./second-step";
import { countEmailCheck, countPasskeyOptions, countRegistration } from "./address-limits";
import { completeSetup, setupPending } from "./first-run";

/** Registration sends null for "not given", nested ones too; dropping them keeps one schema. */
function dropNulls(value: unknown) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, field] of Object.entries(value)) {
    if (field === null) delete (value as Record<string, unknown>)[key];
    else dropNulls(field);
  }
}

/** Where a sign-in comes from: the client address, and the device its user agent names. */
const signInClientOf = (trustProxy: number) => async (request: Request, server: Parameters<typeof clientAddress>[0]) => ({
  address: clientAddress(server, request, trustProxy),
  ...(await deviceOf(request)),
});
const langOf = (request: Request) => languageOf(request.headers.get("accept-language"));
// Open routes that read the database: a busy one answers 503 with Retry-After.
const errors = errorResponses(400, 401, 403, 409, 429, 503);

export const authRoutes = (ctx: AppContext, signInClient = signInClientOf(ctx.config.trustProxy)) =>
  new Elysia({ prefix: "/api/auth", tags: ["Authentication"] })
    .use(ctx.auth)
    .post(
      "/register",
      async ({ body, request, server, set }) => {
        await countRegistration(ctx, clientAddress(server, request, ctx.config.trustProxy), ctx.config.registerMaxPerIp);
        const user = await register(ctx, body, langOf(request));
        set.status = 201;
        return ctx.ok(user, translate("auth.registered", langOf(request)));
      },
      {
        sample: (walk: Walk) => ({ path: "/api/auth/register", body: walk.registration("second@example.com"), token: undefined, status: 201 }),
        body: withPasswordPolicy(RegistrationBody, ctx.config.passwordPolicy),
        transform: ({ body }) => dropNulls(body),
        response: { 201: EnvelopeOf(User), ...errors },
        detail: {
          summary: "Register an account",
          description: "Every violated rule is listed at once. The new user has role USER. 429: REGISTER_MAX_PER_IP.",
        },
      },
    )
    .get(
      "/validate-email",
      async ({ query, request, server }) => {
        await countEmailCheck(ctx, clientAddress(server, request, ctx.config.trustProxy), ctx.config.emailCheckMaxPerIp);
        const free = await emailAvailable(ctx.db, query.email);
        return ctx.ok(free, translate(free ? "auth.emailAvailable" : "auth.emailTaken", langOf(request)));
      },
      {
        sample: (walk: Walk) => ({ path: `/api/auth/validate-email?email=${walk.registered.email}`, status: 200 }),
        query: ValidateEmailQuery,
        response: { 200: EnvelopeOf(t.Boolean(), "Boolean"), ...errorResponses(400, 429, 503) },
        detail: {
          summary: "Whether an e-mail is free",
          description: "data is true when no account uses the address. 429: EMAIL_CHECK_MAX_PER_IP.",
        },
      },
    )
    .post(
      "/login",
      async ({ body, request, server }) => {
        const answer = await login(ctx, body, await signInClient(request, server));
        return ctx.ok(answer, translate("mfaRequired" in answer ? "auth.mfaRequired" : "auth.loggedIn", langOf(request)));
      },
      {
        sample: (walk: Walk) => ({ path: "/api/auth/login", body: { email: walk.registered.email, password: "Passw0rd!" }, token: undefined, status: 200 }),
        body: LoginBody,
        response: { 200: EnvelopeOf(LoginAnswer), ...errors },
        detail: {
          summary: "Exchange e-mail and password for a bearer token",
          description:
            "Opens a session. For an account with a second factor the answer is MfaRequired instead (no token): complete it with POST /api/auth/login/mfa. 401 INVALID_CREDENTIALS for a wrong e-mail or password alike; 403 ACCOUNT_DISABLED; 429 with Retry-After after too many failures.",
        },
      },
    )
    .post(
      "/login/mfa",
      async ({ body, request, server }) => ctx.ok(await completeSecondStep(ctx, body, await signInClient(request, server)), translate("auth.loggedIn", langOf(request))),
      {
        sample: (walk: Walk) => ({ path: "/api/auth/login/mfa", token: undefined, body: { mfaToken: walk.mfa.totp.mfaToken, code: walk.mfa.totp.recoveryCode }, status: 200 }),
        body: LoginMfaBody,
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "Complete a sign-in with its second factor",
          description:
            "{mfaToken, code} (a TOTP code or a recovery code) or {mfaToken, passkey} (an assertion for the login answer's passkeyOptions): the login answer. 401 INVALID_MFA_CODE for a wrong code or a used, expired or burnt mfaToken (5 wrong codes burn it; each counts in the login throttle: 429).",
        },
      },
    )
    .post(
      "/passkey/options",
      async ({ request, server }) => {
        await countPasskeyOptions(ctx, clientAddress(server, request, ctx.config.trustProxy), ctx.config.passkeyOptionsMaxPerIp);
        return ctx.ok(await passkeySignInOptions(ctx), translate("auth.passkeyOptions", langOf(request)));
      },
      {
        sample: () => ({ path: "/api/auth/passkey/options", token: undefined, status: 200 }),
        response: { 200: EnvelopeOf(PasskeyRequestOptions), ...errors },
        detail: {
          summary: "Start a passwordless sign-in with a passkey",
          description:
            "WebAuthn request options (discoverable credentials, user verification required); the challenge lives 5 minutes. 400 PASSKEYS_NOT_CONFIGURED without PUBLIC_URL or RP_ID; 429 with Retry-After past PASSKEY_OPTIONS_MAX_PER_IP a minute per client address.",
        },
      },
    )
    .post(
      "/passkey",
      async ({ body, request, server }) => ctx.ok(await passkeySignIn(ctx, body, await signInClient(request, server)), translate("auth.loggedIn", langOf(request))),
      {
        sample: (walk: Walk) => ({ path: "/api/auth/passkey", token: undefined, body: { response: walk.mfa.passkeyAssertion }, status: 200 }),
        body: PasskeySignInBody,
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "Sign in with a passkey alone",
          description:
            "The assertion for POST /api/auth/passkey/options' challenge: the login answer (amr hwk). 401 INVALID_PASSKEY for an unknown credential, a used challenge, a wrong signature, no user verification or a signature counter that went backwards (audited PASSKEY_COUNTER_REGRESSION).",
        },
      },
    )
    .post(
      "/refresh",
      async ({ body, request }) => {
        if (body?.refreshToken !== undefined) return ctx.ok(await refreshWithToken(ctx, body.refreshToken), translate("auth.refreshed", langOf(request)));
        // Old clients: the bearer alone, checked as the guard checks any route's (never an API key's).
        const caller = await callerOutsideGuard(ctx.authenticator, request, ctx.config.basePath);
        if (!caller) throw unauthorized();
        return ctx.ok(await refresh(ctx, caller), translate("auth.refreshed", langOf(request)));
      },
      {
        sample: () => ({ path: "/api/auth/refresh", status: 200 }),
        body: t.Optional(RefreshBody),
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "A new pair for {refreshToken}, or a fresh token for the bearer",
          description:
            "A body naming refreshToken rotates it: a spent one answers once more within REFRESH_REUSE_GRACE_S; later it ends its session. Any other body (none, {}, the old clients' {token}) refreshes the bearer instead.",
          security: [{ bearerAuth: [] }, {}],
        },
      },
    )
    .post(
      "/logout",
      async ({ caller, query, request }) => {
        const all = query.scope === "all" || !caller.session;
        await logout(ctx, caller, all);
        return ctx.ok(null, translate(all ? "auth.loggedOut" : "auth.loggedOutSession", langOf(request)));
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/auth/logout", token: walk.leaving, status: 200 }),
        query: LogoutQuery,
        response: { 200: EnvelopeOf(t.Null(), "Empty"), ...errors },
        detail: {
          summary: "End the caller's session",
          description: "?scope=all (or a token without sid): every session and token.",
        },
      },
    )
    .post(
      "/change-password",
      async ({ caller, body, request, server }) =>
        ctx.ok(await changePassword(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy)), translate("auth.passwordChanged", langOf(request))),
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({
          path: "/api/auth/change-password",
          body: { currentPassword: "Passw0rd!", newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
          token: walk.changing,
          status: 200,
        }),
        body: withPasswordPolicy(ChangePasswordBody, ctx.config.passwordPolicy),
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "Change the caller's password",
          description: "Revokes every earlier token and every other session; answers a new pair. A wrong currentPassword is a 400 on that field, throttled like a login.",
        },
      },
    );

/** First run (open): whether the first ADMIN is still to be made, and making it with the one-time setup token. */
export const firstRunRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/account/setup", tags: ["Authentication"] })
    .use(routeSamples)
    .get("", async () => ({ setupRequired: await setupPending(ctx.db, ctx.config) }), {
      sample: () => ({ path: "/api/account/setup", token: undefined, status: 200 }),
      response: { 200: SetupStatus, ...errorResponses(503) },
      detail: {
        summary: "Whether the first ADMIN is still to be made",
        description: "True while no ADMIN exists and ADMIN_EMAIL is unset: the server wrote a one-time setup link to its stderr (`usersvc setup-link` prints a fresh one).",
      },
    })
    .post(
      "",
      async ({ body, request, server, set }) => {
        const client = { address: clientAddress(server, request, ctx.config.trustProxy), ...(await deviceOf(request)) };
        const answer = await completeSetup(ctx, body, client);
        set.status = 201;
        return ctx.ok(answer, translate("auth.loggedIn", langOf(request)));
      },
      {
        // An ADMIN exists in the walk, so every setup token is void: the refusal is what can be read.
        sample: () => ({
          path: "/api/account/setup",
          body: { token: "a".repeat(43), name: "Too Late", email: "late@example.com", password: "Passw0rd!" },
          token: undefined,
          status: 400,
        }),
        body: withPasswordPolicy(SetupBody, ctx.config.passwordPolicy),
        response: { 201: EnvelopeOf(TokenResponse), ...errorResponses(400, 409, 503) },
        detail: {
          summary: "Create the first ADMIN with the one-time setup token",
          description:
            "The token from the setup link (1 hour, single use). Answers like a login: the new ADMIN is signed in. 400 INVALID_TOKEN for a used, expired or void token (an ADMIN exists).",
        },
      },
    );
