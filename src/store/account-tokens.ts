/**
 * E-mailed account tokens (account_tokens), for address verification and password reset: 32
 * random bytes (base64url) that exist raw only in the mail (the outbox row's token, erased once
 * the mail is settled); the database keeps a SHA-256. One live token per user and purpose (a new
 * one replaces the old), single use (consuming deletes it), and a lifetime per purpose.
 */
import { and, eq, gt, inArray, isNotNull, lte, or, sql, type SQL } from "drizzle-orm";
import type { Database, Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { accountTokens, outbox, users } from "../db/schema";
import { ENROL_CODE_LIFETIME_MS } from "./mfa";
import { dropRequest, notificationStatement, releaseRequest, resolvingRows, stillResolving, traced } from "./outbox";
import { userStatusByEmail, idOfEmail } from "./users";

/** The purposes of account tokens, and how long a token of each lives (ms). */
export const ACCOUNT_TOKEN_LIFETIMES = { VERIFY_EMAIL: 24 * 60 * 60 * 1000, PASSWORD_RESET: 30 * 60 * 1000 } as const;

/** The mails that carry a secret in the outbox row's token, and how long it lives (ms): the account tokens and a first enrolment's code (store/mfa.ts). */
export const MAILED_SECRET_LIFETIMES = { ...ACCOUNT_TOKEN_LIFETIMES, MFA_ENROL_CODE: ENROL_CODE_LIFETIME_MS } as const;

export type TokenPurpose = keyof typeof ACCOUNT_TOKEN_LIFETIMES;
type Writer = Pick<Db, "insert" | "delete">;

const sha256 = (token: string) => new Bun.CryptoHasher("sha256").update(token).digest("hex");

/**
 * The upsert of a user's token for a purpose, with placeholders for its values (tokenValues):
 * for a prepared statement. `userId` is a placeholder, or SQL (the id a statement before in the
 * same list unit inserted).
 */
function tokenUpsert(tx: Pick<Db, "insert">, userId: SQL | ReturnType<typeof sql.placeholder>) {
  // Cast: placeholders stand for the columns' values, which drizzle encodes when they are filled in.
  const values = { tokenHash: sql.placeholder("tokenHash"), userId, purpose: sql.placeholder("purpose"), expiresAt: sql.placeholder("expiresAt") } as never;
  return tx
    .insert(accountTokens)
    .values(values)
    .onConflictDoUpdate({ target: [accountTokens.userId, accountTokens.purpose], set: values });
}

/** A fresh raw token and the values of tokenUpsert's placeholders for it. */
function tokenValues(purpose: TokenPurpose, now: number) {
  const raw = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
  return { raw, values: { tokenHash: sha256(raw), purpose, expiresAt: new Date(now + ACCOUNT_TOKEN_LIFETIMES[purpose]) } };
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
  const [row] = await foundOrAgain(db, (source) =>
    source
      .select({ email: users.email })
      .from(accountTokens)
      .innerJoin(users, eq(users.id, accountTokens.userId))
      .where(and(eq(accountTokens.tokenHash, sha256(raw)), eq(accountTokens.purpose, purpose), gt(accountTokens.expiresAt, new Date(now)))),
  );
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

/** Every account token of the user (after a password reset or an e-mail change: no earlier link works any more). */
export async function revokeAccountTokens(tx: Writer, userId: number) {
  await tokensOfUser(tx).run({ userId });
}

/**
 * The statements that enqueue VERIFY_EMAIL with a fresh token, prepared per handle and shape: for
 * the user with an id ("id"), or ("new") the user a statement before in the same list unit
 * inserted, found by the e-mail (registration).
 */
const verificationStatements = prepared((tx: Db, shape: string) => {
  const userId = shape === "new" ? idOfEmail(sql.placeholder("email")) : sql.placeholder("userId");
  const email = placeholder<string>("email");
  const at = placeholder<Date>("at");
  const token = placeholder<string>("token");
  return [tokenUpsert(tx, userId).prepare(), notificationStatement(tx, "VERIFY_EMAIL", email, sql`json_object('userId', ${userId})`, at, { token }).prepare()] as const;
});

/** VERIFY_EMAIL with a fresh token for the user `userId`, or "new": the one its list unit has just inserted with `email`. */
export function verificationRows(tx: Db, userId: number | "new", email: string, now: number) {
  const { raw, values } = tokenValues("VERIFY_EMAIL", now);
  const shape = userId === "new" ? "new" : "id";
  return verificationStatements(tx, shape).map((statement) => bound(statement, traced({ ...values, userId, email, at: new Date(now), token: raw })));
}

export async function enqueueVerification(tx: Db, userId: number, email: string, now: number) {
  for (const statement of verificationRows(tx, userId, email, now)) await statement;
}

const expiredTokens = prepared((tx: Db) =>
  tx
    .delete(accountTokens)
    .where(lte(accountTokens.expiresAt, sql.placeholder("now")))
    .prepare(),
);

/** Expired token hashes go: a statement of the outbox sender's housekeeping unit. */
export const forgetExpiredTokens = (tx: Db, now: number) => bound(expiredTokens(tx), { now });

const tokensToErase = prepared((tx: Db) => {
  // Created before a placeholder's time, in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
  const expired = (kind: keyof typeof MAILED_SECRET_LIFETIMES) => and(eq(outbox.kind, kind), lte(outbox.createdAt, sql.placeholder(kind)));
  return tx
    .update(outbox)
    .set({ token: null })
    .where(
      and(isNotNull(outbox.token), or(inArray(outbox.mailStatus, ["sent", "failed", "skipped"]), expired("VERIFY_EMAIL"), expired("PASSWORD_RESET"), expired("MFA_ENROL_CODE"))),
    )
    .prepare();
});

/**
 * Raw tokens and codes leave the database once their mail is settled or they have expired: a statement of
 * the housekeeping's unit. Only rows that still hold a token are looked at (outbox_token_idx).
 */
export const eraseTokens = (tx: Db, now: number) =>
  bound(tokensToErase(tx), Object.fromEntries(Object.entries(MAILED_SECRET_LIFETIMES).map(([kind, lifetime]) => [kind, now - lifetime])));

/**
 * Password-reset requests waiting in the outbox (the request itself never looks the address up,
 * so known and unknown addresses cost it the same): a known, active address gets its token now,
 * an unknown one is dropped on every channel. At most `limit` requests, each its own unit.
 */
export async function resolvePasswordResets(db: Database, limit: number, now: () => number) {
  for (const row of await resolvingRows(db, limit)) {
    await db.write(async (tx) => {
      // Another instance's sender may have resolved it since the read: resolved (and sent) once.
      if (!(await stillResolving(tx, row.id))) return;
      const [user] = row.recipient ? await userStatusByEmail(tx, row.recipient) : [];
      if (!user?.active) {
        await dropRequest(tx, row.id);
        return;
      }
      const token = await issueToken(tx, user.id, "PASSWORD_RESET", now());
      await releaseRequest(tx, row.id, user.id, token, new Date(now()));
    });
  }
}
