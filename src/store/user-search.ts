/**
 * User search over the users table group: ONE query builder for every combination of criteria. Each criterion is a
 * drizzle condition or nothing (absent or blank criteria do not restrict), and they are
 * and-ed together; every value is a bound parameter, never spliced into SQL text.
 */
import { and, asc, count, countDistinct, desc, eq, inArray, sql } from "drizzle-orm";
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { Database, Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { departments, roles, userRoles, userSkills, users } from "../db/schema";
import type { SORTABLE_FIELDS, User } from "../models/user";
import { limitOffset, type Page } from "../paging";
import { keysetAfter, orderBy, selectUsers, sortValueIndex, toUserFromValues } from "./users";

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

const hasText = (value: string | undefined): value is string => value !== undefined && value.trim() !== "";

/** `%`, `_` and `\` match themselves in a `LIKE … ESCAPE '\'` pattern. */
export const likeLiteral = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

/** SQLite's LIKE ignores case for ASCII letters only; FTS5 trigram folds Unicode too. */
const contains = (column: typeof users.name | typeof users.email, pattern: ReturnType<typeof sql.placeholder>) => sql`${column} like ${pattern} escape '\\'`;

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

/**
 * Most users are active, so `active = ?` alone narrows almost nothing; yet without table
 * statistics SQLite would drive the query from its index and sort every active user, rather
 * than walk users (or the name index) in the requested order and stop at the page.
 * The unary `+` keeps it out of index choice unless age comes too, where (active, age) is
 * the index that serves both.
 */
const activeIs = (withAge: boolean) => (withAge ? sql`${users.active} = ${sql.placeholder("active")}` : sql`+${users.active} = ${sql.placeholder("active")}`);

/**
 * What a search's SQL depends on: which criteria are present (and how a name is matched), how
 * many skills, the order, the page size. A bounded set, each prepared once (src/db/prepared.ts);
 * every other value is a placeholder, bound per request.
 */
interface Shape {
  /** 3+ characters: the trigram index, joined in; 1–2: LIKE over the names (the index cannot serve them). */
  name?: "fts" | "like";
  email?: true;
  department?: true;
  active?: true;
  age?: true;
  createdAfter?: true;
  createdBefore?: true;
  role?: true;
  skills?: number;
  sortBy: string;
  descending: boolean;
  /**
   * Rows per page (at most MAX_PAGE_SIZE), absent for every match. Written into the SQL as
   * `LIMIT <size>`: with `LIMIT ?` the 10-user name search cost 185 µs of server CPU per request
   * under wrk instead of 100 (in-process 118 µs instead of 54), as much as preparing the statement
   * again on every run; the page offset stays bound.
   */
  size?: number;
  /**
   * A chunk of an unpaged list read in keyset order (LIST_CHUNK_ROWS users, `LIMIT` written in):
   * the first, or those after a row whose sort value is given or NULL (users.ts keysetAfter).
   */
  chunk?: "first" | "after" | "afterNull";
}

/** Users a read of an unpaged list takes: its memory stays this many users, however many match. */
export const LIST_CHUNK_ROWS = 1000;

/** Where an unpaged list's next chunk starts: the sort value (as stored) and id of the last user read. */
export interface After {
  value: unknown;
  id: number;
}

/** More distinct skills than this are rare: such a search is built for the one request, not kept. */
const MAX_PREPARED_SKILLS = 8;

function shapeOf(c: UserSearchCriteria, page?: Page, chunk?: After | "first") {
  const skillKeys = [...new Set((c.skills ?? []).map((s) => s.trim().toLowerCase()).filter((s) => s !== ""))];
  const shape: Shape = { sortBy: c.sortBy ?? "id", descending: c.sortDirection?.toLowerCase() === "desc" };
  const values: Record<string, unknown> = {};
  if (hasText(c.name)) {
    shape.name = byTrigrams(c.name) ? "fts" : "like";
    values.name = shape.name === "fts" ? ftsPhrase(c.name) : `%${likeLiteral(c.name)}%`;
  }
  if (hasText(c.email)) {
    shape.email = true;
    values.email = `%${likeLiteral(c.email.trim())}%`;
  }
  if (hasText(c.department)) {
    shape.department = true;
    values.department = c.department.trim();
  }
  if (c.active !== undefined) {
    shape.active = true;
    values.active = c.active ? 1 : 0;
  }
  if (c.age !== undefined) {
    shape.age = true;
    values.age = c.age;
  }
  if (c.createdAfter) {
    shape.createdAfter = true;
    values.createdAfter = c.createdAfter.getTime();
  }
  if (c.createdBefore) {
    shape.createdBefore = true;
    values.createdBefore = c.createdBefore.getTime();
  }
  if (hasText(c.role)) {
    shape.role = true;
    values.role = c.role.trim();
  }
  if (skillKeys.length > 0) {
    shape.skills = skillKeys.length;
    skillKeys.forEach((key, i) => {
      values[`skill${i}`] = key;
    });
  }
  if (page) {
    const { limit, offset } = limitOffset(page);
    // Part of the SQL text, so never anything but a page size.
    if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`page size ${limit}`);
    shape.size = limit;
    values.offset = offset;
  }
  if (chunk === "first") shape.chunk = "first";
  else if (chunk) {
    shape.chunk = chunk.value === null ? "afterNull" : "after";
    Object.assign(values, { afterValue: chunk.value, afterId: chunk.id });
  }
  return { shape, values };
}

/** A shape's conditions, with placeholders for every value (a name of 3+ characters needs the FTS join). */
function conditionsOf(db: Reader, shape: Shape) {
  const value = (name: string) => sql.placeholder(name);
  return and(
    shape.name === "fts" ? sql`${usersNameFts} match ${value("name")}` : shape.name === "like" ? contains(users.name, value("name")) : undefined,
    shape.email ? contains(users.email, value("email")) : undefined,
    shape.department
      ? inArray(
          users.departmentId,
          db
            .select({ id: departments.id })
            .from(departments)
            .where(sql`${departments.name} = ${value("department")} collate nocase`),
        )
      : undefined,
    shape.active ? activeIs(shape.age === true) : undefined,
    shape.age ? sql`${users.age} = ${value("age")}` : undefined,
    shape.createdAfter ? sql`${users.createdAt} >= ${value("createdAfter")}` : undefined,
    shape.createdBefore ? sql`${users.createdAt} < ${value("createdBefore")}` : undefined,
    shape.role
      ? inArray(
          users.id,
          db
            .select({ id: userRoles.userId })
            .from(userRoles)
            .innerJoin(roles, eq(roles.id, userRoles.roleId))
            .where(sql`${roles.name} = ${value("role")} collate nocase`),
        )
      : undefined,
    // IN over a subquery: a user holding several of the skills still comes once.
    shape.skills
      ? inArray(
          users.id,
          db
            .select({ id: userSkills.userId })
            .from(userSkills)
            .where(
              inArray(
                userSkills.nameKey,
                Array.from({ length: shape.skills }, (_, i) => value(`skill${i}`)),
              ),
            ),
        )
      : undefined,
    shape.chunk === "after" || shape.chunk === "afterNull" ? keysetAfter(sortParameter(shape), shape.chunk === "afterNull") : undefined,
  );
}

const sortParameter = (shape: Shape) => `${shape.sortBy},${shape.descending ? "desc" : "asc"}`;

/** The query of a shape, with placeholders for every value. */
function buildSearch(db: Reader, shape: Shape) {
  let query = selectUsers(db).$dynamic();
  let order = orderBy(sortParameter(shape));
  if (shape.name === "fts") {
    query = query.innerJoin(usersNameFts, eq(usersNameFts.rowid, users.id));
    // FTS5 yields its matches in rowid order: sorting by id through it stops at the page
    // instead of collecting and sorting every match (constant time however many match).
    if (shape.sortBy === "id") order = [shape.descending ? desc(usersNameFts.rowid) : asc(usersNameFts.rowid)];
  }
  const sorted = query.where(conditionsOf(db, shape)).orderBy(...order);
  if (shape.chunk) return sorted.limit(writtenLimit(LIST_CHUNK_ROWS)).prepare();
  if (shape.size === undefined) return sorted.prepare();
  return sorted.limit(writtenLimit(shape.size)).offset(sql.placeholder("offset")).prepare();
}

/** A LIMIT written into the SQL text (see Shape.size): drizzle binds a number given to limit(), so the text goes in where its types want one. */
const writtenLimit = (rows: number) => sql.raw(String(rows)) as unknown as number;

/** How many users match a shape: the search's join and conditions, counted. */
function buildCount(db: Reader, shape: Shape) {
  let query = db.select({ total: count() }).from(users).$dynamic();
  if (shape.name === "fts") query = query.innerJoin(usersNameFts, eq(usersNameFts.rowid, users.id));
  return query.where(conditionsOf(db, shape)).prepare();
}

const preparedSearch = prepared((db: Reader, key: string) => buildSearch(db, JSON.parse(key) as Shape));
const preparedCount = prepared((db: Reader, key: string) => buildCount(db, JSON.parse(key) as Shape));

/** The statement for the criteria (prepared once per shape) and the values to run it with. */
export function searchStatement(db: Reader, criteria: UserSearchCriteria, page?: Page, chunk?: After | "first") {
  const { shape, values } = shapeOf(criteria, page, chunk);
  const statement = (shape.skills ?? 0) > MAX_PREPARED_SKILLS ? buildSearch(db, shape) : preparedSearch(db, JSON.stringify(shape));
  return { statement, values };
}

export async function searchUsers(db: Reader, criteria: UserSearchCriteria, page?: Page): Promise<User[]> {
  const { statement, values } = searchStatement(db, criteria, page);
  return ((await statement.values(values)) as ArrayLike<unknown>[]).map(toUserFromValues);
}

/**
 * Every user matching the criteria, in the search's order, LIST_CHUNK_ROWS a read: each chunk is
 * its own statement starting after the last user of the one before (keyset, never OFFSET), so no
 * read transaction spans the chunks and a slow reader of the answer holds no snapshot open.
 */
export async function* userChunks(db: Reader, criteria: UserSearchCriteria): AsyncGenerator<User[]> {
  const at = sortValueIndex(`${criteria.sortBy ?? "id"},${criteria.sortDirection ?? "asc"}`);
  let after: After | "first" = "first";
  for (;;) {
    const { statement, values } = searchStatement(db, criteria, undefined, after);
    const rows = (await statement.values(values)) as ArrayLike<unknown>[];
    if (rows.length > 0) yield rows.map(toUserFromValues);
    if (rows.length < LIST_CHUNK_ROWS) return;
    const last = rows[rows.length - 1];
    after = { value: last[at], id: last[0] as number };
  }
}

/** How many users match the criteria (prepared once per shape; the sort does not matter). */
export async function countMatches(db: Reader, criteria: UserSearchCriteria): Promise<number> {
  const { shape, values } = shapeOf(criteria);
  const statement = (shape.skills ?? 0) > MAX_PREPARED_SKILLS ? buildCount(db, shape) : preparedCount(db, JSON.stringify({ ...shape, sortBy: "id", descending: false }));
  const [{ total }] = await statement.all(values);
  return total;
}

/** FTS5's own tables of users_name_fts, as far as the upkeep uses them: its leaf-page index (one row per leaf page of each segment, so its distinct segids are the segments), and its command column. */
const usersNameFtsIdx = sqliteTable("users_name_fts_idx", { segid: integer("segid").notNull() });
const usersNameFtsCommands = sqliteTable("users_name_fts", { command: text("users_name_fts").notNull(), rank: integer("rank").notNull() });
const indexSegments = prepared((db: Reader) =>
  db
    .select({ n: countDistinct(usersNameFtsIdx.segid) })
    .from(usersNameFtsIdx)
    .prepare(),
);
const mergeSegments = prepared((tx: Db) =>
  tx
    .insert(usersNameFtsCommands)
    .values({ command: "merge", rank: placeholder<number>("rank") })
    .prepare(),
);

/**
 * One step of the name index's upkeep, a unit of its own (one round trip to a remote primary):
 * up to `pages` pages of its segments merged towards one (FTS5's 'merge' command; a negative
 * count merges segments of every level). Answers the segments it folded away, counted inside
 * the unit. An index in one piece, the usual state between bursts of writes, is seen by a read
 * and takes no unit at all: an idle server's step every 10 s holds no write lock (nor, on an
 * embedded replica, writes to the primary), and runs none of the write path's code.
 */
export async function mergeNameIndexSegments(db: Database, pages: number): Promise<number> {
  const [{ n }] = await indexSegments(db).all();
  if (n <= 1) return 0;
  const { before, after } = await db.writeAll((tx) => ({
    before: bound(indexSegments(tx), {}),
    merge: bound(mergeSegments(tx), { rank: -pages }),
    after: bound(indexSegments(tx), {}),
  }));
  return before[0].n - after[0].n;
}
