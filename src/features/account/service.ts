/**
 * Address verification and password reset. Tokens travel only in the mail (tokens.ts keeps
 * their hashes); every mail goes through the outbox in the same transaction as the change.
 *
 * A reset request does the same work whatever the address: it counts the request against the
 * e-mail's and the client address's own limits (never login's counters) and enqueues a
 * PASSWORD_RESET row that the sender resolves; an unknown address is dropped there. So the
 * answer, its status and its cost tell nothing about which addresses have accounts.
 */
import { eq, lte, sql } from "drizzle-orm";
import type { Config } from "../../config";
import type { Database, Db } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import { accountTokens, resetThrottle, users } from "../../db/schema";
import { AppError } from "../../errors";
import type { User } from "../users/model";
import { findUser, idOfEmail, normalizeEmail } from "../users/service";
import type { Caller } from "../auth/guard";
import { hashPassword } from "../auth/passwords";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../auth/password-policy";
import { windowCounter } from "../auth/throttle";
import { enqueueNotification, notificationStatement, traced, writeAudit } from "../notifications/outbox";
import type { ResetConfirmBody } from "./model";
import { consumeToken, liveTokenOwner, revokeTokens, tokenUpsert, tokenValues } from "./tokens";

export interface AccountDeps extends PasswordPolicyDeps {
  db: Database;
  now: () => number;
  config: Pick<Config, "resetMaxRequests" | "resetMaxRequestsPerIp" | "passwordPolicy" | "hibpRangeUrl">;
}

export const RESET_THROTTLE_WINDOW_MS = 60 * 60 * 1000;

/**
 * The statements that enqueue VERIFY_EMAIL with a fresh token, prepared per handle and shape: for
 * the user with an id ("id"), or ("new") the user a statement before in the same list unit
 * inserted, found by the e-mail (registration).
 */
const verificationStatements = prepared((tx: Db, shape: string) => {
  const userId = shape === "new" ? idOfEmail(sql.placeholder("email")) : sql.placeholder("userId");
  const email = sql.placeholder("email") as unknown as string;
  const at = sql.placeholder("at") as unknown as Date;
  const token = sql.placeholder("token") as unknown as string;
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

/** False when the caller's address is verified already (nothing is sent). */
export async function requestVerification(deps: AccountDeps, caller: Caller): Promise<boolean> {
  return deps.db.write(async (tx) => {
    const [user] = await tx.select({ emailVerified: users.emailVerified }).from(users).where(eq(users.id, caller.id));
    if (!user || user.emailVerified) return false;
    await enqueueVerification(tx, caller.id, caller.email, deps.now());
    return true;
  });
}

export async function confirmVerification(deps: AccountDeps, token: string): Promise<User> {
  const userId = await deps.db.write(async (tx) => {
    const id = await consumeToken(tx, token, "VERIFY_EMAIL", deps.now());
    if (id === undefined) throw new AppError("INVALID_TOKEN");
    await tx.update(users).set({ emailVerified: true }).where(eq(users.id, id));
    return id;
  });
  return findUser(deps.db, userId);
}

/** The statements that drop what no longer counts: expired token hashes, ended reset-throttle windows (the sender runs them). */
export const forgetExpired = (tx: Db, now: number) =>
  [
    tx.delete(accountTokens).where(lte(accountTokens.expiresAt, new Date(now))),
    tx.delete(resetThrottle).where(lte(resetThrottle.windowStartedAt, new Date(now - RESET_THROTTLE_WINDOW_MS))),
  ] as const;

const countRequestOn = windowCounter(resetThrottle, "requests", RESET_THROTTLE_WINDOW_MS);

/** One more request on `key` in its hourly window; the new count, and when that window ends. */
async function countRequest(tx: Db, key: string, now: number) {
  const [row] = await countRequestOn(tx, key, now);
  return { requests: row.requests, endsAt: row.windowStartedAt.getTime() + RESET_THROTTLE_WINDOW_MS };
}

export async function requestPasswordReset(deps: AccountDeps, rawEmail: string, address: string) {
  const email = normalizeEmail(rawEmail);
  const now = deps.now();
  await deps.db.write(async (tx) => {
    const perEmail = await countRequest(tx, `email:${email}`, now);
    const perAddress = await countRequest(tx, `ip:${address}`, now);
    const over = [perEmail.requests > deps.config.resetMaxRequests && perEmail.endsAt, perAddress.requests > deps.config.resetMaxRequestsPerIp && perAddress.endsAt];
    const blockedUntil = Math.max(0, ...over.map(Number));
    if (blockedUntil > now) {
      const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
      throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
    }
    await enqueueNotification(tx, "PASSWORD_RESET", email, {}, new Date(now), { resolve: true });
  });
}

/**
 * Sets the new password, revokes every bearer token and every earlier e-mail token of the user,
 * and sends PASSWORD_CHANGED (audited PASSWORD_RESET). Completing a reset proves the mailbox is the user's, so the
 * address counts as verified too (a user whose verification link expired is never locked out).
 */
export async function confirmPasswordReset(deps: AccountDeps, input: ResetConfirmBody) {
  const now = deps.now();
  // A dead token costs no argon2; a live one is hashed for before the transaction, so the write
  // lock is never held through argon2 (and is checked again there, as it may be used meanwhile).
  const email = await liveTokenOwner(deps.db, input.token, "PASSWORD_RESET", now);
  if (email === undefined) throw new AppError("INVALID_TOKEN");
  await assertPasswordAllowed(deps, input.newPassword, email, "newPassword");
  const passwordHash = await hashPassword(input.newPassword);
  await deps.db.write(async (tx) => {
    const id = await consumeToken(tx, input.token, "PASSWORD_RESET", now);
    if (id === undefined) throw new AppError("INVALID_TOKEN");
    const [user] = await tx
      .update(users)
      .set({ passwordHash, tokenVersion: sql`${users.tokenVersion} + 1`, emailVerified: true, updatedAt: new Date(now) })
      .where(eq(users.id, id))
      .returning({ email: users.email });
    await revokeTokens(tx, id);
    await enqueueNotification(tx, "PASSWORD_CHANGED", user.email, { userId: id }, new Date(now));
    await writeAudit(tx, { action: "PASSWORD_RESET", actor: user.email, subjectType: "User", subjectId: id }, new Date(now));
  });
}
