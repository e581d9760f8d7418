/** Feature folder mfa/: a user's second factors (TOTP, recovery codes, passkeys) and an ADMIN's view and removal of them. */
/**
 * /api/account/mfa/** and /api/account/passkeys/** (the caller's own; bare resources, 204 for
 * removals) and /api/users/{id}/mfa (ADMIN). Enrolment and removal need a sign-in within the
 * last 10 minutes (403 REAUTHENTICATION_REQUIRED), removal also the password or a current code,
 * and a first factor under MFA_REQUIRED_ROLES the enrolment code (enrol-code.ts); passkeys need
 * PUBLIC_URL or RP_ID (400 PASSKEYS_NOT_CONFIGURED).
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { clientAddress } from "../../http/client-address";
import { errorResponses } from "../../http/route-docs";
import { userId } from "../../models/user";
import { removeUserFactors, userFactors } from "./admin";
import {
  Factor,
  FactorRemoveBody,
  MfaStatus,
  NewPasskey,
  NewPasskeyBody,
  RecoveryCodesBody,
  StepUpBody,
  Passkey,
  PasskeyCreationOptions,
  PasskeyIdParams,
  RecoveryCodes,
  RenamePasskeyBody,
  TotpConfirmBody,
  TotpEnrolment,
  UserIdParams,
} from "./model";
import { addPasskey, listPasskeys, registrationOptions, removePasskey, renamePasskey } from "./passkeys";
import { mailEnrolCode } from "./enrol-code";
import { confirmTotp, mfaStatus, regenerateRecoveryCodes, removeTotp, startTotp } from "./service";
import { stepUp, stepUpPasskeyOptions } from "./step-up";
import { StepUp } from "../../models/step-up";
import { PasskeyRequestOptions } from "../../models/webauthn";

const RECENT = " Needs a sign-in within the last 10 minutes (403 REAUTHENTICATION_REQUIRED).";
const PROOF =
  " Or, instead of both, a {stepUpToken} (POST /api/account/step-up, or a fresh sign-in at a linked provider: the way for an account without a password); 403 INVALID_STEP_UP when it is wrong, used, expired or another session's.";
const FIRST =
  " Under MFA_REQUIRED_ROLES an account's first second factor also takes {enrolCode}, the code POST /api/account/mfa/enrol-code mails or an operator gives: 403 ENROL_CODE_REQUIRED without it, 400 INVALID_ENROL_CODE for a wrong or expired one (each counted in the login throttle: 429).";

export const mfaRoutes = (ctx: AppContext) =>
  new Elysia({ tags: ["Second factors"] })
    .use(ctx.auth)
    .get("/api/account/mfa", ({ caller }) => mfaStatus(ctx, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/mfa", token: walk.mfa.totp.token, status: 200 }),
      response: { 200: MfaStatus, ...errorResponses(401, 503) },
      detail: { summary: "The caller's second factors", description: "Whether TOTP is on, how many passkeys, how many unused recovery codes." },
    })
    .post("/api/account/mfa/totp", ({ caller }) => startTotp(ctx, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/mfa/totp", token: walk.mfa.enrolling, status: 200 }),
      response: { 200: TotpEnrolment, ...errorResponses(401, 403, 409, 503) },
      detail: {
        summary: "Start setting up an authenticator app",
        description: `A new pending secret (RFC 6238: SHA-1, 6 digits, 30 s) with its otpauth URI and QR code; confirm it with a first code. 409 TOTP_ALREADY_ENABLED.${RECENT}`,
      },
    })
    .post("/api/account/mfa/totp/confirm", ({ caller, body, request, server }) => confirmTotp(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy)), {
      access: { allow: "authenticated" },
      // The code is computed when sent: the walk takes longer than a step.
      sample: (walk: Walk) => ({ path: "/api/account/mfa/totp/confirm", token: walk.mfa.confirming.token, body: () => ({ code: walk.mfa.confirming.code() }), status: 200 }),
      body: TotpConfirmBody,
      response: { 200: RecoveryCodes, ...errorResponses(400, 401, 403, 409, 429, 503) },
      detail: {
        summary: "Confirm the authenticator app with a first code",
        description: `TOTP is on; answers 10 recovery codes, shown only here. Mails MFA_ENABLED. 400 INVALID_CODE; 409 TOTP_NOT_PENDING.${FIRST}${RECENT}`,
      },
    })
    .post(
      "/api/account/mfa/enrol-code",
      async ({ caller, set }) => {
        await mailEnrolCode(ctx, caller);
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        // Without MFA_REQUIRED_ROLES no account needs an enrolment code: the route's own 409 (test/mfa.test.ts mails one).
        sample: (walk: Walk) => ({ path: "/api/account/mfa/enrol-code", token: walk.mfa.enrolling, status: 409 }),
        response: { 204: t.Void(), ...errorResponses(401, 403, 409, 429, 503) },
        detail: {
          summary: "Mail the code that confirms a first second factor",
          description: `MFA_REQUIRED_ROLES: a user in such a role without a second factor enrols the first one with a 6-digit code sent out of band. This mails one (MFA_ENROL_CODE) to the account's verified address: it lives 10 minutes, 5 wrong tries burn it, and it replaces any earlier one. At most 3 in 10 minutes (429 with Retry-After). 403 EMAIL_VERIFICATION_REQUIRED while the address is unverified; 409 ENROL_CODE_NOT_NEEDED; 409 ENROL_CODE_FROM_OPERATOR without SMTP (\`usersvc mfa enrol-code --email E\` prints one).${RECENT}`,
        },
      },
    )
    .delete(
      "/api/account/mfa/totp",
      async ({ caller, body, request, server, set }) => {
        await removeTotp(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy));
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/account/mfa/totp", token: walk.mfa.removing.token, body: { password: "Passw0rd!" }, status: 204 }),
        body: FactorRemoveBody,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 429, 503) },
        detail: {
          summary: "Remove the authenticator app",
          description: `With a current {code} or the {password} (each throttled like a login). Ends every session of the user, the caller's too; mails MFA_DISABLED. 404 TOTP_NOT_ENABLED.${RECENT}${PROOF}`,
        },
      },
    )
    .post(
      "/api/account/mfa/recovery-codes",
      ({ caller, body, request, server }) => regenerateRecoveryCodes(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy)),
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/account/mfa/recovery-codes", token: walk.mfa.totp.token, body: { password: "Passw0rd!" }, status: 200 }),
        body: RecoveryCodesBody,
        response: { 200: RecoveryCodes, ...errorResponses(400, 401, 403, 409, 429, 503) },
        detail: {
          summary: "Replace the recovery codes",
          description: `With the {password}: 10 new codes (xxxxx-xxxxx, single use), shown only here; the old ones stop working. A wrong password is a 400, throttled like a login. 409 MFA_NOT_ENABLED.${RECENT}${PROOF}`,
        },
      },
    )
    .post("/api/account/passkeys/options", ({ caller }) => registrationOptions(ctx, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/passkeys/options", token: walk.mfa.keyed.token, status: 200 }),
      response: { 200: PasskeyCreationOptions, ...errorResponses(400, 401, 403, 503) },
      detail: {
        summary: "Start registering a passkey",
        description: `WebAuthn creation options (a discoverable credential; the caller's passkeys excluded); the challenge lives 5 minutes.${RECENT}`,
      },
    })
    .post(
      "/api/account/passkeys",
      async ({ caller, body, request, server, set }) => {
        const passkey = await addPasskey(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy));
        set.status = 201;
        return passkey;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/account/passkeys", token: walk.mfa.keyed.token, body: { name: "Walk key 3", response: walk.mfa.keyed.registration }, status: 201 }),
        body: NewPasskeyBody,
        response: { 201: NewPasskey, ...errorResponses(400, 401, 403, 409, 429, 503) },
        detail: {
          summary: "Register a passkey",
          description: `{name, response}: the authenticator's answer to the options. When the account has no unused recovery code (its first second factor), the answer also carries 10 recoveryCodes, shown only here. Mails PASSKEY_ADDED. 400 PASSKEY_REJECTED; 409 PASSKEY_EXISTS.${FIRST}${RECENT}`,
        },
      },
    )
    .get("/api/account/passkeys", ({ caller }) => listPasskeys(ctx, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/passkeys", token: walk.mfa.keyed.token, status: 200 }),
      response: { 200: t.Array(Passkey), ...errorResponses(401, 503) },
      detail: { summary: "The caller's passkeys", description: "Oldest first." },
    })
    .patch("/api/account/passkeys/:id", ({ caller, params, body }) => renamePasskey(ctx, caller, params.id, body.name), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: `/api/account/passkeys/${walk.mfa.keyed.renamed}`, token: walk.mfa.keyed.token, body: { name: "Renamed" }, status: 200 }),
      params: PasskeyIdParams,
      body: RenamePasskeyBody,
      response: { 200: Passkey, ...errorResponses(400, 401, 404, 503) },
      detail: { summary: "Rename a passkey", description: "404 PASSKEY_NOT_FOUND for another user's or an unknown one." },
    })
    .delete(
      "/api/account/passkeys/:id",
      async ({ caller, params, body, request, server, set }) => {
        await removePasskey(ctx, caller, params.id, body, clientAddress(server, request, ctx.config.trustProxy));
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: `/api/account/passkeys/${walk.mfa.keyed.removed}`, token: walk.mfa.keyed.token, body: { password: "Passw0rd!" }, status: 204 }),
        params: PasskeyIdParams,
        body: FactorRemoveBody,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 429, 503) },
        detail: {
          summary: "Remove a passkey",
          description: `With a current {code} of the authenticator app or the {password} (each throttled like a login; the code is spent), as removing the authenticator app. Ends every session of the user, the caller's too; mails MFA_DISABLED; the recovery codes go with the last factor. 400 INVALID_CODE; 404 PASSKEY_NOT_FOUND.${RECENT}${PROOF}`,
        },
      },
    )
    .post("/api/account/step-up/passkey-options", ({ caller }) => stepUpPasskeyOptions(ctx, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/step-up/passkey-options", token: walk.mfa.enrolling, status: 200 }),
      response: { 200: PasskeyRequestOptions, ...errorResponses(400, 401, 403, 503) },
      detail: {
        summary: "Start a step-up with a passkey",
        description:
          "WebAuthn request options (user verification required) whose challenge, sealed for the caller, lives 5 minutes; answer them with POST /api/account/step-up {passkey}. 400 PASSKEYS_NOT_CONFIGURED.",
      },
    })
    .post("/api/account/step-up", ({ caller, body, request, server }) => stepUp(ctx, caller, body, clientAddress(server, request, ctx.config.trustProxy)), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/step-up", token: walk.mfa.enrolling, body: { password: "Passw0rd!" }, status: 200 }),
      body: StepUpBody,
      response: { 200: StepUp, ...errorResponses(400, 401, 403, 429, 503) },
      detail: {
        summary: "Confirm it is you: a step-up token",
        description:
          "Exactly one of {password}, {code} (a current code of the authenticator app, spent) and {passkey} (an assertion of one of the caller's passkeys for POST /api/account/step-up/passkey-options). Answers a step-up token for the changes that take one instead of the password (removing a factor, replacing the recovery codes, changing one's e-mail address, linking a provider): single use, 5 minutes, this session's. A wrong proof is counted in the login throttle (429 once it is full): 400 on the password, 400 INVALID_CODE, 401 INVALID_PASSKEY. An account without a password or a factor proves it at a linked provider (POST /api/account/step-up/{provider}/start).",
      },
    })
    .get("/api/users/:id/mfa", ({ params }) => userFactors(ctx, userId(params)), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.mfa.totp.id}/mfa`, status: 200 }),
      params: UserIdParams,
      response: { 200: t.Array(Factor), ...errorResponses(400, 401, 403, 404, 503) },
      detail: { summary: "A user's second factors", description: "Kind, name, when added and last used; never a secret or a key." },
    })
    .delete(
      "/api/users/:id/mfa",
      async ({ caller, params, set }) => {
        await removeUserFactors(ctx, caller, userId(params));
        set.status = 204;
      },
      {
        access: { allow: "ADMIN" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.mfa.removing.id}/mfa`, status: 204 }),
        params: UserIdParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 503) },
        detail: {
          summary: "Remove every second factor of a user",
          description: "TOTP, passkeys and recovery codes; every session and token of the user ends. Audited MFA_REMOVED; mails MFA_DISABLED.",
        },
      },
    );
