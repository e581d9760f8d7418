/**
 * TypeBox shapes of /api/auth: UserRegistrationDto and AddressDto with every rule of the
 * interface (texts from the original service, see src/i18n.ts `field.*`), and the login,
 * token and password-change bodies. User's e-mail, phone and password rules are reused
 * from the users feature so the two can never drift apart.
 */
import { t, type Static } from "elysia";
import { Type } from "@sinclair/typebox";
import { NotBlankString, PatternString, type Violation } from "../../validation";
import { CurrentPassword, Email, matchingNewPassword, Password, Phone, User } from "../../models/user";
import { PasskeyAssertion, PasskeyRequestOptions } from "../../models/webauthn";

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A real calendar date written yyyy-MM-dd (no 2023-02-30, no time part). */
function isCalendarDate(value: string): boolean {
  const match = ISO_DATE.exec(value);
  if (!match) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value);
}

/**
 * Today in UTC as yyyy-MM-dd: "in the past" means strictly before today. The machine's date, not
 * the app's clock, on purpose: it judges input (nothing is stamped or answered with it), and the
 * body checks run before any handler, where the app's clock is not at hand.
 */
const todayUtc = () => new Date().toISOString().slice(0, 10);

/** BigDecimal's @Digits(integer = 6, fraction = 2), applied to the absolute value. */
const SALARY_DIGITS = /^\d{1,6}(\.\d{1,2})?$/;

export const Address = t.Object(
  {
    city: NotBlankString({ messages: { required: "field.city.blank", blank: "field.city.blank" } }),
    district: NotBlankString({ messages: { required: "field.district.blank", blank: "field.district.blank" } }),
    detail: NotBlankString({
      maxLength: 200,
      messages: { required: "field.detail.blank", blank: "field.detail.blank", maxLength: "field.detail.length" },
    }),
    zipCode: t.Optional(PatternString({ pattern: "^\\d{5}$", messages: { pattern: "field.zipCode.pattern" } })),
  },
  { messages: { required: "field.address.missing" } },
);
export type Address = Static<typeof Address>;

/** Rules across fields, checked together with the schema so every violation is reported at once. */
function registrationRules(value: Record<string, unknown>): Violation[] {
  const out: Violation[] = [];
  const { password, confirmPassword, birthDate, salary } = value;
  if (typeof password === "string" && typeof confirmPassword === "string" && confirmPassword.trim() !== "" && password !== confirmPassword) {
    out.push({ path: "confirmPassword", key: "field.confirmPassword.mismatch" });
  }
  if (typeof birthDate === "string") {
    if (!isCalendarDate(birthDate)) out.push({ path: "birthDate", key: "field.birthDate.format" });
    else if (birthDate >= todayUtc()) out.push({ path: "birthDate", key: "field.birthDate.past" });
  }
  if (typeof salary === "number" && !SALARY_DIGITS.test(String(Math.abs(salary)))) {
    out.push({ path: "salary", key: "field.salary.digits" });
  }
  return out;
}

/** A person's name as registration takes it: 2 to 50 characters. */
const PersonName = NotBlankString({
  minLength: 2,
  maxLength: 50,
  messages: { required: "field.name.blank", blank: "field.name.blank", minLength: "field.name.length.registration", maxLength: "field.name.length.registration" },
});

export const RegistrationBody = t.Object(
  {
    name: PersonName,
    email: Email,
    password: Password,
    confirmPassword: NotBlankString({ messages: { required: "field.confirmPassword.blank", blank: "field.confirmPassword.blank" } }),
    // TypeBox's own Integer: Elysia's t.Integer is a union with numeric strings, whose errors lose the field's texts.
    age: Type.Integer({ minimum: 18, maximum: 120, messages: { required: "field.age.missing", minimum: "field.age.min", maximum: "field.age.max" } }),
    birthDate: t.Optional(t.String({ description: "yyyy-MM-dd, in the past", examples: ["1990-05-17"] })),
    phone: t.Optional(Phone),
    salary: t.Optional(
      t.Number({
        exclusiveMinimum: 0,
        maximum: 999_999.99,
        description: "Up to 6 integer and 2 fraction digits",
        messages: { minimum: "field.salary.positive", maximum: "field.salary.max" },
      }),
    ),
    address: Address,
    skills: t.Array(NotBlankString({ messages: { blank: "field.skills.blank" } }), {
      minItems: 1,
      maxItems: 3,
      messages: { required: "field.skills.min", minItems: "field.skills.min", maxItems: "field.skills.max" },
    }),
  },
  { refine: registrationRules, title: "UserRegistrationDto" },
);
export type RegistrationBody = Static<typeof RegistrationBody>;

export const ValidateEmailQuery = t.Object({ email: Email });

/** Login checks only presence: any other answer than 401 would tell which rule a stored password breaks. */
export const LoginBody = t.Object({
  email: t.String({ minLength: 1, maxLength: 320, messages: { required: "field.email.blank", minLength: "field.email.blank" } }),
  password: t.String({ minLength: 1, maxLength: 1024, messages: { required: "field.password.blank", minLength: "field.password.blank" } }),
  deviceToken: t.Optional(t.String({ maxLength: 200, description: "The deviceToken an earlier login on this device answered: its sign-ins count only their own failures" })),
});
export type LoginBody = Static<typeof LoginBody>;

export const ChangePasswordBody = t.Object(
  {
    currentPassword: CurrentPassword,
    newPassword: Password,
    confirmNewPassword: NotBlankString({ messages: { required: "field.confirmPassword.blank", blank: "field.confirmPassword.blank" } }),
  },
  { refine: matchingNewPassword },
);
export type ChangePasswordBody = Static<typeof ChangePasswordBody>;

export const TokenResponse = t.Object(
  {
    token: t.String(),
    tokenType: t.Literal("Bearer"),
    expiresIn: t.Integer({ description: "Seconds until the token expires" }),
    refreshToken: t.Optional(t.String({ description: "Shown once; for POST /api/auth/refresh" })),
    refreshExpiresIn: t.Optional(t.Integer()),
    deviceToken: t.Optional(t.String({ description: "A login's: keep it on this device and send it back with the next login (90 days)" })),
    user: User,
  },
  { title: "TokenResponse" },
);
export type TokenResponse = Static<typeof TokenResponse>;

/**
 * A body naming refreshToken takes the rotating refresh; one without it (none, `{}`, or the old
 * clients' `{"token": …}`) means the bearer-only refresh, so every field is optional here.
 */
export const RefreshBody = t.Object({
  refreshToken: t.Optional(t.String({ minLength: 1, maxLength: 200, messages: { minLength: "field.refreshToken.blank" } })),
});
export type RefreshBody = Static<typeof RefreshBody>;

export const LogoutQuery = t.Object({ scope: t.Optional(t.Literal("all")) });

// The request options are shared with the mfa feature's step-up (models/webauthn.ts).
export { PasskeyRequestOptions };

/** A right password for an account with a second factor: no token yet, the second step's challenge. */
export const MfaRequired = t.Object(
  {
    mfaRequired: t.Literal(true),
    mfaToken: t.String({ description: "Single use, for POST /api/auth/login/mfa; burnt by 5 wrong codes" }),
    methods: t.Array(t.Union([t.Literal("totp"), t.Literal("recovery_code"), t.Literal("passkey")])),
    expiresIn: t.Integer({ description: "Seconds the mfaToken lives (300)" }),
    passkeyOptions: t.Optional(PasskeyRequestOptions),
  },
  { title: "MfaRequired" },
);
export type MfaRequired = Static<typeof MfaRequired>;

export const LoginAnswer = t.Union([TokenResponse, MfaRequired], { title: "LoginAnswer" });

/** Exactly one of a code (TOTP or recovery code) and a passkey assertion. */
function oneSecondFactor(value: Record<string, unknown>): Violation[] {
  return (value.code === undefined) === (value.passkey === undefined) ? [{ path: "code", key: "field.mfa.oneOf" }] : [];
}

export const LoginMfaBody = t.Object(
  {
    // Sealed (features/auth/second-step.ts): about 230 characters with a deviceToken among its facts, 260 at most.
    mfaToken: t.String({ minLength: 1, maxLength: 300, messages: { required: "field.mfaToken.blank", minLength: "field.mfaToken.blank" } }),
    code: t.Optional(t.String({ minLength: 1, maxLength: 64, description: "A 6-digit TOTP code or a recovery code (xxxxx-xxxxx)" })),
    passkey: t.Optional(PasskeyAssertion),
  },
  { refine: oneSecondFactor, title: "LoginMfaBody" },
);
export type LoginMfaBody = Static<typeof LoginMfaBody>;

export const PasskeySignInBody = t.Object({ response: PasskeyAssertion }, { title: "PasskeySignInBody" });
export type PasskeySignInBody = Static<typeof PasskeySignInBody>;
/** The first ADMIN, from the one-time setup link (registration's rules for name, e-mail and password). */
export const SetupBody = t.Object(
  {
    token: t.String({ minLength: 1, maxLength: 200, description: "The token from the setup link", messages: { required: "field.token.blank", minLength: "field.token.blank" } }),
    name: PersonName,
    email: Email,
    password: Password,
  },
  { title: "SetupBody" },
);
export type SetupBody = Static<typeof SetupBody>;

export const SetupStatus = t.Object(
  { setupRequired: t.Boolean({ description: "True while no ADMIN exists: the first one is made through the setup link the server printed on stderr" }) },
  { title: "SetupStatus" },
);
