/**
 * The shapes of a user that several features answer or accept: the User answer itself and the
 * e-mail, phone and password rules (users, registration, password reset and change share them,
 * so they can never drift apart).
 */
import { Type } from "@sinclair/typebox";
import { t, type Static } from "elysia";
import { AppError } from "../errors";
import { NullableString, QueryInteger, queryInteger, type Violation } from "../validation";

export const PHONE_PATTERN = "^[0-9-+()\\s]*$";
export const PASSWORD_PATTERN = "^(?=.*[a-z])(?=.*[A-Z])(?=.*\\d)(?=.*[@$!%*?&])[A-Za-z\\d@$!%*?&]+$";

export const Email = t.String({
  format: "email",
  maxLength: 255,
  pattern: "\\S",
  messages: { required: "field.email.blank", pattern: "field.email.blank", format: "field.email.format", maxLength: "field.email.length" },
});

export const Phone = t.String({
  maxLength: 20,
  pattern: PHONE_PATTERN,
  messages: { pattern: "field.phone.pattern", maxLength: "field.phone.pattern" },
});

export const Password = t.String({
  minLength: 8,
  maxLength: 20,
  pattern: PASSWORD_PATTERN,
  messages: { required: "field.password.blank", minLength: "field.password.length", maxLength: "field.password.length", pattern: "field.password.pattern" },
});

/** The caller's current password, where a change needs it (change-password; one's own e-mail address). */
export const CurrentPassword = t.String({ minLength: 1, maxLength: 1024, messages: { required: "field.password.blank", minLength: "field.password.blank" } });

export const User = t.Object(
  {
    // Plain integers, not Elysia's t.Integer (a string-or-integer union, for coercing input): Elysia's
    // clean of an answer walks a union branch by branch on every answer. The document is the same.
    id: Type.Integer(),
    name: t.String(),
    email: t.String(),
    department: NullableString(),
    phone: NullableString(),
    active: t.Boolean(),
    createdAt: t.String({ format: "date-time" }),
    updatedAt: t.String({ format: "date-time" }),
    lastLogin: NullableString({ format: "date-time" }),
    version: Type.Integer(),
    roles: t.Array(t.String()),
    emailVerified: t.Boolean({ description: "Whether the address was confirmed (false again after an e-mail change)" }),
  },
  // noValidate: Elysia still cleans a User answer to these fields (exactMirror) but skips the check
  // of a shape toUser (store/users.ts) builds field by field: ~1.5 µs of GET /api/users/{id} served.
  // Every answer in the tests is still checked against the OpenAPI document (test/helpers.ts).
  { title: "User", noValidate: true },
);
export type User = Static<typeof User>;

/**
 * A list of User answers, as Users are: cleaned, not checked. The array's own check walked every
 * user again, each instant through the "date-time" format: ~4 µs of a 10-user search page
 * (in-process, main-thread CPU), a twentieth of it. The document is the same.
 */
export const UserList = t.Array(User, { noValidate: true });

export const SORTABLE_FIELDS = ["id", "name", "email", "createdAt", "updatedAt", "lastLogin", "active"] as const;

/** confirmNewPassword repeats newPassword (change-password and password-reset bodies). */
export const matchingNewPassword = (v: Record<string, unknown>): Violation[] =>
  typeof v.newPassword === "string" && typeof v.confirmNewPassword === "string" && v.confirmNewPassword.trim() !== "" && v.newPassword !== v.confirmNewPassword
    ? [{ path: "confirmNewPassword", key: "field.confirmPassword.mismatch" }]
    : [];

/**
 * A user route's :id, checked from its text as t.Integer would (the same JSON, so the OpenAPI
 * document does not change, and the same errors) but with no TypeBox Transform: Elysia ran
 * t.Integer's Decode walk on every request, a twentieth of GET /api/users/{id}. Read it with userId.
 */
export const UserIdParams = t.Object({ id: QueryInteger({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
export const userId = (params: { id: number | string }) => queryInteger(params.id) as number;

/** The user a service must answer, or 404 USER_NOT_FOUND: `findUser(db, id).then(existing(id))`. */
export const existing =
  (id: number) =>
  (user: User | undefined): User => {
    if (!user) throw new AppError("USER_NOT_FOUND", { id });
    return user;
  };
