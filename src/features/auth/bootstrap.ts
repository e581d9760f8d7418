/**
 * ADMIN_EMAIL / ADMIN_PASSWORD and `usersvc admin create`: make sure an ADMIN exists.
 * The account starts verified, so REQUIRE_EMAIL_VERIFICATION never locks the admin out.
 * Idempotent: an existing account is promoted and re-activated; its password is kept
 * (a restart with the same variables must not revoke the admin's tokens), unless it has none.
 */
import { eq } from "drizzle-orm";
import type { Database } from "../../db/client";
import { users } from "../../db/schema";
import { grantRoles, normalizeEmail } from "../users/service";
import { writeAudit } from "../notifications/outbox";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "./password-policy";
import { hashPassword } from "./passwords";

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
  const hashNew = async () => {
    if (policy) await assertPasswordAllowed(policy, input.password, email);
    return hashPassword(input.password);
  };
  const passwordOf = (rows: { passwordHash: string | null }[]) => rows[0]?.passwordHash ?? null;
  // Hashed only when it will be stored: a restart finds the admin's password already set, and
  // argon2id would cost ~45 ms and map its native addon (idle RSS) for nothing. The hash is made
  // before the unit, which awaits nothing but the database.
  let passwordHash = passwordOf(await db.select({ passwordHash: users.passwordHash }).from(users).where(eq(users.email, email))) ? null : await hashNew();
  for (;;) {
    const done = await db.write(async (tx) => {
      const at = new Date(now());
      const [existing] = await tx.select({ id: users.id, passwordHash: users.passwordHash }).from(users).where(eq(users.email, email));
      // Between the read and the unit the account went, or lost its password: hash, then try again.
      if (!existing?.passwordHash && passwordHash === null) return undefined;
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
          .set({ passwordHash: existing.passwordHash ?? passwordHash, active: true, emailVerified: true, updatedAt: at })
          .where(eq(users.id, id));
      }
      await grantRoles(tx, id, ["USER", "ADMIN"]);
      return { id, created: existing === undefined };
    });
    if (done) return done;
    passwordHash = await hashNew();
  }
}
