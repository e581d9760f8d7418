/**
 * Sessions: login, refresh, logout and password change. Tokens are stateless; revocation is
 * the user's token version, which logout and a password change bump (the guard refuses a
 * token carrying an older one).
 *
 * Wrong e-mail and wrong password take the same path and the same time: an unknown account
 * is checked against a dummy argon2id hash, and both answer 401 INVALID_CREDENTIALS.
 */
import { and, eq, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import type { Statement } from "../../db/database";
import { bound, prepared } from "../../db/prepared";
import { type loginThrottle, users } from "../../db/schema";
import { AppError, Violations } from "../../errors";
import { bumpTokenVersion, findById, findUser, normalizeEmail, toUser } from "../users/service";
import type { Caller } from "./guard";
import type { ChangePasswordBody, LoginBody, TokenResponse } from "./model";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "./password-policy";
import { hashPassword, needsRehash, verifyPassword } from "./passwords";
import { assertNotThrottled, clearFailures, oneAtATime, recordFailure, throttleRows, type ThrottleDeps } from "./throttle";
import { TOKEN_TTL_SECONDS, type Tokens } from "./tokens";
import { type AuditRecord, auditStatement } from "../notifications/outbox";

export interface SessionDeps extends ThrottleDeps, PasswordPolicyDeps {
  db: Database;
  tokens: Tokens;
  config: ThrottleDeps["config"] & PasswordPolicyDeps["config"] & { requireEmailVerification: boolean };
}

/** Hashed once per process, on first need, with the same parameters as real hashes. */
let dummyHash: Promise<string> | undefined;
const dummy = () => (dummyHash ??= hashPassword(crypto.randomUUID()));

type Account = { id: number; passwordHash: string; active: boolean; tokenVersion: number; emailVerified: boolean };

const accountByEmail = prepared((db: Reader) =>
  db
    .select({ id: users.id, passwordHash: users.passwordHash, active: users.active, tokenVersion: users.tokenVersion, emailVerified: users.emailVerified })
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);
const setLastLogin = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ lastLogin: sql.placeholder("lastLogin") as unknown as Date })
    .where(eq(users.id, sql.placeholder("id")))
    .prepare(),
);

/** A legacy BCrypt hash becomes argon2id, unless the password changed meanwhile. */
const rehashPassword = prepared((tx: Db) =>
  tx
    .update(users)
    .set({ passwordHash: sql.placeholder("rehash") as unknown as string })
    .where(and(eq(users.id, sql.placeholder("id")), eq(users.passwordHash, sql.placeholder("passwordHash"))))
    .prepare(),
);
/** A new password, and every earlier token revoked: answers the new token version. */
const setPassword = prepared((tx: Db) =>
  tx
    .update(users)
    .set({
      passwordHash: sql.placeholder("passwordHash") as unknown as string,
      tokenVersion: sql`${users.tokenVersion} + 1`,
      updatedAt: sql.placeholder("updatedAt") as unknown as Date,
    })
    .where(eq(users.id, sql.placeholder("id")))
    .returning({ tokenVersion: users.tokenVersion })
    .prepare(),
);

/**
 * Runs `matched` with the account if `password` is its password, handing it the statement
 * that clears the e-mail's failures when it has any (for the unit it writes anyway); answers undefined otherwise
 * (a failure, counted and audited as `failure`). Refused with 429 while the e-mail or the address is throttled. The
 * throttle rows and the account are one read unit (one round trip to a remote primary).
 * Attempts for one e-mail, `matched` included, are serialized so parallel guesses see each
 * other's failures.
 */
function checkPassword<R>(
  deps: SessionDeps,
  email: string,
  password: string,
  address: string,
  failure: AuditRecord,
  matched: (account: Account, clear: ((tx: Db) => Statement) | undefined) => Promise<R>,
): Promise<R | undefined> {
  return oneAtATime(email, async () => {
    const [throttle, [account]] = (await deps.db.readAll((db) => [throttleRows(deps, db, email, address), bound(accountByEmail(db), { email })])) as [
      (typeof loginThrottle.$inferSelect)[],
      (Account | undefined)[],
    ];
    const { emailHasFailures } = assertNotThrottled(deps, email, throttle);
    const stored = account?.passwordHash;
    const matches = await verifyPassword(stored ?? (await dummy()), password);
    if (!account || !stored || !matches) {
      await recordFailure(deps, email, address, failure);
      return undefined;
    }
    return matched({ ...account, passwordHash: stored }, emailHasFailures ? (tx) => clearFailures(tx, email) : undefined);
  });
}

async function tokenFor(deps: SessionDeps, id: number, email: string, tokenVersion: number): Promise<TokenResponse> {
  const [token, user] = await Promise.all([deps.tokens.issue(email, tokenVersion, id), findUser(deps.db, id)]);
  return { token, tokenType: "Bearer", expiresIn: TOKEN_TTL_SECONDS, user };
}

/**
 * Sign-ins are audited, never with the password: LOGIN with the client address, LOGIN_FAILED
 * with the e-mail tried and the address (and the reason when the password was right).
 */
export async function login(deps: SessionDeps, input: LoginBody, address: string): Promise<TokenResponse> {
  const email = normalizeEmail(input.email);
  const failed = (reason?: string): AuditRecord => ({
    action: "LOGIN_FAILED",
    actor: email,
    subjectType: "User",
    subjectId: email,
    details: { email, address, ...(reason && { reason }) },
  });
  const response = await checkPassword(deps, email, input.password, address, failed(), async (account, clear) => {
    // The password was right, so not a failure (its failures are cleared); but no token either.
    const refused = !account.active ? "ACCOUNT_DISABLED" : deps.config.requireEmailVerification && !account.emailVerified ? "EMAIL_NOT_VERIFIED" : undefined;
    if (refused) {
      await deps.db.writeAll((tx) => [...(clear ? [clear(tx)] : []), auditStatement(tx, failed(refused), new Date(deps.now()))] as unknown as [Statement, ...Statement[]]);
      throw new AppError(refused);
    }
    const lastLogin = new Date(deps.now());
    const rehash = needsRehash(account.passwordHash) ? await hashPassword(input.password) : undefined;
    // One list unit: failures cleared, last login, a rehash, the audit row, and the answer's user read back.
    const results = await deps.db.writeAll(
      (tx) =>
        [
          ...(clear ? [clear(tx)] : []),
          bound(setLastLogin(tx), { lastLogin, id: account.id }),
          auditStatement(tx, { action: "LOGIN", actor: email, subjectType: "User", subjectId: account.id, details: { address } }, lastLogin),
          ...(rehash ? [bound(rehashPassword(tx), { rehash, id: account.id, passwordHash: account.passwordHash })] : []),
          bound(findById(tx), { id: account.id }),
        ] as unknown as [Statement, ...Statement[]],
    );
    const [row] = results[results.length - 1] as Parameters<typeof toUser>[0][];
    return { token: await deps.tokens.issue(email, account.tokenVersion, account.id), tokenType: "Bearer" as const, expiresIn: TOKEN_TTL_SECONDS, user: toUser(row) };
  });
  if (!response) throw new AppError("INVALID_CREDENTIALS");
  return response;
}

/** A fresh token for the version the caller's token carries (so a refresh racing a logout cannot outlive it). */
export function refresh(deps: SessionDeps, caller: Caller): Promise<TokenResponse> {
  return tokenFor(deps, caller.id, caller.email, caller.tokenVersion);
}

/** Revokes every token issued to the caller so far (audited LOGOUT, in the same unit). */
export async function logout(deps: SessionDeps, caller: Caller) {
  const audit = { action: "LOGOUT", actor: caller.email, subjectType: "User", subjectId: caller.id };
  await deps.db.writeAll((tx) => [bound(bumpTokenVersion(tx), { id: caller.id }), auditStatement(tx, audit, new Date(deps.now()))]);
}

/**
 * Checks the current password (throttled like a login, since a stolen token must not become a
 * password oracle), stores the new one and revokes every earlier token; answers with a new token.
 */
export async function changePassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string): Promise<TokenResponse> {
  await assertPasswordAllowed(deps, input.newPassword, caller.email, "newPassword");
  const subject = { actor: caller.email, subjectType: "User", subjectId: caller.id };
  const failure = { ...subject, action: "PASSWORD_CHANGE_FAILED", details: { address } };
  const updated = await checkPassword(deps, caller.email, input.currentPassword, address, failure, async (account, clear) => {
    const passwordHash = await hashPassword(input.newPassword);
    const now = new Date(deps.now());
    // The audit row before the update: the answer is the last statement's.
    const results = await deps.db.writeAll(
      (tx) =>
        [
          ...(clear ? [clear(tx)] : []),
          auditStatement(tx, { ...subject, action: "PASSWORD_CHANGED" }, now),
          bound(setPassword(tx), { passwordHash, updatedAt: now, id: account.id }),
        ] as unknown as [Statement, ...Statement[]],
    );
    return (results[results.length - 1] as { tokenVersion: number }[])[0];
  });
  if (!updated) throw wrongCurrentPassword();
  return tokenFor(deps, caller.id, caller.email, updated.tokenVersion);
}

const wrongCurrentPassword = () => new Violations("body", [{ path: "currentPassword", key: "field.currentPassword.wrong" }]);

/**
 * The caller's current password, before a change that needs it (their own e-mail address):
 * checked and throttled like a login, so a stolen token is no password oracle; a wrong one is a
 * 400 on `currentPassword`, as in the password change.
 */
export async function confirmPassword(deps: SessionDeps, caller: Caller, password: string, address: string) {
  const failure = { action: "PASSWORD_CHECK_FAILED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { address } };
  const confirmed = await checkPassword(deps, caller.email, password, address, failure, async (_account, clear) => {
    if (clear) await deps.db.writeAll((tx) => [clear(tx)]);
    return true;
  });
  if (!confirmed) throw wrongCurrentPassword();
}
