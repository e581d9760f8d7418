/** /api/search: thin HTTP over the search service; any authenticated caller. Bare JSON arrays of User. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { errorResponses } from "../../envelope";
import { Violations } from "../../errors";
import { User } from "../users/model";
import { type Page, pageIfAsked, pageOf } from "../../paging";
import { parseInstant, queryBoolean, queryInteger } from "../../validation";
import { DepartmentRoleParams, OptionalPage, SkillsQuery, UserSearchQuery } from "./model";
import { searchUsers, userChunks, type UserSearchCriteria } from "./service";
import { listAnswer } from "../../http/list-answer";
import type { Reader } from "../../db/client";

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
        auth: "authenticated",
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
      auth: "authenticated",
      params: DepartmentRoleParams,
      query: OptionalPage,
      response: { 200: t.Array(User), ...errors },
      detail: {
        summary: "Users of a department holding a role",
        description: "Department name and role name, both case-insensitive; by id. Every match, or one page when page or size is given.",
      },
    })
    .get("/by-skills", ({ query }) => matches(ctx.db, { skills: notBlank(query.skills) }, pageIfAsked(query)), {
      auth: "authenticated",
      query: SkillsQuery,
      response: { 200: t.Array(User), ...errors },
      detail: {
        summary: "Users holding any of the skills",
        description: "`skills` repeats (`?skills=a&skills=b`); matching ignores case; each user once, by id. Every match, or one page when page or size is given.",
      },
    });
