/**
 * Token signing keys (signing_keys): every statement on them. The keys are few (the current one,
 * the next, and those whose tokens have not all expired), so they are read whole.
 */
import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import type { Database, Reader } from "../db/database";
import { signingKeys } from "../db/schema";

export type SigningKeyRow = typeof signingKeys.$inferSelect;

/** The kid of the row recording the switch away from HS512. */
export const HS512_SWITCH_KID = "HS512";

/** A column for the guard's one read: whether the token's key (a placeholder) was withdrawn. */
export const keyRevoked = (kid: ReturnType<typeof sql.placeholder>) =>
  sql<number>`exists(select 1 from ${signingKeys} where ${signingKeys.kid} = ${kid} and ${signingKeys.revokedAt} is not null)`;

export const allSigningKeys = (db: Reader): Promise<SigningKeyRow[]> => db.select().from(signingKeys).orderBy(signingKeys.signsFrom);

/** Inserts the rows; a kid already there (the switch record another instance wrote) is kept as it was. */
export async function addSigningKeys(db: Database, rows: SigningKeyRow[]) {
  if (rows.length === 0) return;
  await db.writeAll((tx) => [tx.insert(signingKeys).values(rows).onConflictDoNothing()]);
}

/** Withdraws a key; false when there is no such (unrevoked) key. */
export async function revokeSigningKey(db: Database, kid: string, now: number): Promise<boolean> {
  const [revoked] = await db.writeAll((tx) => [
    tx
      .update(signingKeys)
      .set({ revokedAt: new Date(now) })
      .where(and(eq(signingKeys.kid, kid), isNull(signingKeys.revokedAt)))
      .returning({ kid: signingKeys.kid }),
  ]);
  return revoked.length === 1;
}

export async function deleteSigningKeys(db: Database, kids: string[]) {
  if (kids.length === 0) return;
  await db.writeAll((tx) => [tx.delete(signingKeys).where(inArray(signingKeys.kid, kids))]);
}

/** Stores private halves sealed anew (`usersvc keys rewrap`). */
export async function resealSigningKeys(db: Database, sealed: { kid: string; privateJwk: string }[]) {
  if (sealed.length === 0) return;
  await db.writeAll((tx) => sealed.map((k) => tx.update(signingKeys).set({ privateJwk: k.privateJwk }).where(eq(signingKeys.kid, k.kid))));
}
