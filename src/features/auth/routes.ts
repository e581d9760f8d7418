/** Feature folder auth/: registration, login, refresh, logout and password change under /api/auth, and the ADMIN bootstrap. */
/**
 * /api/auth: registration and sessions (open in the access table: the session routes
 * authenticate their bearer through the guard themselves). Answers are envelopes.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { EnvelopeOf } from "../../envelope";
import { errorResponses } from "../../http/route-docs";
import { translate } from "../../catalogue";
import { languageOf } from "../../i18n";
import { User } from "../../models/user";
import { ChangePasswordBody, LoginBody, RegistrationBody, TokenResponse, ValidateEmailQuery } from "./model";
import { clientAddress } from "../../http/client-address";
import { withPasswordPolicy } from "../../security/password-policy";
import { emailAvailable, register } from "./register";
import { changePassword, login, logout, refresh } from "./service";
import { countEmailCheck, countRegistration } from "./address-limits";

/** Registration sends null for "not given", nested ones too; dropping them keeps one schema. */
function dropNulls(value: unknown) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, field] of Object.entries(value)) {
    if (field === null) delete (value as Record<string, unknown>)[key];
    else dropNulls(field);
  }
}

const langOf = (request: Request) => languageOf(request.headers.get("accept-language"));
// Open routes that read the database: a busy one answers 503 with Retry-After.
const errors = errorResponses(400, 401, 403, 409, 429, 503);

export const authRoutes = (ctx: AppContext) =>
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
      async ({ body, request, server }) => ctx.ok(await login(ctx, body, clientAddress(server, request, ctx.config.trustProxy)), translate("auth.loggedIn", langOf(request))),
      {
        body: LoginBody,
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "Exchange e-mail and password for a bearer token",
          description: "401 INVALID_CREDENTIALS for a wrong e-mail or password alike; 403 ACCOUNT_DISABLED; 429 with Retry-After after too many failures.",
        },
      },
    )
    .post("/refresh", async ({ caller, request }) => ctx.ok(await refresh(ctx, caller), translate("auth.refreshed", langOf(request))), {
      auth: "authenticated",
      response: { 200: EnvelopeOf(TokenResponse), ...errors },
      detail: { summary: "A fresh token for the bearer" },
    })
    .post(
      "/logout",
      async ({ caller, request }) => {
        await logout(ctx, caller);
        return ctx.ok(null, translate("auth.loggedOut", langOf(request)));
      },
      {
        auth: "authenticated",
        response: { 200: EnvelopeOf(t.Null(), "Empty"), ...errors },
        detail: { summary: "Revoke every token issued to the caller so far" },
      },
    )
    .post(
      "/change-password",
      async ({ caller, body, request, server }) =>
        ctx.ok(await changePassword(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy)), translate("auth.passwordChanged", langOf(request))),
      {
        auth: "authenticated",
        body: withPasswordPolicy(ChangePasswordBody, ctx.config.passwordPolicy),
        response: { 200: EnvelopeOf(TokenResponse), ...errors },
        detail: {
          summary: "Change the caller's password",
          description: "Revokes every earlier token and answers with a new one. A wrong currentPassword is a 400 on that field, throttled like a login.",
        },
      },
    );
