/** TypeBox shapes of the search API. */
import { t, type Static } from "elysia";
import { SORTABLE_FIELDS } from "../../models/user";
import { Instant, MAX_PAGE, PatternString, QueryBoolean, QueryInteger } from "../../validation";

export const MAX_PAGE_SIZE = 100;

/**
 * Free text matched with LIKE or FTS5, both of which read a NUL as the end of the text: `%\0%`
 * matched every user and an FTS phrase cut at a NUL was a syntax error (500). No name holds one.
 */
const SearchText = (description: string) => PatternString({ pattern: "^[^\\u0000]*$", messages: { pattern: "field.searchText" }, description });

/** SearchCriteria (name, age, active, page, size) plus the rest of UserSearchCriteria; numbers and flags as QueryInteger / QueryBoolean (src/validation.ts). */
export const UserSearchQuery = t.Object({
  name: t.Optional(SearchText("Case-insensitive substring of the name; `%`, `_` and quotes match literally")),
  age: t.Optional(QueryInteger({ description: "Exact age" })),
  active: t.Optional(QueryBoolean({ default: true, description: "Defaults to true" })),
  page: t.Optional(QueryInteger({ minimum: 0, maximum: MAX_PAGE, default: 0 })),
  size: t.Optional(QueryInteger({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 10 })),
  email: t.Optional(SearchText("Case-insensitive substring of the e-mail")),
  department: t.Optional(t.String({ description: "Department name, case-insensitive" })),
  createdAfter: t.Optional(Instant),
  createdBefore: t.Optional(Instant),
  sortBy: t.Optional(t.UnionEnum([...SORTABLE_FIELDS])),
  sortDirection: t.Optional(t.UnionEnum(["asc", "desc", "ASC", "DESC"])),
});
export type UserSearchQuery = Static<typeof UserSearchQuery>;

export const DepartmentRoleParams = t.Object({ dept: t.String(), role: t.String() });

const PAGE_OPTIONAL = "Optional: without page and size every match comes back";

/** The unpaged lists (department+role, skills) page only when asked, as GET /api/users does. */
export const OptionalPage = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE, description: `${PAGE_OPTIONAL}; default 0 when size is given` })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, description: `${PAGE_OPTIONAL}; default 20 when page is given` })),
});

export const SkillsQuery = t.Object({
  ...OptionalPage.properties,
  // Blank entries are refused by the route: a failing item rule on a one-value array escapes Elysia's
  // query decoding as a TransformDecodeCheckError (a 500) instead of a validation error.
  skills: t.Array(t.String(), { minItems: 1, description: "Repeatable: users holding any of them (case-insensitive), each once" }),
});

export const ProfileHeaders = t.Object({
  "x-client-version": t.Optional(t.String({ pattern: "^[A-Za-z0-9._-]{1,32}$", default: "1.0", description: "Echoed back; default 1.0" })),
});
