/**
 * Departments, roles, profiles and bulk deactivation: plain functions over the database.
 * A User carries its department by NAME (created on first use, see users/service.ts
 * departmentId); these functions manage the departments and the rest of the people model.
 */
import { and, asc, desc, eq, lt, ne, sql } from "drizzle-orm";
import type { Database, Reader } from "../../db/client";
import { departments, roles, userProfiles, userRoles, users } from "../../db/schema";
import { AppError, integrityKind, Violations } from "../../errors";
import { writeAudit } from "../notifications/outbox";
import { findUser, grantRoles, keepAnAdmin } from "../users/service";
import type { User } from "../users/model";
import type { Department, DepartmentBody, ProfileBody, RolesBody, UserProfile } from "./model";

export async function listDepartments(db: Reader): Promise<Department[]> {
  const rows = await db
    .select({
      id: departments.id,
      name: departments.name,
      description: departments.description,
      createdAt: departments.createdAt,
      userCount: sql<number>`(select count(*) from users u where u.department_id = "departments"."id")`,
    })
    .from(departments)
    .orderBy(asc(departments.name));
  return rows.map((d) => ({ ...d, createdAt: d.createdAt.toISOString() }));
}

export async function createDepartment(db: Database, input: DepartmentBody, now: Date): Promise<Department> {
  const name = input.name.trim();
  try {
    const [[row]] = await db.writeAll((tx) => [
      tx
        .insert(departments)
        .values({ name, description: input.description ?? null, createdAt: now })
        .returning(),
    ]);
    return { id: row.id, name: row.name, description: row.description, createdAt: row.createdAt.toISOString(), userCount: 0 };
  } catch (error) {
    // The unique index on the name decides, so two concurrent creates give one department.
    throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_DEPARTMENT", { name }) : error;
  }
}

export function listRoles(db: Reader) {
  return db.select({ id: roles.id, name: roles.name, description: roles.description }).from(roles).orderBy(asc(roles.id));
}

/** Replaces the user's roles with exactly these, as one change of the user (version +1). */
export async function setRoles(db: Database, id: number, input: RolesBody, actor: string, now: Date): Promise<User> {
  await db.write(async (tx) => {
    const updated = await tx
      .update(users)
      .set({ version: sql`${users.version} + 1`, updatedAt: now })
      .where(eq(users.id, id))
      .returning({ id: users.id });
    if (updated.length === 0) throw new AppError("USER_NOT_FOUND", { id });
    const names = [...new Set(input.roles)];
    if (!names.includes("ADMIN")) await keepAnAdmin(tx, id);
    await tx.delete(userRoles).where(eq(userRoles.userId, id));
    await grantRoles(tx, id, names);
    await writeAudit(tx, { action: "USER_ROLES_SET", actor, subjectType: "User", subjectId: id, details: { roles: names } }, now);
  });
  return findUser(db, id);
}

async function assertUserExists(db: Reader, id: number) {
  const [row] = await db.select({ id: users.id }).from(users).where(eq(users.id, id));
  if (!row) throw new AppError("USER_NOT_FOUND", { id });
}

const emptyProfile = (userId: number): UserProfile => ({ userId, avatarUrl: null, bio: null, birthDate: null, address: null });

/** The user's profile; a user who never wrote one has an empty one. */
export async function getProfile(db: Reader, id: number): Promise<UserProfile> {
  await assertUserExists(db, id);
  const [row] = await db.select().from(userProfiles).where(eq(userProfiles.userId, id));
  return row ?? emptyProfile(id);
}

/** PUT: creates or replaces the whole profile (absent fields become null). `today` is yyyy-MM-dd, UTC. */
export async function putProfile(db: Database, id: number, input: ProfileBody, today: string): Promise<UserProfile> {
  if (input.birthDate && input.birthDate >= today) throw new Violations("body", [{ path: "birthDate", key: "field.birthDate.past" }]);
  const profile: UserProfile = { ...emptyProfile(id), ...input, userId: id };
  await db.write(async (tx) => {
    await assertUserExists(tx, id);
    const { userId: _userId, ...fields } = profile;
    await tx.insert(userProfiles).values(profile).onConflictDoUpdate({ target: userProfiles.userId, set: fields });
  });
  return profile;
}

/**
 * Deactivates, in one unit, every active user whose last login is before the cutoff; users who
 * never logged in are left alone (a null lastLogin is never "< cutoff" in SQL). Their tokens end
 * (token version +1, as a single deactivation), so re-activating them revives none. The last
 * active ADMIN stays: when every active ADMIN is inactive since the cutoff, the one who logged in
 * last is skipped (counted in `skipped`), so someone can still manage users.
 */
export async function deactivateInactive(db: Database, cutoff: Date, actor: string, now: Date): Promise<{ count: number; skipped: number }> {
  const inactive = and(eq(users.active, true), lt(users.lastLogin, cutoff));
  return db.write(async (tx) => {
    const activeAdmins = await tx
      .select({ id: users.id, inactive: sql<number>`${inactive}` })
      .from(users)
      .innerJoin(userRoles, eq(userRoles.userId, users.id))
      .innerJoin(roles, and(eq(roles.id, userRoles.roleId), eq(roles.name, "ADMIN")))
      .where(eq(users.active, true))
      .orderBy(desc(users.lastLogin), desc(users.id));
    const kept = activeAdmins.length > 0 && activeAdmins.every((admin) => admin.inactive) ? activeAdmins[0].id : undefined;
    const { length: deactivated } = await tx
      .update(users)
      .set({ active: false, updatedAt: now, version: sql`${users.version} + 1`, tokenVersion: sql`${users.tokenVersion} + 1` })
      .where(kept === undefined ? inactive : and(inactive, ne(users.id, kept)))
      .returning({ id: users.id });
    const skipped = kept === undefined ? 0 : 1;
    await writeAudit(tx, { action: "USERS_DEACTIVATED", actor, subjectType: "User", subjectId: "*", details: { before: cutoff.toISOString(), count: deactivated, skipped } }, now);
    return { count: deactivated, skipped };
  });
}
