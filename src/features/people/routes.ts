/** Feature folder people/: departments, roles, profiles and bulk deactivation. */
/**
 * Departments, roles, profiles and bulk deactivation over HTTP: bare resources, 201 on
 * creation. Reading is for any authenticated caller; writing roles, departments and
 * deactivating are ADMIN's (roles and deactivation never by API key); a profile belongs to its user (and ADMIN).
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { errorResponses } from "../../http/route-docs";
import { User, UserIdParams, userId } from "../../models/user";
import { parseInstant } from "../../validation";
import { DeactivateQuery, DeactivateResult, Department, DepartmentBody, ProfileBody, Role, RolesBody, UserProfile } from "./model";
import { createDepartment, deactivateInactive, getProfile, listDepartments, listRoles, putProfile, setRoles } from "./service";

const errors = errorResponses(400, 401, 403, 404, 409);

export const peopleRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api" })
    .use(ctx.auth)
    .get("/departments", () => listDepartments(ctx.db), {
      access: { allow: "authenticated", scope: "users:read", withoutUser: true },
      sample: () => ({ path: "/api/departments", status: 200 }),
      response: { 200: t.Array(Department), ...errors },
      detail: { summary: "List departments", tags: ["Departments"], description: "By name, each with its number of users." },
    })
    .post(
      "/departments",
      async ({ body, set }) => {
        set.status = 201;
        return createDepartment(ctx.db, body, new Date(ctx.now()));
      },
      {
        access: { allow: "ADMIN", scope: "users:write" },
        sample: () => ({ path: "/api/departments", body: { name: "Walk Department" }, status: 201 }),
        body: DepartmentBody,
        response: { 201: Department, ...errors },
        detail: {
          summary: "Create a department",
          tags: ["Departments"],
          description:
            "Names are unique: a taken one gives 409 DUPLICATE_DEPARTMENT. A User's `department` reads and writes as the department NAME; " +
            "writing an unknown name on a user creates that department, so this endpoint is needed only to add a description up front.",
        },
      },
    )
    .get("/roles", () => listRoles(ctx.db), {
      access: { allow: "authenticated", scope: "users:read", withoutUser: true },
      sample: () => ({ path: "/api/roles", status: 200 }),
      response: { 200: t.Array(Role), ...errors },
      detail: { summary: "List roles", tags: ["Roles"] },
    })
    // No API key sets roles or deactivates (no area: 403 API_KEY_NOT_ALLOWED), whatever its scopes.
    .put("/users/:id/roles", ({ params, body, caller }) => setRoles(ctx.db, userId(params), body, caller.email, new Date(ctx.now())), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/roles`, body: { roles: ["USER"] }, status: 200 }),
      params: UserIdParams,
      body: RolesBody,
      response: { 200: User, ...errors },
      detail: {
        summary: "Set a user's roles",
        tags: ["Roles"],
        description: 'Replaces the whole set, e.g. {"roles":["USER","ADMIN"]}; an unknown role name is a 400 validation failure. Returns the User (version +1).',
      },
    })
    .get("/users/:id/profile", ({ params }) => getProfile(ctx.db, userId(params)), {
      access: { allow: "SELF_OR_ADMIN", scope: "users:read" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/profile`, status: 200 }),
      params: UserIdParams,
      response: { 200: UserProfile, ...errors },
      detail: { summary: "Get a user's profile", tags: ["Profiles"], description: "The user themself or an ADMIN. A user without a profile gets an empty one." },
    })
    .put("/users/:id/profile", ({ params, body }) => putProfile(ctx.db, userId(params), body, new Date(ctx.now()).toISOString().slice(0, 10)), {
      access: { allow: "SELF_OR_ADMIN", scope: "users:write" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/profile`, body: { bio: "walks", birthDate: "1990-01-01" }, status: 200 }),
      params: UserIdParams,
      body: ProfileBody,
      response: { 200: UserProfile, ...errors },
      detail: {
        summary: "Create or replace a user's profile",
        tags: ["Profiles"],
        description: "The user themself or an ADMIN. Replaces the whole profile: absent or null fields are cleared. birthDate is yyyy-MM-dd, in the past.",
      },
    })
    .post("/users/deactivate-inactive", ({ query, caller }) => deactivateInactive(ctx.db, parseInstant(query.before, "before"), caller.email, new Date(ctx.now())), {
      access: { allow: "ADMIN" },
      sample: () => ({ path: "/api/users/deactivate-inactive?before=2000-01-01", status: 200 }),
      query: DeactivateQuery,
      response: { 200: DeactivateResult, ...errors },
      detail: {
        summary: "Deactivate users who have not logged in since a cutoff",
        tags: ["Users"],
        description:
          "before: yyyy-MM-dd (the start of that day, UTC) or an ISO 8601 date-time. Active users whose lastLogin is before it are deactivated in one unit; " +
          "users who never logged in are not touched. Deactivated users cannot log in (403 ACCOUNT_DISABLED) and every token issued to them stops working (401), also after a re-activation. " +
          "The last active ADMIN is kept: if every active ADMIN would go, the one who logged in last stays active and is counted in skipped. Returns how many were deactivated and skipped.",
      },
    });
