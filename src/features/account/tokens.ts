/**
 * Verification and password-reset tokens: 32 random bytes (base64url) that exist raw only in
 * the mail; the database keeps a SHA-256. One live token per user and purpose (a new one
 * replaces the old), single use (consuming deletes it), and an expiry per purpose.
 */
import { and, eq, gt, sql, type SQL } from "drizzle-orm";
import type { Db, Reader } from "../../db/client";
import { prepared } from "../../db/prepared";
import { accountTokens, users } from "../../db/schema";
import { TOKEN_KINDS } from "../notifications/templates";

export type TokenPurpose = keyof typeof TOKEN_KINDS;
type Writer = Pick<Db, "insert" | "delete">;

const sha256 = (token: string) => new Bun.CryptoHasher("sha256").update(token).digest("hex");

/**
 * The upsert of a user's token for a purpose, with placeholders for its values (tokenValues):
 * for a prepared statement. `userId` is a placeholder, or SQL (the id a statement before in the
 * same list unit inserted).
 */
export function tokenUpsert(tx: Pick<Db, "insert">, userId: SQL | ReturnType<typeof sql.placeholder>) {
  // Cast: placeholders stand for the columns' values, which drizzle encodes when they are filled in.
  const values = { tokenHash: sql.placeholder("tokenHash"), userId, purpose: sql.placeholder("purpose"), expiresAt: sql.placeholder("expiresAt") } as never;
  return tx
    .insert(accountTokens)
    .values(values)
    .onConflictDoUpdate({ target: [accountTokens.userId, accountTokens.purpose], set: values });
}

/** A fresh raw token and the values of tokenUpsert's placeholders for it. */
export function tokenValues(purpose: TokenPurpose, now: number) {
  const raw = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
  return { raw, values: { tokenHash: sha256(raw), purpose, expiresAt: new Date(now + TOKEN_KINDS[purpose]) } };
}

const upsertToken = prepared((tx: Writer) => tokenUpsert(tx, sql.placeholder("userId")).prepare());

/** A fresh raw token for the user and purpose; any earlier one of that purpose stops working. */
export async function issueToken(tx: Writer, userId: number, purpose: TokenPurpose, now: number): Promise<string> {
  const { raw, values } = tokenValues(purpose, now);
  await upsertToken(tx).run({ ...values, userId });
  return raw;
}

/** The e-mail of a live token's user, without using the token up (a cheap check before expensive work); undefined for a dead one. */
export async function liveTokenOwner(db: Reader, raw: string, purpose: TokenPurpose, now: number): Promise<string | undefined> {
  const [row] = await db
    .select({ email: users.email })
    .from(accountTokens)
    .innerJoin(users, eq(users.id, accountTokens.userId))
    .where(and(eq(accountTokens.tokenHash, sha256(raw)), eq(accountTokens.purpose, purpose), gt(accountTokens.expiresAt, new Date(now))));
  return row?.email;
}

/** The user a live token of this purpose belongs to, consuming it; undefined for an unknown, used, expired or other-purpose token. */
export async function consumeToken(tx: Writer, raw: string, purpose: TokenPurpose, now: number): Promise<number | undefined> {
  const [row] = await tx
    .delete(accountTokens)
    .where(and(eq(accountTokens.tokenHash, sha256(raw)), eq(accountTokens.purpose, purpose), gt(accountTokens.expiresAt, new Date(now))))
    .returning({ userId: accountTokens.userId });
  return row?.userId;
}

const tokensOfUser = prepared((tx: Writer) =>
  tx
    .delete(accountTokens)
    .where(eq(accountTokens.userId, sql.placeholder("userId")))
    .prepare(),
);

/** Every token of the user (after a password reset: no earlier link works any more). */
export async function revokeTokens(tx: Writer, userId: number) {
  await tokensOfUser(tx).run({ userId });
}
