/**
 * An ADMIN's view of a user's second factors (kind, name, when added and last used; never a
 * secret, a hash or a key) and their removal: every factor, recovery code and pending sign-in goes, every session
 * and token of the user ends (token version +1), audited MFA_REMOVED, mailed MFA_DISABLED.
 */
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { auditStatement } from "../../store/audit";
import { factorsOf, removeFactorsRows } from "../../store/mfa";
import { enqueueNotification } from "../../store/outbox";
import { emailOfUser, tokenVersionBump, userExists } from "../../store/users";
import type { Factor } from "./model";

const iso = (at: Date | number | null) => (at === null ? null : new Date(at).toISOString());

export async function userFactors(deps: { db: Database }, userId: number): Promise<Factor[]> {
  if (!(await userExists(deps.db, userId))) throw new AppError("USER_NOT_FOUND", { id: userId });
  const { totp, passkeys, recoveryCodes } = await factorsOf(deps.db, userId);
  const factors: Factor[] = [];
  if (totp?.confirmedAt) factors.push({ kind: "totp", name: "Authenticator app", createdAt: totp.confirmedAt.toISOString(), lastUsedAt: iso(totp.lastUsedAt) });
  for (const p of passkeys) factors.push({ kind: "passkey", name: p.name, createdAt: p.createdAt.toISOString(), lastUsedAt: iso(p.lastUsedAt) });
  if (recoveryCodes && recoveryCodes.total > 0 && recoveryCodes.createdAt !== null) {
    factors.push({
      kind: "recovery_codes",
      name: `${recoveryCodes.left} of ${recoveryCodes.total} left`,
      createdAt: iso(recoveryCodes.createdAt) as string,
      lastUsedAt: iso(recoveryCodes.lastUsedAt),
    });
  }
  return factors;
}

export async function removeUserFactors(deps: { db: Database; now: () => number }, caller: Caller, userId: number) {
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    const [user] = await emailOfUser(tx, userId);
    if (!user) throw new AppError("USER_NOT_FOUND", { id: userId });
    for (const statement of removeFactorsRows(tx, userId)) await statement;
    await tokenVersionBump(tx, userId);
    await auditStatement(tx, { action: "MFA_REMOVED", actor: caller.email, subjectType: "User", subjectId: userId }, now);
    await enqueueNotification(tx, "MFA_DISABLED", user.email, { userId, reason: "admin" }, now);
  });
}
