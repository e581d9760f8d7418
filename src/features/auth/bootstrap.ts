/**
 * ADMIN_EMAIL / ADMIN_PASSWORD and `usersvc admin create`: make sure an ADMIN exists.
 * The account starts verified, so REQUIRE_EMAIL_VERIFICATION never locks the admin out.
 *
 * Idempotent: an account that is already an ADMIN is left exactly as it is (a restart with the
 * same variables must not revoke the admin's tokens). An account that holds the address without
 * being an ADMIN may be a stranger who registered it (registration is open): it becomes ADMIN
 * only with the operator's password, and everything it held ends (its tokens, its e-mailed
 * verification and reset links, its deviceTokens); the promotion is audited.
 */
import type { Database } from "../../db/database";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../../security/password-policy";
import { hashPassword } from "../../security/passwords";
import { revokeAccountTokens } from "../../store/account-tokens";
import { writeAudit } from "../../store/audit";
import { forgetDeviceTokens } from "../../store/devices";
import { adminStatusOf, grantRoles, insertVerifiedUser, normalizeEmail, promoteToAdmin } from "../../store/users";

/**
 * `now`: the clock (the app's ctx.now where there is an app; start-up and the CLI have only the system's).
 * `policy`: PASSWORD_POLICY, checked only when the password will be stored (a refusal is a Violations failure).
 */
export async function ensureAdmin(
  db: Database,
  input: { email: string; password: string; name?: string },
  now: () => number,
  policy?: PasswordPolicyDeps,
): Promise<{ id: number; created: boolean }> {
  const email = normalizeEmail(input.email);
  // A restart finds the ADMIN and writes nothing: no argon2id hash (~45 ms and its native addon's idle RSS) for nothing.
  const found = await adminStatusOf(db, email);
  if (found?.admin) return { id: found.id, created: false };
  if (policy) await assertPasswordAllowed(policy, input.password, email);
  // Made before the unit, which awaits nothing but the database.
  const passwordHash = await hashPassword(input.password);
  return db.write(async (tx) => {
    const at = new Date(now());
    const existing = await adminStatusOf(tx, email);
    // Promoted meanwhile (another instance starting): left as it is.
    if (existing?.admin) return { id: existing.id, created: false };
    let id: number;
    if (existing === undefined) {
      id = await insertVerifiedUser(tx, { name: input.name ?? "Administrator", email, passwordHash }, at);
      await writeAudit(tx, { action: "USER_CREATED", actor: "system", subjectType: "User", subjectId: id, details: { email, via: "bootstrap" } }, at);
    } else {
      id = existing.id;
      await promoteToAdmin(tx, id, passwordHash, at);
      await revokeAccountTokens(tx, id);
      await forgetDeviceTokens(tx, id);
      await writeAudit(tx, { action: "USER_PROMOTED_TO_ADMIN", actor: "system", subjectType: "User", subjectId: id, details: { email, via: "bootstrap" } }, at);
    }
    await grantRoles(tx, id, ["USER", "ADMIN"]);
    return { id, created: existing === undefined };
  });
}
