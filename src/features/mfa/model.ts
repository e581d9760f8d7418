/** TypeBox shapes of the second factors: what a user enrols and sees, and what an ADMIN sees (never a secret, a hash or a key). */
import { t, type Static } from "elysia";
import { CurrentPassword, UserIdParams } from "../../models/user";
import { StepUpToken } from "../../models/step-up";
import { PasskeyAssertion, PasskeyAttestation } from "../../models/webauthn";
import { NotBlankString, type Refinement } from "../../validation";

export const MfaStatus = t.Object({ totp: t.Boolean(), passkeys: t.Integer({ minimum: 0 }), recoveryCodesLeft: t.Integer({ minimum: 0 }) }, { title: "MfaStatus" });
export type MfaStatus = Static<typeof MfaStatus>;

export const TotpEnrolment = t.Object(
  {
    secret: t.String({ description: "base32, for typing into an app by hand" }),
    otpauthUri: t.String({ examples: ["otpauth://totp/usersvc:ann%40example.com?issuer=usersvc&secret=…&algorithm=SHA1&digits=6&period=30"] }),
    qrSvg: t.String({ description: "The otpauthUri as a QR code, an SVG document" }),
  },
  { title: "TotpEnrolment" },
);

const Code = t.String({ minLength: 1, maxLength: 64, messages: { required: "field.code.blank", minLength: "field.code.blank" } });

/** MFA_REQUIRED_ROLES: the code that confirms an account's first second factor out of band (POST /api/account/mfa/enrol-code mails it). */
const EnrolCode = t.Optional(
  t.String({
    maxLength: 64,
    description: "Only for a first second factor under MFA_REQUIRED_ROLES: the 6-digit code mailed by POST /api/account/mfa/enrol-code, or given by an operator",
    examples: ["042917"],
    messages: { maxLength: "field.enrolCode.length" },
  }),
);

export const TotpConfirmBody = t.Object({ code: Code, enrolCode: EnrolCode }, { title: "TotpConfirmBody" });
export type TotpConfirmBody = Static<typeof TotpConfirmBody>;

/** Exactly one of `fields` given: the refinement of a body that takes one proof of several. */
const exactlyOne =
  (fields: readonly string[]): Refinement =>
  (value) =>
    fields.filter((field) => value[field] !== undefined).length === 1 ? [] : [{ path: fields[0], key: "field.oneProof", params: { fields: fields.join(", ") } }];

/**
 * What removing a factor (the authenticator app, a passkey) proves: exactly one of a current code
 * of the authenticator app, the password (each after a recent sign-in) and a step-up token.
 */
export const FactorRemoveBody = t.Object(
  { code: t.Optional(Code), password: t.Optional(CurrentPassword), stepUpToken: t.Optional(StepUpToken) },
  { title: "FactorRemoveBody", refine: exactlyOne(["code", "password", "stepUpToken"]) },
);
export type FactorRemoveBody = Static<typeof FactorRemoveBody>;

/** What replacing the recovery codes proves: the password (after a recent sign-in) or a step-up token. */
export const RecoveryCodesBody = t.Object(
  { password: t.Optional(CurrentPassword), stepUpToken: t.Optional(StepUpToken) },
  { title: "RecoveryCodesBody", refine: exactlyOne(["password", "stepUpToken"]) },
);
export type RecoveryCodesBody = Static<typeof RecoveryCodesBody>;

/** A step-up's proof: exactly one of the password, a current code of the authenticator app, and a passkey's assertion. */
export const StepUpBody = t.Object(
  {
    password: t.Optional(CurrentPassword),
    code: t.Optional({ ...Code, description: "A current code of the authenticator app (not a recovery code)" }),
    passkey: t.Optional(PasskeyAssertion),
  },
  { title: "StepUpBody", refine: exactlyOne(["password", "code", "passkey"]) },
);
export type StepUpBody = Static<typeof StepUpBody>;

export const RecoveryCodes = t.Object(
  { recoveryCodes: t.Array(t.String({ examples: ["k3m9p-x2c7d"] }), { description: "Shown once: 10 single-use codes" }) },
  { title: "RecoveryCodes" },
);

/** WebAuthn creation options (PublicKeyCredentialCreationOptionsJSON) for navigator.credentials.create. */
export const PasskeyCreationOptions = t.Object(
  {
    challenge: t.String(),
    rp: t.Object({ id: t.Optional(t.String()), name: t.String() }),
    user: t.Object({ id: t.String(), name: t.String(), displayName: t.String() }),
    pubKeyCredParams: t.Array(t.Object({ alg: t.Integer(), type: t.String() })),
    timeout: t.Optional(t.Integer()),
    excludeCredentials: t.Optional(t.Array(t.Object({ id: t.String(), type: t.String(), transports: t.Optional(t.Array(t.String())) }))),
    authenticatorSelection: t.Optional(
      t.Object({
        authenticatorAttachment: t.Optional(t.String()),
        residentKey: t.Optional(t.String()),
        requireResidentKey: t.Optional(t.Boolean()),
        userVerification: t.Optional(t.String()),
      }),
    ),
    attestation: t.Optional(t.String()),
    hints: t.Optional(t.Array(t.String())),
    extensions: t.Optional(t.Record(t.String(), t.Unknown())),
  },
  { title: "PasskeyCreationOptions" },
);

const PasskeyName = NotBlankString({ maxLength: 100, messages: { required: "field.passkeyName.blank", blank: "field.passkeyName.blank", maxLength: "field.passkeyName.length" } });

export const NewPasskeyBody = t.Object({ name: PasskeyName, response: PasskeyAttestation, enrolCode: EnrolCode }, { title: "NewPasskeyBody" });
export type NewPasskeyBody = Static<typeof NewPasskeyBody>;
export const RenamePasskeyBody = t.Object({ name: PasskeyName }, { title: "RenamePasskeyBody" });

export const Passkey = t.Object(
  {
    id: t.String(),
    name: t.String(),
    createdAt: t.String({ format: "date-time" }),
    lastUsedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  },
  { title: "Passkey" },
);
export type Passkey = Static<typeof Passkey>;

/** A passkey just registered: with the account's first recovery codes when it had none. */
export const NewPasskey = t.Object(
  {
    ...Passkey.properties,
    recoveryCodes: t.Optional(
      t.Array(t.String({ examples: ["k3m9p-x2c7d"] }), {
        description: "Only when the account had no unused recovery code (its first second factor): 10 single-use codes, shown only here",
      }),
    ),
  },
  { title: "NewPasskey" },
);
export type NewPasskey = Static<typeof NewPasskey>;

export const PasskeyIdParams = t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) });

/** One of a user's factors, as an ADMIN sees it. */
export const Factor = t.Object(
  {
    kind: t.Union([t.Literal("totp"), t.Literal("passkey"), t.Literal("recovery_codes")]),
    name: t.String({ description: "The passkey's name; for recovery codes, how many are left" }),
    createdAt: t.String({ format: "date-time" }),
    lastUsedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  },
  { title: "Factor" },
);
export type Factor = Static<typeof Factor>;

export { UserIdParams };
