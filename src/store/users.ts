/**
 * Users with their roles, departments, skills and profiles (users, roles, user_roles,
 * departments, user_skills, user_profiles): every statement on them, and the one mapping of a
 * users row to the User answer. Uniqueness of e-mail is the unique index's, so concurrent
 * writes of one address give one row and a constraint failure for the rest (the caller maps it).
 */
import { and, asc, count, desc, eq, inArray, lt, ne, notExists, sql, type AnyColumn, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Database, Db, Reader } from "../db/database";
import { secondFactorsOf } from "./mfa";
import { bound, placeholder, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { positionsOf } from "../db/reads";
import { accountTokens, auditLog, departments, outbox, roles, userProfiles, userRoles, userSkills, users } from "../db/schema";
import type { SORTABLE_FIELDS, User } from "../models/user";
import { limitOffset, withPlaceholderPage, type Page } from "../paging";
import { auditSelection } from "./audit";
import { type NotificationKind, notificationSelection, notificationStatement, traced } from "./outbox";
import { keyRevoked } from "./signing-keys";
import { andThen, type MaybePromise } from "../maybe-promise";

/**
 * A user's role names, comma-separated. Written with explicit aliases: drizzle leaves columns
 * unqualified in single-table selects, which would bind "id" to the inner table.
 */
const roleNamesOfUser = sql<string | null>`(select group_concat(r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = "users"."id")`;

/**
 * The department's name, as a scalar subquery rather than a LEFT JOIN: the same answer, but a
 * point read by id took 13 µs with the join and 3.6 µs with this (bun:sqlite, 10,000 users:
 * the join was the largest part of GET /api/users/{id} in the CPU profile, npm run bench).
 */
const departmentNameOfUser = sql<string | null>`(select d.name from departments d where d.id = "users"."department_id")`;

/** Everything a User answer shows, in one query: the department name and role names come along. */
const userColumns = {
  id: users.id,
  name: users.name,
  email: users.email,
  department: departmentNameOfUser,
  phone: users.phone,
  active: users.active,
  createdAt: users.createdAt,
  updatedAt: users.updatedAt,
  lastLogin: users.lastLogin,
  version: users.version,
  roles: roleNamesOfUser,
  emailVerified: users.emailVerified,
};

/** An instant as drizzle maps it (Date) or as the driver stores it (epoch milliseconds). */
type Instant = Date | number;
const iso = (instant: Instant) => (typeof instant === "number" ? new Date(instant) : instant).toISOString();

/** A row as drizzle maps it, or with its instants and flags as stored. */
type Unmapped<T> = { [K in keyof T]: T[K] extends Date ? Instant : T[K] extends Date | null ? Instant | null : T[K] extends boolean ? boolean | number : T[K] };

function toUser(row: Unmapped<UserRow>): User {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    department: row.department ?? null,
    phone: row.phone ?? null,
    active: Boolean(row.active),
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    lastLogin: row.lastLogin ? iso(row.lastLogin) : null,
    version: row.version,
    roles: row.roles ? row.roles.split(",").sort() : [],
    emailVerified: Boolean(row.emailVerified),
  };
}

const userAt = positionsOf(userColumns);
/**
 * A row of userColumns read with `.values()`: the driver's values in userColumns' order
 * (instants as epoch milliseconds, flags as 0/1), indexed rather than destructured because
 * libsql's rows are array-like, not iterable. Skipping drizzle's generic per-field mapping
 * took a sixth off a 10-user search page (in-process, app.handle, main-thread CPU).
 */
export const toUserFromValues = (v: ArrayLike<unknown>): User =>
  toUser({
    id: v[userAt.id] as number,
    name: v[userAt.name] as string,
    email: v[userAt.email] as string,
    department: v[userAt.department] as string | null,
    phone: v[userAt.phone] as string | null,
    active: v[userAt.active] as number,
    createdAt: v[userAt.createdAt] as number,
    updatedAt: v[userAt.updatedAt] as number,
    lastLogin: v[userAt.lastLogin] as number | null,
    version: v[userAt.version] as number,
    roles: v[userAt.roles] as string | null,
    emailVerified: v[userAt.emailVerified] as number,
  });

/** The users matching `where` (all when undefined), as User rows. */
export function selectUsers(db: Reader, where?: SQL) {
  const query = db.select(userColumns).from(users);
  return where ? query.where(where) : query;
}

/** The stored form of an e-mail: what the unique index compares. */
export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** findUser's query, prepared once per handle (src/db/prepared.ts), as every hot path's. */
const findById = prepared((db: Reader) => selectUsers(db, eq(users.id, sql.placeholder("id"))).prepare());

/** A row of userColumns as drizzle reads it. */
type UserRow = Awaited<ReturnType<ReturnType<typeof findById>["all"]>>[number];

/** The User with the id, or undefined: the service decides what a missing one means (usually `existing`, models/user.ts). */
export async function findUser(db: Reader, id: number): Promise<User | undefined> {
  // Raw values, mapped by position: drizzle's per-field row mapping was a tenth of GET /api/users/{id}.
  // Not on an edge's copy yet (made at another edge a moment ago): read again at the primary (db/miss.ts).
  const [row] = (await foundOrAgain(db, (source) => findById(source).values({ id }))) as ArrayLike<unknown>[];
  return row ? toUserFromValues(row) : undefined;
}

/** The User with the id as a statement of a unit: read back after the unit's writes. */
export const userById = (db: Reader, id: number) => bound(findById(db), { id });

/** The User with an e-mail, as a list unit reads a new user back. */
const findByEmail = prepared((db: Reader) => selectUsers(db, eq(users.email, sql.placeholder("email"))).prepare());
export const userByEmail = (db: Reader, email: string) => bound(findByEmail(db), { email });

/** The User of a unit's answer rows (read back with userById or userByEmail). */
export const userOf = (rows: UserRow[]) => toUser(rows[0]);

const SORT_COLUMNS: Record<(typeof SORTABLE_FIELDS)[number], AnyColumn> = {
  id: users.id,
  name: users.name,
  email: users.email,
  createdAt: users.createdAt,
  updatedAt: users.updatedAt,
  lastLogin: users.lastLogin,
  active: users.active,
};

/** The sort a `field,direction` parameter names: unknown fields sort by id. */
function sortOf(sort: string | undefined) {
  const [field = "id", direction = "asc"] = (sort ?? "id").split(",");
  const known = Object.hasOwn(SORT_COLUMNS, field) ? (field as keyof typeof SORT_COLUMNS) : "id";
  return { field: known, column: SORT_COLUMNS[known], descending: direction.toLowerCase() === "desc" };
}

export function orderBy(sort: string | undefined) {
  const { column, descending } = sortOf(sort);
  const primary = descending ? desc(column) : asc(column);
  // id breaks ties, so pages never overlap or skip.
  return column === users.id ? [primary] : [primary, asc(users.id)];
}

/** Where a row's sort value is in a userColumns row read with `.values()`. */
export const sortValueIndex = (sort: string | undefined) => userAt[sortOf(sort).field];

/**
 * The users after a row in orderBy(sort)'s order: the keyset of a list read in chunks. The row's
 * sort value and id are the placeholders "afterValue" (as stored) and "afterId"; `afterNull` when
 * its value is NULL (lastLogin), which SQLite sorts first ascending and last descending. The
 * value's bound comes first, alone, so an index on the column serves it as a range.
 */
export function keysetAfter(sort: string | undefined, afterNull: boolean): SQL {
  const { column, descending } = sortOf(sort);
  const id = sql.placeholder("afterId");
  if (column === users.id) return descending ? sql`${users.id} < ${id}` : sql`${users.id} > ${id}`;
  const value = sql.placeholder("afterValue");
  const nullable = !column.notNull;
  if (afterNull) return descending ? sql`${column} is null and ${users.id} > ${id}` : sql`(${column} is null and ${users.id} > ${id} or ${column} is not null)`;
  const beyond = descending
    ? sql`${column} <= ${value} and (${column} < ${value} or ${users.id} > ${id})`
    : sql`${column} >= ${value} and (${column} > ${value} or ${users.id} > ${id})`;
  return descending && nullable ? sql`(${beyond} or ${column} is null)` : beyond;
}

/** A page's statement per sort (one of SORT_COLUMNS, either direction). Unpaged lists are read in chunks: user-search.ts userChunks. */
const userPage = prepared((r: Reader, sort: string) =>
  withPlaceholderPage(
    selectUsers(r)
      .orderBy(...orderBy(sort))
      .$dynamic(),
  ).prepare(),
);
const userCount = prepared((r: Reader) => r.select({ total: count() }).from(users).prepare());

/** A page of every user, sorted by `sort` ("field,direction"), with the total of all users. */
export async function listUsers(db: Pick<Database, "readAll">, sort: string | undefined, page: Page) {
  // The shape from a bounded set, never the raw parameter (unknown fields sort by id, as orderBy does).
  const { field, descending } = sortOf(sort);
  const sorted = `${field},${descending ? "desc" : "asc"}`;
  // One read unit: one round trip to a remote primary, and the page and its total agree.
  const [rows, [{ total }]] = await db.readAll((r) => [bound(userPage(r, sorted), limitOffset(page)), bound(userCount(r), {})]);
  return { users: rows.map(toUser), total };
}

/** The id of the named department, created on first use (a User carries its department by name). */
// createdAt from here, not the column default: unixepoch('subsec') is NULL on a server with
// SQLite before 3.42, where every new department failed NOT NULL (409 on such remote primaries).
const addDepartment = prepared((tx: Db) =>
  tx
    .insert(departments)
    .values({ name: sql.placeholder("name"), createdAt: sql.placeholder("createdAt") })
    .onConflictDoNothing()
    .prepare(),
);
const departmentByName = prepared((tx: Db) =>
  tx
    .select({ id: departments.id })
    .from(departments)
    .where(eq(departments.name, sql.placeholder("name")))
    .prepare(),
);

/** `now`: the department's createdAt when this makes it. */
export async function departmentId(tx: Db, name: string | undefined, now: Date): Promise<number | null> {
  const trimmed = name?.trim();
  if (!trimmed) return null;
  await addDepartment(tx).run({ name: trimmed, createdAt: now });
  const [row] = await departmentByName(tx).all({ name: trimmed });
  return row.id;
}

/** The id of the user a list unit has just inserted, found by its unique e-mail (no answer comes back mid-unit). */
export const idOfEmail = (email: string | SQL.Aliased | ReturnType<typeof sql.placeholder>) => sql<number>`(select ${users.id} from ${users} where ${users.email} = ${email})`;

/** What follows a new user's row in its list unit, prepared once per handle: the USER role, the welcome and the audit row. */
const newUserStatements = prepared((tx: Db) => {
  const id = idOfEmail(sql.placeholder("email"));
  const at = placeholder<Date>("now");
  return [
    tx
      .insert(userRoles)
      .select(
        tx
          .select({ userId: id.as("user_id"), roleId: roles.id })
          .from(roles)
          .where(eq(roles.name, "USER")),
      )
      .prepare(),
    notificationStatement(tx, "WELCOME", placeholder<string>("email"), sql`json_object('userId', ${id}, 'name', ${sql.placeholder("name")})`, at).prepare(),
    tx
      .insert(auditLog)
      .values({
        action: "USER_CREATED",
        actor: sql.placeholder("actor"),
        subjectType: "User",
        subjectId: sql`cast(${id} as text)`,
        details: sql.placeholder("details"),
        createdAt: at,
      })
      .prepare(),
  ] as const;
});

/**
 * What follows a new user's row in its list unit: the USER role, the welcome notification and
 * the audit row. If either cannot be written, there is no user.
 */
function newUserRows(tx: Db, email: string, name: string, audit: { actor: string; details: Record<string, unknown> }, now: Date) {
  const values = { email, name, actor: audit.actor, details: audit.details, now };
  return newUserStatements(tx).map((statement) => bound(statement, traced(values)));
}

/** The department named by the `department` placeholder, created on first use while `condition` holds. */
const departmentWhen = (tx: Db, condition: SQL) =>
  tx
    .insert(departments)
    .select(
      tx
        .select({
          id: sql<null>`null`.as("id"),
          name: sql<string>`${sql.placeholder("department")}`.as("name"),
          description: sql<null>`null`.as("description"),
          createdAt: sql<number>`${sql.placeholder("createdAt")}`.as("created_at"),
        })
        .from(sql`(select 1)`)
        .where(condition),
    )
    .onConflictDoNothing();

/**
 * A new user's department, created on first use while the e-mail is free: a create that then
 * fails on its e-mail has changed no row, so the group commit it shares with other creates has
 * nothing of it to undo (src/db/native.ts).
 */
const addDepartmentIfEmailFree = prepared((tx: Db) =>
  departmentWhen(
    tx,
    notExists(
      tx
        .select({ id: users.id })
        .from(users)
        .where(eq(users.email, sql.placeholder("email"))),
    ),
  ).prepare(),
);

/** A user's row as POST /api/users writes it, with or without a department (one shape each). */
const insertNewUser = prepared((tx: Db, shape: string) =>
  tx
    .insert(users)
    .values({
      name: sql.placeholder("name"),
      email: sql.placeholder("email"),
      departmentId: shape === "department" ? sql`(select ${departments.id} from ${departments} where ${departments.name} = ${sql.placeholder("department")})` : null,
      phone: sql.placeholder("phone"),
      passwordHash: sql.placeholder("passwordHash"),
      active: true,
      createdAt: sql.placeholder("now"),
      updatedAt: sql.placeholder("now"),
    })
    .prepare(),
);

export interface NewUser {
  name: string;
  email: string;
  department?: string;
  phone: string | null;
  passwordHash: string | null;
}

/**
 * The statements of a new user for a list unit: its department (created on first use while the e-mail is free), the user,
 * its USER role, the welcome and the audit row. Every statement is prepared: no SQL is built per create.
 */
export function createdUserRows(tx: Db, user: NewUser, audit: { actor: string; details: Record<string, unknown> }, now: Date) {
  const { department } = user;
  return [
    ...(department ? [bound(addDepartmentIfEmailFree(tx), { department, email: user.email, createdAt: now.getTime() })] : []),
    bound(insertNewUser(tx, department ? "department" : ""), { ...user, now }),
    ...newUserRows(tx, user.email, user.name, audit, now),
  ];
}

/** The statements of a registration's list unit, prepared once per handle; the new user is found by its e-mail. */
const insertRegistered = prepared((tx: Db) =>
  tx
    .insert(users)
    .values({
      name: sql.placeholder("name"),
      email: sql.placeholder("email"),
      phone: sql.placeholder("phone"),
      age: sql.placeholder("age"),
      salaryCents: sql.placeholder("salaryCents"),
      passwordHash: sql.placeholder("passwordHash"),
      language: sql.placeholder("language"),
      active: true,
      createdAt: sql.placeholder("now"),
      updatedAt: sql.placeholder("now"),
    })
    .prepare(),
);
const insertProfile = prepared((tx: Db) =>
  tx
    .insert(userProfiles)
    .values({ userId: idOfEmail(sql.placeholder("email")), birthDate: sql.placeholder("birthDate"), address: sql.placeholder("address") })
    .prepare(),
);
/** One skill a statement: one prepared statement serves any number of them. */
const insertSkill = prepared((tx: Db) =>
  tx
    .insert(userSkills)
    .values({ userId: idOfEmail(sql.placeholder("email")), name: sql.placeholder("name"), nameKey: sql.placeholder("nameKey") })
    .prepare(),
);

export interface RegisteredUser {
  name: string;
  email: string;
  phone: string | null;
  age: number | null;
  salaryCents: number | null;
  passwordHash: string;
  language: string;
  birthDate: string | null;
  /** The address as one line. */
  address: string;
  skills: { name: string; nameKey: string }[];
}

/** The statements of a registered user for a list unit: the account, its role, welcome and audit row, profile and skills. */
export function registeredUserRows(tx: Db, user: RegisteredUser, now: Date) {
  const { email, birthDate, address, skills, ...account } = user;
  return [
    bound(insertRegistered(tx), { ...account, email, now }),
    ...newUserRows(tx, email, user.name, { actor: email, details: { email, via: "registration" } }, now),
    bound(insertProfile(tx), { email, birthDate, address }),
    ...skills.map((skill) => bound(insertSkill(tx), { email, ...skill })),
  ];
}

/** One INSERT … SELECT per set of role names (unknown names grant nothing): a statement fewer in every create. */
const grantStatement = prepared((tx: Db, names: string) =>
  tx
    .insert(userRoles)
    .select(
      tx
        .select({ userId: sql<number>`${sql.placeholder("userId")}`.as("user_id"), roleId: roles.id })
        .from(roles)
        .where(inArray(roles.name, names.split(","))),
    )
    .onConflictDoNothing()
    .prepare(),
);

export async function grantRoles(tx: Db, userId: number, names: string[]) {
  if (names.length > 0) await grantStatement(tx, [...names].sort().join(",")).run({ userId });
}

/** The user keeps only the roles granted next (grantRoles). */
export async function dropRoles(tx: Db, userId: number) {
  await tx.delete(userRoles).where(eq(userRoles.userId, userId));
}

const idByEmail = prepared((db: Reader) =>
  db
    .select({ id: users.id })
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);

/**
 * Whether an account holds `email`. `spares: true` for a check that only spares work before a
 * write whose unique index decides anyway (a sign-up's argon2): a replica answers it from its copy,
 * without the miss's round trip to the primary.
 */
export async function emailTaken(db: Reader, email: string, { spares = false } = {}) {
  const read = (source: Reader) => idByEmail(source).all({ email: normalizeEmail(email) });
  const [row] = await (spares ? read(db) : foundOrAgain(db, read));
  return row !== undefined;
}

/** The user's version and e-mail, for a change that checks the version it expects. */
export async function versionAndEmail(db: Reader, id: number): Promise<UserAt | undefined> {
  const [current] = await db.select({ id: users.id, version: users.version, email: users.email }).from(users).where(eq(users.id, id));
  return current;
}

/** A user as a change found them: the change's statements write only while the user still is. */
export interface UserAt {
  id: number;
  version: number;
  email: string;
}

/** A change of a user's columns; `endBearerTokens`: every bearer token issued to them so far stops working; a `department` by name (null: none). */
export type UserChanges = Partial<Pick<typeof users.$inferInsert, "name" | "email" | "passwordHash">> & {
  department?: string | null;
  endBearerTokens?: boolean;
};

/** The user is still as the change found them (the placeholders atId, atVersion, atEmail): the condition of each of the change's statements. */
const stillAt = sql`exists (select 1 from ${users} where ${users.id} = ${sql.placeholder("atId")} and ${users.version} = ${sql.placeholder("atVersion")} and ${users.email} = ${sql.placeholder("atEmail")})`;
const atValues = (at: UserAt) => ({ atId: at.id, atVersion: at.version, atEmail: at.email });

/** The change's shape: which columns it sets (a bounded set, one prepared statement each). */
const shapeOf = (changes: UserChanges) =>
  [
    changes.name !== undefined && "name",
    changes.email !== undefined && "email",
    changes.passwordHash !== undefined && "password",
    changes.department === null ? "no-department" : changes.department !== undefined && "department",
    changes.endBearerTokens && "end-tokens",
  ]
    .filter(Boolean)
    .join(",");

const updateStillAt = prepared((tx: Db, shape: string) => {
  const has = new Set(shape.split(","));
  const set: Record<string, unknown> = { updatedAt: placeholder<Date>("now"), version: sql`${users.version} + 1` };
  if (has.has("name")) set.name = sql.placeholder("name");
  // A new address is unconfirmed, and a link mailed to the old one must not confirm it.
  if (has.has("email")) Object.assign(set, { email: sql.placeholder("email"), emailVerified: false, emailChangedAt: placeholder<Date>("now") });
  if (has.has("password")) set.passwordHash = sql.placeholder("passwordHash");
  if (has.has("no-department")) set.departmentId = null;
  if (has.has("department")) set.departmentId = sql`(select ${departments.id} from ${departments} where ${departments.name} = ${sql.placeholder("department")})`;
  if (has.has("end-tokens")) set.tokenVersion = sql`${users.tokenVersion} + 1`;
  return tx
    .update(users)
    .set(set)
    .where(and(eq(users.id, sql.placeholder("atId")), eq(users.version, sql.placeholder("atVersion")), eq(users.email, sql.placeholder("atEmail"))))
    .returning({ id: users.id })
    .prepare();
});

/** The named department, created on first use, while the user is still as the change found them. */
const departmentStillAt = prepared((tx: Db) => departmentWhen(tx, stillAt).prepare());

/** Every account token of the user void (an e-mail change: no earlier link works any more), while the user is still as the change found them. */
const accountTokensStillAt = prepared((tx: Db) =>
  tx
    .delete(accountTokens)
    .where(and(eq(accountTokens.userId, sql.placeholder("atId")), stillAt))
    .prepare(),
);

/** A notification about the user (its payload JSON text) to `recipient`, while the user is still as the change found them. */
const mailStillAt = prepared((tx: Db, kind) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(notificationSelection(kind as NotificationKind, placeholder<string>("recipient"), sql`${sql.placeholder("payload")}`, placeholder<Date>("at")))
        .from(sql`(select 1)`)
        .where(stillAt),
    )
    .prepare(),
);

/** An audit row about the user, while the user is still as the change found them. */
const auditStillAt = prepared((tx: Db) =>
  tx
    .insert(auditLog)
    .select(
      tx
        .select(
          auditSelection({
            action: sql`${sql.placeholder("action")}`,
            actor: sql`${sql.placeholder("actor")}`,
            subjectType: "User",
            subjectId: sql`${sql.placeholder("subjectId")}`,
            details: sql`${sql.placeholder("details")}`,
            at: sql`${sql.placeholder("at")}`,
          }),
        )
        .from(sql`(select 1)`)
        .where(stillAt),
    )
    .prepare(),
);

/** What a change of a user writes beside its columns, each only while the user is still as the change found them. */
export interface ChangeSideRows {
  /** Every account token void (an e-mail change). */
  revokeAccountTokens?: boolean;
  mails?: { kind: NotificationKind; recipient: string }[];
  audit?: { action: string; actor: string; details: Record<string, unknown> };
}

/**
 * A change of a user as statements of one list unit (one round trip to a remote primary), every
 * one of them conditioned on the user being still as `at` says (id, version, e-mail): its
 * department (created on first use), the side rows, then the columns with the version +1. The last
 * statement answers the user's id, or no row when the user was not as `at` says: nothing was written.
 */
export function changeStillAt(tx: Db, at: UserAt, changes: UserChanges, side: ChangeSideRows, now: Date) {
  const where = atValues(at);
  const department = changes.department?.trim() || (changes.department === undefined ? undefined : null);
  const set = { ...changes, department };
  return {
    department: department ? bound(departmentStillAt(tx), { ...where, department, createdAt: now.getTime() }) : undefined,
    accountTokens: side.revokeAccountTokens ? bound(accountTokensStillAt(tx), where) : undefined,
    mails: (side.mails ?? []).map(({ kind, recipient }) =>
      bound(mailStillAt(tx, kind), traced({ ...where, recipient, payload: JSON.stringify({ userId: at.id }), at: now.getTime() })),
    ),
    audit: side.audit
      ? bound(auditStillAt(tx), {
          ...where,
          action: side.audit.action,
          actor: side.audit.actor,
          subjectId: String(at.id),
          details: JSON.stringify(side.audit.details),
          at: now.getTime(),
        })
      : undefined,
    updated: bound(updateStillAt(tx, shapeOf(set)), { ...where, ...set, now }),
  };
}

/**
 * Whether `userId` is the last active ADMIN: a change that ends that would leave nobody to manage
 * users. Asked inside the change's transaction when `userId` is about to stop being an ADMIN.
 */
export async function isLastAdmin(tx: Reader, userId: number): Promise<boolean> {
  const adminsOf = (userFilter: SQL) =>
    tx
      .select({ n: count() })
      .from(userRoles)
      .innerJoin(roles, eq(roles.id, userRoles.roleId))
      .innerJoin(users, eq(users.id, userRoles.userId))
      .where(and(eq(roles.name, "ADMIN"), eq(users.active, true), userFilter));
  const [target] = await adminsOf(eq(users.id, userId));
  if (target.n === 0) return false;
  const [others] = await adminsOf(ne(users.id, userId));
  return others.n === 0;
}

/** Deletes the user (their roles, profile, skills and tokens go with them): the e-mail it had, or undefined when there was none. */
export async function deleteUserRow(tx: Db, id: number): Promise<string | undefined> {
  const [deleted] = await tx.delete(users).where(eq(users.id, id)).returning({ email: users.email });
  return deleted?.email;
}

/** Activates or deactivates the user (version +1; deactivating revokes every bearer token too): false when it already was so, or is missing. */
export async function setActiveFlag(tx: Db, id: number, active: boolean, now: Date): Promise<boolean> {
  const changed = await tx
    .update(users)
    .set({ active, updatedAt: now, version: sql`${users.version} + 1`, ...(active ? {} : { tokenVersion: sql`${users.tokenVersion} + 1` }) })
    .where(and(eq(users.id, id), ne(users.active, active)))
    .returning({ id: users.id });
  return changed.length > 0;
}

/** Every bearer token issued to the user so far stops working (the guard checks the token version): the user's id, or no row. */
const bumpTokenVersion = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ tokenVersion: sql`${users.tokenVersion} + 1` })
    .where(eq(users.id, sql.placeholder("id")))
    .returning({ id: users.id })
    .prepare(),
);
export const tokenVersionBump = (tx: Db, id: number) => bound(bumpTokenVersion(tx), { id });

/** The version +1 and a new updatedAt, as any change of the user marks it: false when the user is missing. */
export async function markChanged(tx: Db, id: number, now: Date): Promise<boolean> {
  const updated = await tx
    .update(users)
    .set({ version: sql`${users.version} + 1`, updatedAt: now })
    .where(eq(users.id, id))
    .returning({ id: users.id });
  return updated.length > 0;
}

/** What the access guard reads of the user a bearer token names, prepared once per handle. */
const holderColumns = {
  id: users.id,
  email: users.email,
  active: users.active,
  tokenVersion: users.tokenVersion,
  createdAt: users.createdAt,
  emailChangedAt: users.emailChangedAt,
  roles: roleNamesOfUser,
  /** Whether the token's signing key was withdrawn (`usersvc keys rotate --revoke`). */
  keyRevoked: keyRevoked(sql.placeholder("kid")),
};
const callerByEmail = prepared((db: Reader) =>
  db
    .select(holderColumns)
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);

/** A column or expression of a select, by position. */
type Selected = SQL | SQLiteColumn;

/** A user to read in the same statement as the caller (withUserById): the read fills `user` in, when there is one. */
export interface AlsoUser {
  id: number;
  user?: User;
}

/**
 * A guard's read of its caller (one row) and, in the same statement, the User with the id
 * "userId": a UNION ALL whose rows are the caller's columns after a 0, and the user's
 * (userColumns) after a 1, absent when there is none. Served, a bun:sqlite statement costs ~10 µs
 * between network events whatever it reads, the user's row ~5 µs more in the caller's statement
 * (a bare Bun.serve on the bench's database, server CPU per request): GET /api/users/{id} runs one
 * statement instead of two. `read` selects the caller's columns, given positionally; the shorter side is padded with nulls.
 */
export function withUserById(db: Reader, read: (columns: Record<string, Selected>) => { unionAll: (other: never) => unknown }, callerColumns: Selected[]) {
  const userValues: Selected[] = Object.values(userColumns);
  // Both sides as wide as the wider: a grant's read (store/oauth.ts) has more columns than a user.
  const width = Math.max(userValues.length, callerColumns.length);
  const positional = (kind: number, columns: Selected[]) =>
    Object.fromEntries([sql.raw(String(kind)), ...columns, ...Array.from({ length: width - columns.length }, () => sql`null`)].map((column, i) => [`c${i}`, column]));
  const user = db
    .select(positional(1, userValues))
    .from(users)
    .where(eq(users.id, sql.placeholder("userId")));
  return read(positional(0, callerColumns)).unionAll(user as never) as { prepare(): { values(values: Record<string, unknown>): unknown } };
}

/**
 * Runs a guard's caller read, or its withUserById form when `also` asks for a user: the caller's
 * values as `holder` maps them (undefined when there is no such caller), `also.user` filled in.
 * At once on the embedded driver, whose reads answer at once.
 */
export function readCaller<H>(single: () => unknown, withUser: () => unknown, also: AlsoUser | undefined, holder: (values: ArrayLike<unknown>) => H): MaybePromise<H | undefined> {
  if (!also) return andThen(single() as MaybePromise<ArrayLike<unknown>[]>, (rows) => rows[0] && holder(rows[0]));
  return andThen(withUser() as MaybePromise<ArrayLike<unknown>[]>, (rows) => {
    let caller: ArrayLike<unknown> | undefined;
    for (const row of rows) {
      const values = Array.prototype.slice.call(row, 1);
      if (row[0] === 0) caller = values;
      else also.user = toUserFromValues(values);
    }
    return caller && holder(caller);
  });
}

const callerByEmailWithUser = prepared((db: Reader) =>
  withUserById(
    db,
    (columns) =>
      db
        .select(columns)
        .from(users)
        .where(eq(users.email, sql.placeholder("email"))),
    Object.values(holderColumns),
  ).prepare(),
);

const holderAt = positionsOf(holderColumns);
/** A row of holderColumns, as raw values (instants as epoch milliseconds, flags as 0/1). */
const holderOf = (v: ArrayLike<unknown>) => ({
  id: v[holderAt.id] as number,
  email: v[holderAt.email] as string,
  active: Boolean(v[holderAt.active]),
  tokenVersion: v[holderAt.tokenVersion] as number,
  createdAt: new Date(v[holderAt.createdAt] as number),
  emailChangedAt: v[holderAt.emailChangedAt] === null ? null : new Date(v[holderAt.emailChangedAt] as number),
  roles: v[holderAt.roles] as string | null,
  keyRevoked: Boolean(v[holderAt.keyRevoked]),
});
/** The account a bearer token without a session names, as the guard checks it. */
export type TokenHolder = ReturnType<typeof holderOf>;

/**
 * The user a bearer token names (by e-mail), as the guard checks it: read as raw values, in
 * holderColumns' order, since drizzle's generic row mapping cost more than the read.
 */
export function tokenHolder(db: Reader, email: string, kid = "", also?: AlsoUser) {
  return readCaller(
    () => callerByEmail(db).values({ email, kid }),
    () => callerByEmailWithUser(db).values({ email, kid, userId: also?.id }),
    also,
    holderOf,
  );
}

/** What a login checks of the account with an e-mail. */
export type LoginAccount = {
  id: number;
  passwordHash: string | null;
  active: boolean;
  tokenVersion: number;
  emailVerified: boolean;
  lastLogin: Date | null;
  secondFactors: number;
};

const accountByEmail = prepared((db: Reader) =>
  db
    .select({
      id: users.id,
      passwordHash: users.passwordHash,
      active: users.active,
      tokenVersion: users.tokenVersion,
      emailVerified: users.emailVerified,
      lastLogin: users.lastLogin,
      // Whether a right password is only the first step (store/mfa.ts): in the same read.
      secondFactors: secondFactorsOf(),
    })
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);
/** The account a login checks, as a statement of a read unit. */
export const loginAccount = (db: Reader, email: string) => bound(accountByEmail(db), { email });

const setLastLogin = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ lastLogin: placeholder<Date>("lastLogin") })
    .where(eq(users.id, sql.placeholder("id")))
    .prepare(),
);
export const lastLoginStatement = (tx: Db, id: number, lastLogin: Date) => bound(setLastLogin(tx), { lastLogin, id });

/** A legacy BCrypt hash becomes argon2id, unless the password changed meanwhile. */
const rehashPassword = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ passwordHash: placeholder<string>("rehash") })
    .where(and(eq(users.id, sql.placeholder("id")), eq(users.passwordHash, sql.placeholder("passwordHash"))))
    .prepare(),
);
export const rehashStatement = (tx: Db, id: number, passwordHash: string, rehash: string) => bound(rehashPassword(tx), { rehash, id, passwordHash });

/** A new password, and every earlier bearer token revoked: answers the new token version. */
const setPassword = prepared((tx: Db) =>
  tx
    .update(users)
    .set({
      passwordHash: placeholder<string>("passwordHash"),
      tokenVersion: sql`${users.tokenVersion} + 1`,
      updatedAt: placeholder<Date>("updatedAt"),
    })
    .where(eq(users.id, sql.placeholder("id")))
    .returning({ tokenVersion: users.tokenVersion })
    .prepare(),
);
export const newPasswordStatement = (tx: Db, id: number, passwordHash: string, updatedAt: Date) => bound(setPassword(tx), { passwordHash, updatedAt, id });

/** A completed password reset: the new password, every bearer token revoked, the address verified; the user's e-mail. */
export async function resetPassword(tx: Db, id: number, passwordHash: string, now: Date): Promise<string> {
  const [user] = await tx
    .update(users)
    .set({ passwordHash, tokenVersion: sql`${users.tokenVersion} + 1`, emailVerified: true, updatedAt: now })
    .where(eq(users.id, id))
    .returning({ email: users.email });
  return user.email;
}

/** Whether the user's address is verified; undefined for a missing user. */
export async function emailVerifiedOf(tx: Reader, id: number): Promise<boolean | undefined> {
  const [user] = await tx.select({ emailVerified: users.emailVerified }).from(users).where(eq(users.id, id));
  return user?.emailVerified;
}

export async function markEmailVerified(tx: Db, id: number) {
  await tx.update(users).set({ emailVerified: true }).where(eq(users.id, id));
}

/** Whether the account with an e-mail is active (for a password-reset request): its id, or no row. */
export const userStatusByEmail = (tx: Reader, email: string) => tx.select({ id: users.id, active: users.active }).from(users).where(eq(users.email, email));

/** What a mail greets its recipient with: the name and language of the user, if there is one, and whether the address is confirmed. */
export async function greetingOf(db: Reader, id: number): Promise<{ name: string; language: string; emailVerified: boolean } | undefined> {
  const [user] = await db.select({ name: users.name, language: users.language, emailVerified: users.emailVerified }).from(users).where(eq(users.id, id));
  return user;
}

const emailById = prepared((db: Reader) =>
  db
    .select({ email: users.email })
    .from(users)
    .where(eq(users.id, sql.placeholder("id")))
    .prepare(),
);
/** The user's e-mail (no row for a missing user), as a statement of a read unit. */
export const emailOfUser = (db: Reader, id: number) => bound(emailById(db), { id });

/** Active users through users_active_age_idx (a covering index range, never the table). */
export const countActiveUsers = async (db: Reader) => (await db.select({ n: count() }).from(users).where(eq(users.active, true)))[0].n;
export const countUsers = async (db: Reader) => (await db.select({ n: count() }).from(users))[0].n;

/** The account with an e-mail: its id, and whether it is an ADMIN. */
export async function adminStatusOf(db: Reader, email: string): Promise<{ id: number; admin: boolean } | undefined> {
  const [row] = await db.select({ id: users.id, roles: roleNamesOfUser }).from(users).where(eq(users.email, email));
  return row && { id: row.id, admin: (row.roles?.split(",") ?? []).includes("ADMIN") };
}

/** A new active, verified account: its id. */
export async function insertVerifiedUser(tx: Db, user: { name: string; email: string; passwordHash: string | null }, at: Date): Promise<number> {
  const [{ id }] = await tx
    .insert(users)
    .values({ ...user, active: true, emailVerified: true, createdAt: at, updatedAt: at })
    .returning({ id: users.id });
  return id;
}

/** The account active and verified again with this password, every bearer token it held ended (version +1). */
export async function promoteToAdmin(tx: Db, id: number, passwordHash: string, at: Date) {
  await tx
    .update(users)
    .set({
      passwordHash,
      tokenVersion: sql`${users.tokenVersion} + 1`,
      version: sql`${users.version} + 1`,
      active: true,
      emailVerified: true,
      updatedAt: at,
    })
    .where(eq(users.id, id));
}

/** Whether an active user's last login is before the cutoff (a null lastLogin never is). */
const inactiveSince = (cutoff: Date) => and(eq(users.active, true), lt(users.lastLogin, cutoff));

/** The active ADMINs, the last logged in first, each with whether they are inactive since the cutoff. */
export function activeAdmins(tx: Reader, cutoff: Date) {
  return tx
    .select({ id: users.id, inactive: sql<number>`${inactiveSince(cutoff)}` })
    .from(users)
    .innerJoin(userRoles, eq(userRoles.userId, users.id))
    .innerJoin(roles, and(eq(roles.id, userRoles.roleId), eq(roles.name, "ADMIN")))
    .where(eq(users.active, true))
    .orderBy(desc(users.lastLogin), desc(users.id));
}

/**
 * Deactivates every active user whose last login is before the cutoff, but `kept`, ending their
 * bearer tokens (token version +1): how many.
 */
export async function deactivateLoggedInBefore(tx: Db, cutoff: Date, now: Date, kept?: number): Promise<number> {
  const { length } = await tx
    .update(users)
    .set({ active: false, updatedAt: now, version: sql`${users.version} + 1`, tokenVersion: sql`${users.tokenVersion} + 1` })
    .where(kept === undefined ? inactiveSince(cutoff) : and(inactiveSince(cutoff), ne(users.id, kept)))
    .returning({ id: users.id });
  return length;
}

export async function userExists(db: Reader, id: number) {
  const [row] = await foundOrAgain(db, (source) => source.select({ id: users.id }).from(users).where(eq(users.id, id)));
  return row !== undefined;
}

export type DepartmentRow = { id: number; name: string; description: string | null; createdAt: Date; userCount: number };

/** Every department by name, with how many users belong to it. */
export function listDepartments(db: Reader): Promise<DepartmentRow[]> {
  return db
    .select({
      id: departments.id,
      name: departments.name,
      description: departments.description,
      createdAt: departments.createdAt,
      userCount: sql<number>`(select count(*) from users u where u.department_id = "departments"."id")`,
    })
    .from(departments)
    .orderBy(asc(departments.name));
}

/** A new department, as a unit of its own (the unique index on the name decides between two concurrent creates). */
export async function insertDepartment(db: Database, department: { name: string; description: string | null }, now: Date) {
  const [[row]] = await db.writeAll((tx) => [
    tx
      .insert(departments)
      .values({ ...department, createdAt: now })
      .returning(),
  ]);
  return row;
}

export function listRoles(db: Reader) {
  return db.select({ id: roles.id, name: roles.name, description: roles.description }).from(roles).orderBy(asc(roles.id));
}

export type ProfileRow = typeof userProfiles.$inferSelect;

export async function profileOf(db: Reader, userId: number): Promise<ProfileRow | undefined> {
  const [row] = await db.select().from(userProfiles).where(eq(userProfiles.userId, userId));
  return row;
}

/** Creates or replaces the whole profile. */
export async function putProfileRow(tx: Db, profile: ProfileRow) {
  const { userId: _userId, ...fields } = profile;
  await tx.insert(userProfiles).values(profile).onConflictDoUpdate({ target: userProfiles.userId, set: fields });
}
