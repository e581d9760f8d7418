/**
 * Departments, roles, profiles and bulk deactivation: plain functions over the database.
 * A User carries its department by NAME (created on first use, see store/users.ts
 * departmentId); these functions manage the departments and the rest of the people model.
 */
import type { Database, Reader } from "../../db/database";
import { AppError, integrityKind, Violations } from "../../errors";
import { existing, type User } from "../../models/user";
import { writeAudit } from "../../store/audit";
import {
  activeAdmins,
  deactivateLoggedInBefore,
  dropRoles,
  findUser,
  grantRoles,
  insertDepartment,
  isLastAdmin,
  listDepartments as readDepartments,
  markChanged,
  profileOf,
  putProfileRow,
  userExists,
} from "../../store/users";
import type { Department, DepartmentBody, ProfileBody, RolesBody, UserProfile } from "./model";

export { listRoles } from "../../store/users";

export async function listDepartments(db: Reader): Promise<Department[]> {
  const rows = await readDepartments(db);
  return rows.map((d) => ({ ...d, createdAt: d.createdAt.toISOString() }));
}

export async function createDepartment(db: Database, input: DepartmentBody, now: Date): Promise<Department> {
  const name = input.name.trim();
  try {
    const row = await insertDepartment(db, { name, description: input.description ?? null }, now);
    return { id: row.id, name: row.name, description: row.description, createdAt: row.createdAt.toISOString(), userCount: 0 };
  } catch (error) {
    // The unique index on the name decides, so two concurrent creates give one department.
    throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_DEPARTMENT", { name }) : error;
  }
}

/** Replaces the user's roles with exactly these, as one change of the user (version +1). */
export async function setRoles(db: Database, id: number, input: RolesBody, actor: string, now: Date): Promise<User> {
  await db.write(async (tx) => {
    if (!(await markChanged(tx, id, now))) throw new AppError("USER_NOT_FOUND", { id });
    const names = [...new Set(input.roles)];
    if (!names.includes("ADMIN") && (await isLastAdmin(tx, id))) throw new AppError("LAST_ADMIN");
    await dropRoles(tx, id);
    await grantRoles(tx, id, names);
    await writeAudit(tx, { action: "USER_ROLES_SET", actor, subjectType: "User", subjectId: id, details: { roles: names } }, now);
  });
  return findUser(db, id).then(existing(id));
}

async function assertUserExists(db: Reader, id: number) {
  if (!(await userExists(db, id))) throw new AppError("USER_NOT_FOUND", { id });
}

const emptyProfile = (userId: number): UserProfile => ({ userId, avatarUrl: null, bio: null, birthDate: null, address: null });

/** The user's profile; a user who never wrote one has an empty one. */
export async function getProfile(db: Reader, id: number): Promise<UserProfile> {
  await assertUserExists(db, id);
  return (await profileOf(db, id)) ?? emptyProfile(id);
}

/** PUT: creates or replaces the whole profile (absent fields become null). `today` is yyyy-MM-dd, UTC. */
export async function putProfile(db: Database, id: number, input: ProfileBody, today: string): Promise<UserProfile> {
  if (input.birthDate && input.birthDate >= today) throw new Violations("body", [{ path: "birthDate", key: "field.birthDate.past" }]);
  const profile: UserProfile = { ...emptyProfile(id), ...input, userId: id };
  await db.write(async (tx) => {
    await assertUserExists(tx, id);
    await putProfileRow(tx, profile);
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
  return db.write(async (tx) => {
    const admins = await activeAdmins(tx, cutoff);
    const kept = admins.length > 0 && admins.every((admin) => admin.inactive) ? admins[0].id : undefined;
    const deactivated = await deactivateLoggedInBefore(tx, cutoff, now, kept);
    const skipped = kept === undefined ? 0 : 1;
    await writeAudit(tx, { action: "USERS_DEACTIVATED", actor, subjectType: "User", subjectId: "*", details: { before: cutoff.toISOString(), count: deactivated, skipped } }, now);
    return { count: deactivated, skipped };
  });
}
