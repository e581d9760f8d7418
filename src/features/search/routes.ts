/** Feature folder search/: user search (/api/search), the caller's own profile, and the upkeep of the name index. */
/** /api/search: thin HTTP over the user search (service.ts); any authenticated caller. Bare JSON arrays of User, and the caller's own User. */
import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { Violations } from "../../errors";
import { User, UserList } from "../../models/user";
import { pageIfAsked } from "../../paging";
import { DepartmentRoleParams, OptionalPage, ProfileHeaders, SkillsQuery, UserSearchQuery } from "./model";
import { matches, profileOf, searchByQuery } from "./service";

/** `?age=&name=`: an empty parameter does not restrict, so it must not fail type validation either. */
const dropEmptyQuery = ({ query }: { query: Record<string, unknown> }) => {
  for (const [key, value] of Object.entries(query)) if (value === "") delete query[key];
};

/** Each skill must say something: `skills[i]: must not be blank`, as a parameter failure. */
function notBlank(skills: string[]) {
  const blank = skills.flatMap((s, i) => (s.trim() === "" ? [{ path: `skills[${i}]`, key: "field.skills.blank" as const }] : []));
  if (blank.length > 0) throw new Violations("params", blank);
  return skills;
}

const errors = errorResponses(400, 401);

export const searchRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/search", tags: ["Search"] })
    .use(ctx.auth)
    .get("/users", ({ query }) => searchByQuery(ctx.db, query), {
      access: { allow: "authenticated", scope: "users:read", withoutUser: true },
      sample: () => ({ path: "/api/search/users?name=Mei", status: 200 }),
      query: UserSearchQuery,
      transform: dropEmptyQuery,
      response: { 200: UserList, ...errors },
      detail: {
        summary: "Search users",
        description:
          "Every given criterion restricts, absent or empty ones do not. name: case-insensitive substring (index-served from 3 characters). " +
          "active defaults to true; page 0 and size 10 by default, size at most 100. createdAfter is inclusive, createdBefore exclusive. " +
          "department matches the department's name.",
      },
    })
    .get("/users/department/:dept/role/:role", ({ params, query }) => matches(ctx.db, { department: params.dept, role: params.role }, pageIfAsked(query)), {
      access: { allow: "authenticated", scope: "users:read", withoutUser: true },
      sample: () => ({ path: "/api/search/users/department/Walkers/role/USER", status: 200 }),
      params: DepartmentRoleParams,
      query: OptionalPage,
      response: { 200: UserList, ...errors },
      detail: {
        summary: "Users of a department holding a role",
        description: "Department name and role name, both case-insensitive; by id. Every match, or one page when page or size is given.",
      },
    })
    .get("/by-skills", ({ query }) => matches(ctx.db, { skills: notBlank(query.skills) }, pageIfAsked(query)), {
      access: { allow: "authenticated", scope: "users:read", withoutUser: true },
      sample: () => ({ path: "/api/search/by-skills?skills=SQL", status: 200 }),
      query: SkillsQuery,
      response: { 200: UserList, ...errors },
      detail: {
        summary: "Users holding any of the skills",
        description: "`skills` repeats (`?skills=a&skills=b`); matching ignores case; each user once, by id. Every match, or one page when page or size is given.",
      },
    });

/** GET /api/search/profile: registered in app.ts beside /api/auth, where it always stood in the OpenAPI document. */
export const profileRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/search", tags: ["Search"] }).use(ctx.auth).get(
    "/profile",
    // The header echoes on the answer it belongs to: a 404 (no such user) carries none.
    async ({ caller, headers, set }) => {
      const user = await profileOf(ctx.db, caller.id);
      set.headers["x-client-version"] = headers["x-client-version"] ?? "1.0";
      return user;
    },
    {
      access: { allow: "authenticated", scope: "users:read" },
      sample: () => ({ path: "/api/search/profile", status: 200 }),
      headers: ProfileHeaders,
      response: { 200: User, ...errorResponses(400, 401, 404) },
      detail: { summary: "The caller's own User", description: "X-Client-Version (default 1.0) is echoed back.", ...documentedHeaders({ 200: ["X-Client-Version"] }) },
    },
  );
