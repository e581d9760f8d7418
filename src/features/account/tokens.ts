/**
 * Verification and password-reset tokens: 32 random bytes (base64url) that exist raw only in
 * the mail; the database keeps a SHA-256. One live token per user and purpose (a new one
 * replaces the old), single use (consuming deletes it), and an expiry per purpose.
 */
import { and, eq, gt, type SQL } from "drizzle-orm";
import type { Db, Reader } from "../../db/client";
import { accountTokens } from "../../db/schema";
import { TOKEN_KINDS } from "../notifications/templates";

export type TokenPurpose = keyof typeof TOKEN_KINDS;
type Writer = Pick<Db, "insert" | "delete">;

const sha256 = (token: string) => new Bun.CryptoHasher("sha256").update(token).digest("hex");

/** A fresh raw token for the user and purpose; any earlier one of that purpose stops working. */
export async function issueToken(tx: Writer, userId: number, purpose: TokenPurpose, now: number): Promise<string> {
  const { raw, statement } = tokenStatement(tx, userId, purpose, now);
  await statement;
  return raw;
}

/** The same as a statement of a list unit, where the user's id may be SQL (the row a statement before inserted). */
export function tokenStatement(tx: Pick<Db, "insert">, userId: number | SQL, purpose: TokenPurpose, now: number) {
  const raw = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
  const values = { tokenHash: sha256(raw), userId: userId as number, purpose, expiresAt: new Date(now + TOKEN_KINDS[purpose]) };
  return {
    raw,
    statement: tx
      .insert(accountTokens)
      .values(values)
      .onConflictDoUpdate({ target: [accountTokens.userId, accountTokens.purpose], set: values }),
  };
}

/** Whether a token of this purpose is live, without using it up (a cheap check before expensive work). */
export async function tokenIsLive(db: Reader, raw: string, purpose: TokenPurpose, now: number): Promise<boolean> {
  const [row] = await db
    .select({ userId: accountTokens.userId })
    .from(accountTokens)
    .where(and(eq(accountTokens.tokenHash, sha256(raw)), eq(accountTokens.purpose, purpose), gt(accountTokens.expiresAt, new Date(now))));
  return row !== undefined;
}

/** The user a live token of this purpose belongs to, consuming it; undefined for an unknown, used, expired or other-purpose token. */
export async function consumeToken(tx: Writer, raw: string, purpose: TokenPurpose, now: number): Promise<number | undefined> {
  const [row] = await tx
    .delete(accountTokens)
    .where(and(eq(accountTokens.tokenHash, sha256(raw)), eq(accountTokens.purpose, purpose), gt(accountTokens.expiresAt, new Date(now))))
    .returning({ userId: accountTokens.userId });
  return row?.userId;
}

/** Every token of the user (after a password reset: no earlier link works any more). */
export async function revokeTokens(tx: Writer, userId: number) {
  await tx.delete(accountTokens).where(eq(accountTokens.userId, userId));
}
