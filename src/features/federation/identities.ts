/**
 * The caller's linked identities (GET /api/account/identities; an ADMIN's view of a user's), and
 * unlinking one: refused while it is the account's last way in (no password, no passkey, no
 * other identity), audited IDENTITY_UNLINKED.
 */
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import { auditStatement } from "../../store/audit";
import { deleteIdentityStatement, type IdentityRow, identitiesOf, otherSignInMethods } from "../../store/identities";
import { userExists } from "../../store/users";
import type { Identity } from "./model";

export const identityOf = (row: IdentityRow, labels: ReadonlyMap<string, string>): Identity => ({
  id: row.id,
  provider: row.provider,
  label: labels.get(row.provider) ?? row.provider,
  email: row.email,
  linkedAt: row.createdAt.toISOString(),
  lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
});

export async function listIdentities(db: Database, userId: number, labels: ReadonlyMap<string, string>): Promise<Identity[]> {
  return (await identitiesOf(db, userId)).map((row) => identityOf(row, labels));
}

/** An ADMIN's view: 404 USER_NOT_FOUND for a user that does not exist. */
export async function identitiesOfUser(db: Database, userId: number, labels: ReadonlyMap<string, string>): Promise<Identity[]> {
  if (!(await userExists(db, userId))) throw new AppError("USER_NOT_FOUND", { id: userId });
  return listIdentities(db, userId, labels);
}

export async function unlinkIdentity(deps: { db: Database; now: () => number }, caller: { id: number; email: string }, id: number) {
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    // Counted in the unit that deletes: two unlinks at once cannot both leave the account bare.
    if ((await otherSignInMethods(tx, caller.id, id)) === 0) {
      const [mine] = (await identitiesOf(tx, caller.id)).filter((row) => row.id === id);
      throw new AppError(mine ? "LAST_SIGN_IN_METHOD" : "IDENTITY_NOT_FOUND");
    }
    const [removed] = await deleteIdentityStatement(tx, caller.id, id);
    if (!removed) throw new AppError("IDENTITY_NOT_FOUND");
    await auditStatement(
      tx,
      { action: "IDENTITY_UNLINKED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { provider: removed.provider, identityId: id } },
      now,
    );
  });
}
