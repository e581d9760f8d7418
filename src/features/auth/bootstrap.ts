/**
 * ADMIN_EMAIL / ADMIN_PASSWORD and `usersvc admin create`: make sure an ADMIN exists.
 * The account starts verified, so REQUIRE_EMAIL_VERIFICATION never locks the admin out.
 *
 * Idempotent: an account that is already an ADMIN is left exactly as it is (a restart with the
 * same variables must not revoke the admin's tokens). An account that holds the address without
 * being an ADMIN may be a stranger who registered it (registration is open): it becomes ADMIN
 * only with the operator's password, and everything it held ends (its tokens, its e-mailed
 * verification and reset links); the promotion is audited.
 */
import { eq, sql } from "drizzle-orm";
import type { Database, Reader } from "../../db/client";
import { users } from "../../db/schema";
import { grantRoles, normalizeEmail, roleNamesOfUser } from "../users/service";
import { writeAudit } from "../notifications/outbox";
import { revokeTokens } from "../account/tokens";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "./password-policy";
import { hashPassword } from "./passwords";

const accountOf = (db: Reader, email: string) =>
  db
    .select({ id: users.id, roles: roleNamesOfUser })
    .from(users)
    .where(eq(users.email, email))
    .then(([row]) => row && { id: row.id, admin: (row.roles?.split(",") ?? []).includes("ADMIN") });

/**
 * `now`: the clock (the app's ctx.now where there is an app; start-up and the CLI have only the system's).
 * `policy`: PASSWORD_POLICY, checked only when the password will be stored (a refusal is a Violations failure).
 */
export async function ensureAdmin(
  db: Database,
  input: { email: string; password: string; name?: string },
  now: () => number = Date.now,
  policy?: PasswordPolicyDeps,
): Promise<{ id: number; created: boolean }> {
  const email = normalizeEmail(input.email);
  // A restart finds the ADMIN and writes nothing: no argon2id hash (~45 ms and its native addon's idle RSS) for nothing.
  const found = await accountOf(db, email);
  if (found?.admin) return { id: found.id, created: false };
  if (policy) await assertPasswordAllowed(policy, input.password, email);
  // Made before the unit, which awaits nothing but the database.
  const passwordHash = await hashPassword(input.password);
  return db.write(async (tx) => {
    const at = new Date(now());
    const existing = await accountOf(tx, email);
    // Promoted meanwhile (another instance starting): left as it is.
    if (existing?.admin) return { id: existing.id, created: false };
    let id = existing?.id;
    if (id === undefined) {
      [{ id }] = await tx
        .insert(users)
        .values({ name: input.name ?? "Administrator", email, passwordHash, active: true, emailVerified: true, createdAt: at, updatedAt: at })
        .returning({ id: users.id });
      await writeAudit(tx, { action: "USER_CREATED", actor: "system", subjectType: "User", subjectId: id, details: { email, via: "bootstrap" } }, at);
    } else {
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
      await revokeTokens(tx, id);
      await writeAudit(tx, { action: "USER_PROMOTED_TO_ADMIN", actor: "system", subjectType: "User", subjectId: id, details: { email, via: "bootstrap" } }, at);
    }
    await grantRoles(tx, id, ["USER", "ADMIN"]);
    return { id, created: existing === undefined };
  });
}
