/** TypeBox shapes of the users API: what clients send and what they get back. */
import { t, type Static } from "elysia";
import { CurrentPassword, Email, Password, Phone, SORTABLE_FIELDS } from "../../models/user";
import { StepUpToken } from "../../models/step-up";
import { MAX_PAGE, NotBlankString, PatternString } from "../../validation";

const OwnEmailConfirmation = t.Optional({
  ...CurrentPassword,
  description: "The caller's password: required when the caller changes their own e-mail address (their address again, in any case, needs none)",
});
const OwnEmailStepUp = t.Optional({
  ...StepUpToken,
  description: "Instead of currentPassword (an account without one): a step-up token, POST /api/account/step-up or a fresh sign-in at a linked provider",
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
  stepUpToken: OwnEmailStepUp,
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
  stepUpToken: OwnEmailStepUp,
  version: t.Optional(Version),
});
export type UserPatch = Static<typeof UserPatch>;

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
