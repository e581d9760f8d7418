/** Feature folder search/: user search (/api/search), the caller's own profile, and the upkeep of the name index. */
/** /api/search: thin HTTP over the user search; any authenticated caller. Bare JSON arrays of User, and the caller's own User. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { Violations } from "../../errors";
import type { Reader } from "../../db/database";
import { listAnswer } from "../../http/list-answer";
import { User } from "../../models/user";
import { type Page, pageIfAsked, pageOf } from "../../paging";
import { parseInstant, queryBoolean, queryInteger } from "../../validation";
import { searchUsers, userChunks, type UserSearchCriteria } from "../../store/user-search";
import { findUser } from "../../store/users";
import { DepartmentRoleParams, OptionalPage, ProfileHeaders, SkillsQuery, UserSearchQuery } from "./model";

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

/** One page, or every match: read and sent in chunks, so memory stays flat however many match. */
const matches = async (db: Reader, criteria: UserSearchCriteria, page: Page | undefined) =>
  (page ? searchUsers(db, criteria, page) : listAnswer(userChunks(db, criteria))) as Promise<User[]>;

const errors = errorResponses(400, 401);

export const searchRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/search", tags: ["Search"] })
    .use(ctx.auth)
    .get(
      "/users",
      ({ query }) => {
        const { page, size, age, active, createdAfter, createdBefore, ...rest } = query;
        return searchUsers(
          ctx.db,
          {
            ...rest,
            age: queryInteger(age),
            active: queryBoolean(active) ?? true,
            createdAfter: createdAfter ? parseInstant(createdAfter, "createdAfter") : undefined,
            createdBefore: createdBefore ? parseInstant(createdBefore, "createdBefore") : undefined,
          },
          pageOf({ page: queryInteger(page), size: queryInteger(size) }, 10),
        );
      },
      {
        auth: ["authenticated", "users", { withoutUser: true }],
        query: UserSearchQuery,
        transform: dropEmptyQuery,
        response: { 200: t.Array(User), ...errors },
        detail: {
          summary: "Search users",
          description:
            "Every given criterion restricts, absent or empty ones do not. name: case-insensitive substring (index-served from 3 characters). " +
            "active defaults to true; page 0 and size 10 by default, size at most 100. createdAfter is inclusive, createdBefore exclusive. " +
            "department matches the department's name.",
        },
      },
    )
    .get("/users/department/:dept/role/:role", ({ params, query }) => matches(ctx.db, { department: params.dept, role: params.role }, pageIfAsked(query)), {
      auth: ["authenticated", "users", { withoutUser: true }],
      params: DepartmentRoleParams,
      query: OptionalPage,
      response: { 200: t.Array(User), ...errors },
      detail: {
        summary: "Users of a department holding a role",
        description: "Department name and role name, both case-insensitive; by id. Every match, or one page when page or size is given.",
      },
    })
    .get("/by-skills", ({ query }) => matches(ctx.db, { skills: notBlank(query.skills) }, pageIfAsked(query)), {
      auth: ["authenticated", "users", { withoutUser: true }],
      query: SkillsQuery,
      response: { 200: t.Array(User), ...errors },
      detail: {
        summary: "Users holding any of the skills",
        description: "`skills` repeats (`?skills=a&skills=b`); matching ignores case; each user once, by id. Every match, or one page when page or size is given.",
      },
    });

/** GET /api/search/profile: registered in app.ts beside /api/auth, where it always stood in the OpenAPI document. */
export const profileRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/search", tags: ["Search"] }).use(ctx.auth).get(
    "/profile",
    ({ caller, headers, set }) => {
      set.headers["x-client-version"] = headers["x-client-version"] ?? "1.0";
      return findUser(ctx.db, caller.id);
    },
    {
      auth: ["authenticated", "users"],
      headers: ProfileHeaders,
      response: { 200: User, ...errorResponses(400, 401, 404) },
      detail: { summary: "The caller's own User", description: "X-Client-Version (default 1.0) is echoed back.", ...documentedHeaders({ 200: ["X-Client-Version"] }) },
    },
  );
