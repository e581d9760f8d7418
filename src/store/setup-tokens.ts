/**
 * First run's setup token (setup_tokens): one row named "setup", so there is one token at a time
 * across every instance on one primary, taken as a lease's row is (store/leases.ts): inserted, or
 * taken over once expired. The raw token exists only in the link; the row keeps a SHA-256.
 */
import { and, eq, gt, lt, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../db/database";
import { foundOrAgain } from "../db/miss";
import { roles, setupTokens, userRoles } from "../db/schema";
import { sha256Base64url } from "../digest";

const ROW = "setup";

export const setupTokenHash = sha256Base64url;

/** Whether any account holds the ADMIN role: once one does, every setup token is void. */
export async function anyAdmin(db: Reader): Promise<boolean> {
  const rows = await db.select({ one: sql<number>`1` }).from(userRoles).innerJoin(roles, eq(roles.id, userRoles.roleId)).where(eq(roles.name, "ADMIN")).limit(1);
  return rows.length > 0;
}

/**
 * Stores the hash of a new token, valid until `expiresAt`, when no live one exists (`replace`: in
 * any case, voiding the live one). False when another instance's token is still live.
 */
export async function claimSetupToken(db: Database, tokenHash: string, now: Date, expiresAt: Date, replace: boolean): Promise<boolean> {
  const [taken] = await db.writeAll((tx) => [
    tx
      .insert(setupTokens)
      .values({ name: ROW, tokenHash, createdAt: now, expiresAt })
      .onConflictDoUpdate({
        target: setupTokens.name,
        set: { tokenHash, createdAt: now, expiresAt },
        where: replace ? undefined : lt(setupTokens.expiresAt, now),
      })
      .returning({ name: setupTokens.name }),
  ]);
  return taken.length === 1;
}

/** When the live token (if any; with `tokenHash`, only if it is that one) expires: what a start that finds one tells the operator. */
export async function liveSetupTokenExpiry(db: Reader, now: Date, tokenHash?: string): Promise<Date | undefined> {
  const [row] = await foundOrAgain(db, (source) =>
    source
      .select({ expiresAt: setupTokens.expiresAt })
      .from(setupTokens)
      .where(and(eq(setupTokens.name, ROW), gt(setupTokens.expiresAt, now), tokenHash === undefined ? undefined : eq(setupTokens.tokenHash, tokenHash))),
  );
  return row?.expiresAt;
}

/** Spends the token in the caller's unit: true when it was the live one (deleted now, so it works once). */
export async function consumeSetupToken(tx: Db, tokenHash: string, now: Date): Promise<boolean> {
  const spent = await tx
    .delete(setupTokens)
    .where(and(eq(setupTokens.name, ROW), eq(setupTokens.tokenHash, tokenHash), gt(setupTokens.expiresAt, now)))
    .returning({ name: setupTokens.name });
  return spent.length === 1;
}

/**
 * What a setup token can still do: `live` (it is the live token and no ADMIN exists), `done` (an
 * ADMIN exists: no token will ever work again) or `dead` (used, expired, replaced or never issued).
 * A read: looking at a token never spends it.
 */
export async function setupTokenState(db: Reader, token: string, now: Date): Promise<"live" | "done" | "dead"> {
  const [admin, expiry] = await Promise.all([anyAdmin(db), liveSetupTokenExpiry(db, now, setupTokenHash(token))]);
  return admin ? "done" : expiry ? "live" : "dead";
}
