/** TypeBox shapes of the users API: what clients send and what they get back. */
import { t, type Static } from "elysia";
import { MAX_PAGE, NotBlankString, PatternString, QueryInteger, queryInteger } from "../../validation";

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
const OwnEmailConfirmation = t.Optional({
  ...CurrentPassword,
  description: "The caller's password: required when the caller changes their own e-mail address (their address again, in any case, needs none)",
});
const PasswordByAdmin = t.Optional({ ...Password, description: "ADMIN only: sets the user's password (the rules of POST) and ends every token issued to them so far" });

const UserName = NotBlankString({
  minLength: 2,
  maxLength: 100,
  messages: { required: "field.name.blank", blank: "field.name.blank", minLength: "field.name.length.user", maxLength: "field.name.length.user" },
});

const Department = t.String({ maxLength: 50, messages: { maxLength: "field.department.length" } });
const Version = t.Integer({ minimum: 0, description: "The version you read; a stale one gives 409 OPTIMISTIC_LOCK_CONFLICT" });

/** POST and PUT body. `id`, `active` and timestamps are the service's: sent ones are ignored. */
export const UserBody = t.Object({
  name: UserName,
  email: Email,
  department: t.Optional(Department),
  phone: t.Optional(Phone),
  password: PasswordByAdmin,
  currentPassword: OwnEmailConfirmation,
  version: t.Optional(Version),
});
export type UserBody = Static<typeof UserBody>;

/** PATCH body: any of name, email, department (and, by an ADMIN, password); absent or null fields stay as they are. */
export const UserPatch = t.Object({
  name: t.Optional(UserName),
  email: t.Optional(Email),
  department: t.Optional(Department),
  password: PasswordByAdmin,
  currentPassword: OwnEmailConfirmation,
  version: t.Optional(Version),
});
export type UserPatch = Static<typeof UserPatch>;

export const User = t.Object(
  {
    id: t.Integer(),
    name: t.String(),
    email: t.String(),
    department: t.Nullable(t.String()),
    phone: t.Nullable(t.String()),
    active: t.Boolean(),
    createdAt: t.String({ format: "date-time" }),
    updatedAt: t.String({ format: "date-time" }),
    lastLogin: t.Nullable(t.String({ format: "date-time" })),
    version: t.Integer(),
    roles: t.Array(t.String()),
    emailVerified: t.Boolean({ description: "Whether the address was confirmed (false again after an e-mail change)" }),
  },
  { title: "User" },
);
export type User = Static<typeof User>;

export const SORTABLE_FIELDS = ["id", "name", "email", "createdAt", "updatedAt", "lastLogin", "active"] as const;

export const UserListQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100 })),
  sort: t.Optional(PatternString({ pattern: `^(${SORTABLE_FIELDS.join("|")})(,(asc|desc|ASC|DESC))?$`, messages: { pattern: "field.sort" } })),
  // The console's filters (beyond the seed): absent ones filter nothing, so today's answers stay.
  name: t.Optional(t.String({ maxLength: 100, description: "Substring of the name, case-insensitive" })),
  email: t.Optional(t.String({ maxLength: 255, description: "Substring of the e-mail, case-insensitive" })),
  department: t.Optional(t.String({ maxLength: 50, description: "The department's exact name" })),
  active: t.Optional(t.UnionEnum(["true", "false", "any"], { default: "any", description: "Only active (true), only inactive (false) or both (any)" })),
});
export type UserListQuery = Static<typeof UserListQuery>;

/**
 * A user route's :id, checked from its text as t.Integer would (the same JSON, so the OpenAPI
 * document does not change, and the same errors) but with no TypeBox Transform: Elysia ran
 * t.Integer's Decode walk on every request, a twentieth of GET /api/users/{id}. Read it with userId.
 */
export const UserIdParams = t.Object({ id: QueryInteger({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });
export const userId = (params: { id: number | string }) => queryInteger(params.id) as number;
