/**
 * User search: ONE query builder for every combination of criteria. Each criterion is a
 * drizzle condition or nothing (absent or blank criteria do not restrict), and they are
 * and-ed together; every value is a bound parameter, never spliced into SQL text.
 */
import { and, asc, desc, eq, gte, inArray, lt, sql, type SQL } from "drizzle-orm";
import { integer, sqliteTable } from "drizzle-orm/sqlite-core";
import type { Reader } from "../../db/client";
import { departments, roles, userRoles, userSkills, users } from "../../db/schema";
import type { User, SORTABLE_FIELDS } from "../users/model";
import { orderBy, selectUsers, toUser } from "../users/service";

export interface UserSearchCriteria {
  /** Case-insensitive substring. */
  name?: string;
  /** Case-insensitive substring. */
  email?: string;
  /** Department name, case-insensitive. */
  department?: string;
  active?: boolean;
  age?: number;
  /** createdAt >= createdAfter (inclusive)… */
  createdAfter?: Date;
  /** …and createdAt < createdBefore (exclusive): adjacent windows neither overlap nor leave gaps. */
  createdBefore?: Date;
  /** Role name the user holds, case-insensitive. */
  role?: string;
  /** Users holding any of these skills (case-insensitive). */
  skills?: string[];
  sortBy?: (typeof SORTABLE_FIELDS)[number];
  sortDirection?: "asc" | "desc" | "ASC" | "DESC";
}

export interface Page {
  page: number;
  size: number;
}


const hasText = (value: string | undefined): value is string => value !== undefined && value.trim() !== "";

/** `%`, `_` and `\` match themselves in a `LIKE … ESCAPE '\'` pattern. */
export const likeLiteral = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

/** SQLite's LIKE ignores case for ASCII letters only; FTS5 trigram folds Unicode too. */
const contains = (column: typeof users.name | typeof users.email, value: string) =>
  sql`${column} like ${`%${likeLiteral(value)}%`} escape '\\'`;

/** An FTS5 phrase: inside double quotes everything is literal, a quote is doubled. */
export const ftsPhrase = (value: string) => `"${value.replaceAll('"', '""')}"`;

/** The smallest term the trigram index can serve. */
export const TRIGRAM = 3;

/**
 * The FTS5 trigram index over users.name (drizzle/0002_search_fts.sql), rowid = users.id.
 * Declared here rather than in schema.ts so drizzle-kit never takes it for a plain table.
 */
const usersNameFts = sqliteTable("users_name_fts", { rowid: integer("rowid").notNull() });

const byTrigrams = (name: string | undefined): name is string => hasText(name) && [...name].length >= TRIGRAM;

function nameContains(name: string): SQL {
  // 3+ characters: the trigram index, joined in by searchQuery. It cannot answer 1–2 characters:
  // those few short terms scan the names with LIKE.
  return byTrigrams(name) ? sql`${usersNameFts} match ${ftsPhrase(name)}` : contains(users.name, name);
}

/**
 * Most users are active, so `active = ?` alone narrows almost nothing; yet without table
 * statistics SQLite would drive the query from its index and sort every active user, rather
 * than walk users (or the name index) in the requested order and stop at the page.
 * The unary `+` keeps it out of index choice unless age comes too, where (active, age) is
 * the index that serves both.
 */
const activeIs = (active: boolean, withAge: boolean) => (withAge ? eq(users.active, active) : sql`+${users.active} = ${active ? 1 : 0}`);

/** The conditions of the criteria, and-ed; undefined when nothing restricts. A 3+ character name needs searchQuery's join. */
function searchConditions(db: Reader, c: UserSearchCriteria): SQL | undefined {
  const skillKeys = (c.skills ?? []).map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  return and(
    hasText(c.name) ? nameContains(c.name) : undefined,
    hasText(c.email) ? contains(users.email, c.email.trim()) : undefined,
    hasText(c.department)
      ? inArray(users.departmentId, db.select({ id: departments.id }).from(departments).where(sql`${departments.name} = ${c.department.trim()} collate nocase`))
      : undefined,
    c.active !== undefined ? activeIs(c.active, c.age !== undefined) : undefined,
    c.age !== undefined ? eq(users.age, c.age) : undefined,
    c.createdAfter ? gte(users.createdAt, c.createdAfter) : undefined,
    c.createdBefore ? lt(users.createdAt, c.createdBefore) : undefined,
    hasText(c.role)
      ? inArray(users.id, db.select({ id: userRoles.userId }).from(userRoles).innerJoin(roles, eq(roles.id, userRoles.roleId)).where(sql`${roles.name} = ${c.role.trim()} collate nocase`))
      : undefined,
    // IN over a subquery: a user holding several of the skills still comes once.
    skillKeys.length > 0 ? inArray(users.id, db.select({ id: userSkills.userId }).from(userSkills).where(inArray(userSkills.nameKey, skillKeys))) : undefined,
  );
}

/** The query for the users matching the criteria, sorted (id by default), one page of them when `page` is given. */
export function searchQuery(db: Reader, criteria: UserSearchCriteria, page?: Page) {
  const sortBy = criteria.sortBy ?? "id";
  const descending = criteria.sortDirection?.toLowerCase() === "desc";
  let query = selectUsers(db).$dynamic();
  let order = orderBy(`${sortBy},${descending ? "desc" : "asc"}`);
  if (byTrigrams(criteria.name)) {
    query = query.innerJoin(usersNameFts, eq(usersNameFts.rowid, users.id));
    // FTS5 yields its matches in rowid order: sorting by id through it stops at the page
    // instead of collecting and sorting every match (constant time however many match).
    if (sortBy === "id") order = [descending ? desc(usersNameFts.rowid) : asc(usersNameFts.rowid)];
  }
  const sorted = query.where(searchConditions(db, criteria)).orderBy(...order);
  return page ? sorted.limit(page.size).offset(page.page * page.size) : sorted;
}

export async function searchUsers(db: Reader, criteria: UserSearchCriteria, page?: Page): Promise<User[]> {
  return (await searchQuery(db, criteria, page)).map(toUser);
}
