/**
 * The users business layer: plain functions over the database, usable without HTTP.
 * Every change runs in one transaction; uniqueness of e-mail is decided by the unique
 * index, so concurrent creates of one address give one user and DUPLICATE_EMAIL for the rest.
 */
import { and, asc, count, desc, eq, inArray, ne, notExists, sql, type AnyColumn, type SQL } from "drizzle-orm";
import type { SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import { limitOffset, type Page, withPlaceholderPage } from "../../paging";
import type { Database, Db, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import type { Statement } from "../../db/database";
import { auditLog, departments, roles, userRoles, users } from "../../db/schema";
import { AppError, integrityKind } from "../../errors";
import type { Metrics } from "../../metrics";
import { timed } from "../../metrics";
import { enqueueNotification, notificationStatement, traced, writeAudit } from "../notifications/outbox";
import { hashPassword } from "../auth/passwords";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../auth/password-policy";
import { revokeTokens } from "../account/tokens";
import type { SORTABLE_FIELDS, User, UserBody, UserPatch } from "./model";

export interface UsersDeps {
  db: Database;
  metrics: Metrics;
  logger: { warn(obj: object, msg: string): void };
  /** The app's clock (ctx.now): timestamps of users, their audit entries and notifications. */
  now: () => number;
}

/**
 * A user's role names, comma-separated. Written with explicit aliases: drizzle leaves columns
 * unqualified in single-table selects, which would bind "id" to the inner table.
 */
export const roleNamesOfUser = sql<string | null>`(select group_concat(r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = "users"."id")`;

/**
 * The department's name, as a scalar subquery rather than a LEFT JOIN: the same answer, but a
 * point read by id took 13 µs with the join and 3.6 µs with this (bun:sqlite, 10,000 users:
 * the join was the largest part of GET /api/users/{id} in the CPU profile, npm run bench).
 */
const departmentNameOfUser = sql<string | null>`(select d.name from departments d where d.id = "users"."department_id")`;

/** Everything a User answer shows, in one query: the department name and role names come along. */
export const userColumns = {
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

/** A row of userColumns as drizzle reads it (the department, left-joined, may be null). */
type UserRow = Awaited<ReturnType<ReturnType<typeof findById>["all"]>>[number];

/** An instant as drizzle maps it (Date) or as the driver stores it (epoch milliseconds). */
type Instant = Date | number;
const iso = (instant: Instant) => (typeof instant === "number" ? new Date(instant) : instant).toISOString();

/** A row as drizzle maps it, or with its instants and flags as stored. */
type Unmapped<T> = { [K in keyof T]: T[K] extends Date ? Instant : T[K] extends Date | null ? Instant | null : T[K] extends boolean ? boolean | number : T[K] };

export function toUser(row: Unmapped<UserRow>): User {
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

/**
 * A row of userColumns read with `.values()`: the driver's values in userColumns' order
 * (instants as epoch milliseconds, flags as 0/1), indexed rather than destructured because
 * libsql's rows are array-like, not iterable. Skipping drizzle's generic per-field mapping
 * took a sixth off a 10-user search page (in-process, app.handle, main-thread CPU).
 */
export const toUserFromValues = (v: ArrayLike<unknown>): User =>
  toUser({
    id: v[0] as number,
    name: v[1] as string,
    email: v[2] as string,
    department: v[3] as string | null,
    phone: v[4] as string | null,
    active: v[5] as number,
    createdAt: v[6] as number,
    updatedAt: v[7] as number,
    lastLogin: v[8] as number | null,
    version: v[9] as number,
    roles: v[10] as string | null,
    emailVerified: v[11] as number,
  });

/** The users matching `where` (all when undefined), as API Users. */
export function selectUsers(db: Reader, where?: SQL) {
  const query = db.select(userColumns).from(users);
  return where ? query.where(where) : query;
}

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** findUser's query, prepared once per handle (src/db/prepared.ts), as every hot path's. */
export const findById = prepared((db: Reader) => selectUsers(db, eq(users.id, sql.placeholder("id"))).prepare());

export async function findUser(db: Reader, id: number): Promise<User> {
  // Raw values, mapped by position: drizzle's per-field row mapping was a tenth of GET /api/users/{id}.
  const [row] = (await findById(db).values({ id })) as ArrayLike<unknown>[];
  if (!row) throw new AppError("USER_NOT_FOUND", { id });
  return toUserFromValues(row);
}

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
export const sortValueIndex = (sort: string | undefined) => Object.keys(userColumns).indexOf(sortOf(sort).field);

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

/** A page's statement per sort (one of SORT_COLUMNS, either direction). Unpaged lists are read in chunks: search/service.ts userChunks. */
const userPage = prepared((r: Reader, sort: string) =>
  withPlaceholderPage(
    selectUsers(r)
      .orderBy(...orderBy(sort))
      .$dynamic(),
  ).prepare(),
);
const userCount = prepared((r: Reader) => r.select({ total: count() }).from(users).prepare());

export async function listUsers(db: Pick<Database, "readAll">, page: Page, sortParameter: string | undefined) {
  // The shape from a bounded set, never the raw parameter (unknown fields sort by id, as orderBy does).
  const { field, descending } = sortOf(sortParameter);
  const sort = `${field},${descending ? "desc" : "asc"}`;
  // One read unit: one round trip to a remote primary, and the page and its total agree.
  const [rows, [{ total }]] = (await db.readAll((r: Reader) => [bound(userPage(r, sort), limitOffset(page)), bound(userCount(r), {})])) as [UserRow[], { total: number }[]];
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

export async function departmentId(tx: Db, name: string | undefined): Promise<number | null> {
  const trimmed = name?.trim();
  if (!trimmed) return null;
  await addDepartment(tx).run({ name: trimmed, createdAt: new Date() });
  const [row] = await departmentByName(tx).all({ name: trimmed });
  return row.id;
}

/** The id of the user a list unit has just inserted, found by its unique e-mail (no answer comes back mid-unit). */
export const idOfEmail = (email: string | SQL.Aliased | ReturnType<typeof sql.placeholder>) => sql<number>`(select ${users.id} from ${users} where ${users.email} = ${email})`;

/** What follows a new user's row in its list unit, prepared once per handle: the USER role, the welcome and the audit row. */
const newUserStatements = prepared((tx: Db) => {
  const id = idOfEmail(sql.placeholder("email"));
  const at = sql.placeholder("now") as unknown as Date;
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
    notificationStatement(tx, "WELCOME", sql.placeholder("email") as unknown as string, sql`json_object('userId', ${id}, 'name', ${sql.placeholder("name")})`, at).prepare(),
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
export function newUserRows(tx: Db, email: string, name: string, audit: { actor: string; details: Record<string, unknown> }, now: Date) {
  const values = { email, name, actor: audit.actor, details: audit.details, now };
  return newUserStatements(tx).map((statement) => bound(statement, traced(values)));
}

/**
 * A new user's department, created on first use while the e-mail is free: a create that then
 * fails on its e-mail has changed no row, so the group commit it shares with other creates has
 * nothing of it to undo (src/db/native.ts).
 */
const addDepartmentIfEmailFree = prepared((tx: Db) =>
  tx
    .insert(departments)
    .select(
      tx
        .select({
          id: sql<null>`null`.as("id"),
          name: sql<string>`${sql.placeholder("name")}`.as("name"),
          description: sql<null>`null`.as("description"),
          createdAt: sql<number>`${sql.placeholder("createdAt")}`.as("created_at"),
        })
        .from(sql`(select 1)`)
        .where(
          notExists(
            tx
              .select({ id: users.id })
              .from(users)
              .where(eq(users.email, sql.placeholder("email"))),
          ),
        ),
    )
    .onConflictDoNothing()
    .prepare(),
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
/** The User with an e-mail, as a list unit reads a new user back. */
export const userByEmail = prepared((db: Reader) => selectUsers(db, eq(users.email, sql.placeholder("email"))).prepare());

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

/** A unique-index failure on users.email, whichever statement hit it. */
function duplicateEmail(error: unknown, email: string) {
  return integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
}

const idByEmail = prepared((db: Reader) =>
  db
    .select({ id: users.id })
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);

export async function emailTaken(db: Reader, email: string) {
  const [row] = await idByEmail(db).all({ email: normalizeEmail(email) });
  return row !== undefined;
}

export async function createUser(deps: UsersDeps & PasswordPolicyDeps, input: UserBody, actor: string): Promise<User> {
  return timed(deps.metrics, "create", async () => {
    const email = normalizeEmail(input.email);
    const name = input.name.trim();
    const department = input.department?.trim() || undefined;
    if (input.password) await assertPasswordAllowed(deps, input.password, email);
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const now = new Date();
    try {
      // One list unit (one round trip to a remote primary): the user, its role, the welcome and
      // the audit row commit together, and the last statement reads the answer back. The unique
      // index on e-mail decides a duplicate, also between concurrent creates.
      // Every statement is prepared: the native driver builds no SQL per create.
      const results = await deps.db.writeAll(
        (tx) =>
          [
            ...(department ? [bound(addDepartmentIfEmailFree(tx), { name: department, email, createdAt: now.getTime() })] : []),
            bound(insertNewUser(tx, department ? "department" : ""), { name, email, department, phone: input.phone ?? null, passwordHash, now }),
            ...newUserRows(tx, email, name, { actor, details: { email } }, now),
            bound(userByEmail(tx), { email }),
          ] as unknown as [Statement, ...Statement[]],
      );
      deps.metrics.usersCreated.inc();
      const [row] = results[results.length - 1] as UserRow[];
      return toUser(row);
    } catch (error) {
      throw duplicateEmail(error, email);
    }
  });
}

/** Version check for PUT/PATCH: the body's `version` or an If-Match header, whichever is given. */
export function expectedVersion(bodyVersion: number | undefined, ifMatch: string | null | undefined): number | undefined {
  if (bodyVersion !== undefined) return bodyVersion;
  if (!ifMatch || ifMatch.trim() === "*") return undefined;
  const parsed = Number(ifMatch.replace(/^W\//, "").replaceAll('"', "").trim());
  return Number.isInteger(parsed) ? parsed : -1;
}

/**
 * An e-mail change ends every token issued so far (the address may pass to another account,
 * and a token must not follow it) and tells the old address; a password set by an ADMIN ends
 * them too. Whether the caller may make the change (their password, their role) is the route's.
 */
async function applyUpdate(
  deps: UsersDeps & PasswordPolicyDeps,
  id: number,
  changes: { name?: string; email?: string; department?: string | null; password?: string },
  expected: number | undefined,
  operation: string,
): Promise<User> {
  return timed(deps.metrics, operation, async () => {
    const email = changes.email === undefined ? undefined : normalizeEmail(changes.email);
    // Judged against the address the account will have (read only when the policy looks at it).
    if (changes.password !== undefined) await assertPasswordAllowed(deps, changes.password, async () => email ?? (await findUser(deps.db, id)).email);
    // Hashed before the unit, which awaits nothing but the database.
    const passwordHash = changes.password === undefined ? undefined : await hashPassword(changes.password);
    try {
      await deps.db.write(async (tx) => {
        const [current] = await tx.select({ version: users.version, email: users.email }).from(users).where(eq(users.id, id));
        if (!current) throw new AppError("USER_NOT_FOUND", { id });
        if (expected !== undefined && expected !== current.version) throw new AppError("OPTIMISTIC_LOCK_CONFLICT");
        if (email !== undefined && email !== current.email && (await emailTaken(tx, email))) throw new AppError("DUPLICATE_EMAIL", { email });
        const at = new Date(deps.now());
        const set: SQLiteUpdateSetSource<typeof users> = { updatedAt: at, version: current.version + 1 };
        if (changes.name !== undefined) set.name = changes.name.trim();
        const emailChanges = email !== undefined && email !== current.email;
        if (emailChanges) {
          // A new address is unconfirmed, and a link mailed to the old one must not confirm it.
          Object.assign(set, { email, emailVerified: false, emailChangedAt: at });
          await revokeTokens(tx, id);
          await enqueueNotification(tx, "EMAIL_CHANGED", current.email, { userId: id }, at);
        }
        if (passwordHash !== undefined) {
          set.passwordHash = passwordHash;
          await enqueueNotification(tx, "PASSWORD_CHANGED", email ?? current.email, { userId: id }, at);
        }
        if (emailChanges || passwordHash !== undefined) set.tokenVersion = sql`${users.tokenVersion} + 1`;
        if (changes.department !== undefined) set.departmentId = await departmentId(tx, changes.department ?? undefined);
        // The version in the WHERE makes the check and the write one step.
        const updated = await tx
          .update(users)
          .set(set)
          .where(and(eq(users.id, id), eq(users.version, current.version)))
          .returning({ id: users.id });
        if (updated.length === 0) throw new AppError("OPTIMISTIC_LOCK_CONFLICT");
      });
    } catch (error) {
      throw email ? duplicateEmail(error, email) : error;
    }
    const user = await findUser(deps.db, id);
    // The update notification is not part of the update: failing to queue it never undoes it.
    try {
      await deps.db.write((tx) => enqueueNotification(tx, "USER_UPDATED", user.email, { userId: id }, new Date(deps.now())));
    } catch (error) {
      deps.logger.warn({ err: error, userId: id }, "user-updated notification not queued");
    }
    return user;
  });
}

/** PUT: replaces name, email and department (absent department clears it); sets a given password. */
export function replaceUser(deps: UsersDeps & PasswordPolicyDeps, id: number, input: UserBody, ifMatch?: string | null) {
  const changes = { name: input.name, email: input.email, department: input.department ?? null, password: input.password };
  return applyUpdate(deps, id, changes, expectedVersion(input.version, ifMatch), "update");
}

/** PATCH: changes only the supplied fields among name, email, department and password. */
export function patchUser(deps: UsersDeps & PasswordPolicyDeps, id: number, input: UserPatch, ifMatch?: string | null) {
  return applyUpdate(deps, id, { name: input.name, email: input.email, department: input.department, password: input.password }, expectedVersion(input.version, ifMatch), "patch");
}

/**
 * Refuses a change that would leave no active ADMIN (nobody could manage users any more).
 * Call it inside the change's transaction when `userId` is about to stop being an ADMIN.
 */
export async function keepAnAdmin(tx: Reader, userId: number) {
  const adminsOf = (userFilter: SQL) =>
    tx
      .select({ n: count() })
      .from(userRoles)
      .innerJoin(roles, eq(roles.id, userRoles.roleId))
      .innerJoin(users, eq(users.id, userRoles.userId))
      .where(and(eq(roles.name, "ADMIN"), eq(users.active, true), userFilter));
  const [target] = await adminsOf(eq(users.id, userId));
  if (target.n === 0) return;
  const [others] = await adminsOf(ne(users.id, userId));
  if (others.n === 0) throw new AppError("LAST_ADMIN");
}

/** Deletes the user (audited USER_DELETED with the e-mail it had, in the same unit). */
export async function deleteUser(deps: UsersDeps, id: number, actor: string) {
  await timed(deps.metrics, "delete", () =>
    deps.db.write(async (tx) => {
      await keepAnAdmin(tx, id);
      const [deleted] = await tx.delete(users).where(eq(users.id, id)).returning({ email: users.email });
      if (!deleted) throw new AppError("USER_NOT_FOUND", { id });
      await writeAudit(tx, { action: "USER_DELETED", actor, subjectType: "User", subjectId: id, details: { email: deleted.email } }, new Date(deps.now()));
    }),
  );
}

/**
 * Activates or deactivates a user (version +1, audited). Deactivating also revokes every token
 * issued so far and never leaves the service without an active ADMIN (409 LAST_ADMIN).
 * Asking for the state the user is already in changes nothing.
 */
export async function setActive(deps: UsersDeps, id: number, active: boolean, actor: string): Promise<User> {
  const now = new Date();
  await timed(deps.metrics, active ? "activate" : "deactivate", () =>
    deps.db.write(async (tx) => {
      if (!active) await keepAnAdmin(tx, id);
      const changed = await tx
        .update(users)
        .set({ active, updatedAt: now, version: sql`${users.version} + 1`, ...(active ? {} : { tokenVersion: sql`${users.tokenVersion} + 1` }) })
        .where(and(eq(users.id, id), ne(users.active, active)))
        .returning({ id: users.id });
      if (changed.length === 0) {
        await findUser(tx, id); // already so: nothing to do; or 404 USER_NOT_FOUND
        return;
      }
      await writeAudit(tx, { action: active ? "USER_ACTIVATED" : "USER_DEACTIVATED", actor, subjectType: "User", subjectId: id }, now);
    }),
  );
  return findUser(deps.db, id);
}

/** Every token issued to the user so far stops working (the guard checks the token version): the user's id, or no row. */
export const bumpTokenVersion = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ tokenVersion: sql`${users.tokenVersion} + 1` })
    .where(eq(users.id, sql.placeholder("id")))
    .returning({ id: users.id })
    .prepare(),
);

/** Every token issued to the user so far stops working (the guard checks the token version). */
export async function revokeAccessTokens(deps: UsersDeps, id: number, actor: string) {
  const now = new Date();
  await deps.db.write(async (tx) => {
    const revoked = await bumpTokenVersion(tx).all({ id });
    if (revoked.length === 0) throw new AppError("USER_NOT_FOUND", { id });
    await writeAudit(tx, { action: "USER_TOKENS_REVOKED", actor, subjectType: "User", subjectId: id }, now);
  });
}
