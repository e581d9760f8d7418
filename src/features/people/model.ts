/** TypeBox shapes of departments, roles, profiles and bulk deactivation. */
import { t, type Static } from "elysia";
import { HttpUrl, Instant, NotBlankString } from "../../validation";
import type { RoleName } from "../../security/caller";

export const Department = t.Object(
  {
    id: t.Integer(),
    name: t.String(),
    description: t.Nullable(t.String()),
    createdAt: t.String({ format: "date-time" }),
    userCount: t.Integer({ description: "How many users belong to it" }),
  },
  { title: "Department" },
);
export type Department = Static<typeof Department>;

export const DepartmentBody = t.Object({
  name: NotBlankString({ maxLength: 50, messages: { blank: "field.required", maxLength: "field.department.length" } }),
  description: t.Optional(t.Nullable(t.String({ maxLength: 255 }))),
});
export type DepartmentBody = Static<typeof DepartmentBody>;

export const Role = t.Object({ id: t.Integer(), name: t.String(), description: t.Nullable(t.String()) }, { title: "Role" });

export const ROLE_NAMES = ["USER", "ADMIN"] as const satisfies readonly RoleName[];

export const RolesBody = t.Object({
  roles: t.Array(t.UnionEnum([...ROLE_NAMES]), { minItems: 1, description: "The user's whole set of roles (replaces the current one)" }),
});
export type RolesBody = Static<typeof RolesBody>;

/** PUT replaces the whole profile: an absent or null field is cleared. A birthDate must be in the past (checked by the service, against its clock). */
export const ProfileBody = t.Object({
  avatarUrl: t.Optional(t.Nullable(HttpUrl({ maxLength: 500, description: "An http or https address" }))),
  bio: t.Optional(t.Nullable(t.String({ maxLength: 5000 }))),
  birthDate: t.Optional(
    t.Nullable(t.String({ format: "date", maxLength: 10, messages: { format: "field.type", maxLength: "field.birthDate.format" }, description: "yyyy-MM-dd, in the past" })),
  ),
  address: t.Optional(t.Nullable(t.String({ maxLength: 500 }))),
});
export type ProfileBody = Static<typeof ProfileBody>;

export const UserProfile = t.Object(
  {
    userId: t.Integer(),
    avatarUrl: t.Nullable(t.String()),
    bio: t.Nullable(t.String()),
    birthDate: t.Nullable(t.String({ format: "date" })),
    address: t.Nullable(t.String()),
  },
  { title: "UserProfile" },
);
export type UserProfile = Static<typeof UserProfile>;

export const DeactivateQuery = t.Object({ before: Instant });
export const DeactivateResult = t.Object({
  count: t.Integer({ description: "Users deactivated by this call" }),
  skipped: t.Integer({ description: "Users left active although inactive: the last active ADMIN (0 or 1)" }),
});
