/**
 * Sessions: login, refresh, logout and password change. Tokens are stateless; revocation is
 * the user's token version, which logout and a password change bump (the guard refuses a
 * token carrying an older one).
 *
 * Wrong e-mail and wrong password take the same path and the same time: an unknown account
 * is checked against a dummy argon2id hash, and both answer 401 INVALID_CREDENTIALS.
 */
import { and, eq, sql } from "drizzle-orm";
import type { Database, Reader } from "../../db/client";
import { prepared } from "../../db/prepared";
import { users } from "../../db/schema";
import { AppError, Violations } from "../../errors";
import { findUser, normalizeEmail } from "../users/service";
import type { Caller } from "./guard";
import type { ChangePasswordBody, LoginBody, TokenResponse } from "./model";
import { hashPassword, needsRehash, verifyPassword } from "./passwords";
import { assertNotThrottled, clearFailures, oneAtATime, recordFailure, type ThrottleDeps } from "./throttle";
import { TOKEN_TTL_SECONDS, type Tokens } from "./tokens";

export interface SessionDeps extends ThrottleDeps {
  db: Database;
  tokens: Tokens;
  config: ThrottleDeps["config"] & { requireEmailVerification: boolean };
}

const accountByEmail = prepared((db: Reader) =>
  db
    .select({ id: users.id, passwordHash: users.passwordHash, active: users.active, tokenVersion: users.tokenVersion, emailVerified: users.emailVerified })
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare(),
);

/** Hashed once per process, on first need, with the same parameters as real hashes. */
let dummyHash: Promise<string> | undefined;
const dummy = () => (dummyHash ??= hashPassword(crypto.randomUUID()));

/**
 * The account if `password` is its password (the e-mail's failures are then cleared);
 * undefined otherwise (a failure, counted). Refused with 429 while the e-mail or the address
 * is throttled. Attempts for one e-mail are serialized so parallel guesses see each other's
 * failures.
 */
function checkPassword(deps: SessionDeps, email: string, password: string, address: string) {
  return oneAtATime(email, async () => {
    const { emailHasFailures } = await assertNotThrottled(deps, email, address);
    const [account] = await accountByEmail(deps.db).all({ email });
    const stored = account?.passwordHash;
    const matches = await verifyPassword(stored ?? (await dummy()), password);
    if (!account || !stored || !matches) {
      await recordFailure(deps, email, address);
      return undefined;
    }
    if (emailHasFailures) await clearFailures(deps, email);
    return { ...account, passwordHash: stored };
  });
}

async function tokenFor(deps: SessionDeps, id: number, email: string, tokenVersion: number): Promise<TokenResponse> {
  const [token, user] = await Promise.all([deps.tokens.issue(email, tokenVersion), findUser(deps.db, id)]);
  return { token, tokenType: "Bearer", expiresIn: TOKEN_TTL_SECONDS, user };
}

export async function login(deps: SessionDeps, input: LoginBody, address: string): Promise<TokenResponse> {
  const email = normalizeEmail(input.email);
  const account = await checkPassword(deps, email, input.password, address);
  if (!account) throw new AppError("INVALID_CREDENTIALS");
  // The password was right, so not a failure; but no token either.
  if (!account.active) throw new AppError("ACCOUNT_DISABLED");
  if (deps.config.requireEmailVerification && !account.emailVerified) throw new AppError("EMAIL_NOT_VERIFIED");
  const lastLogin = new Date(deps.now());
  const rehash = needsRehash(account.passwordHash) ? await hashPassword(input.password) : undefined;
  await deps.db.writeAll((tx) => [
    tx.update(users).set({ lastLogin }).where(eq(users.id, account.id)),
    // A legacy BCrypt hash becomes argon2id, unless the password changed meanwhile.
    ...(rehash ? [tx.update(users).set({ passwordHash: rehash }).where(and(eq(users.id, account.id), eq(users.passwordHash, account.passwordHash)))] : []),
  ]);
  return tokenFor(deps, account.id, email, account.tokenVersion);
}

/** A fresh token for the version the caller's token carries (so a refresh racing a logout cannot outlive it). */
export function refresh(deps: SessionDeps, caller: Caller): Promise<TokenResponse> {
  return tokenFor(deps, caller.id, caller.email, caller.tokenVersion);
}

/** Revokes every token issued to the caller so far. */
export async function logout(deps: SessionDeps, caller: Caller) {
  await deps.db.writeAll((tx) => [tx.update(users).set({ tokenVersion: sql`${users.tokenVersion} + 1` }).where(eq(users.id, caller.id))]);
}

/**
 * Checks the current password (throttled like a login, since a stolen token must not become a
 * password oracle), stores the new one and revokes every earlier token; answers with a new token.
 */
export async function changePassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string): Promise<TokenResponse> {
  const account = await checkPassword(deps, caller.email, input.currentPassword, address);
  if (!account) throw new Violations("body", [{ path: "currentPassword", key: "field.currentPassword.wrong" }]);
  const passwordHash = await hashPassword(input.newPassword);
  const [[updated]] = await deps.db.writeAll((tx) => [
    tx
      .update(users)
      .set({ passwordHash, tokenVersion: sql`${users.tokenVersion} + 1`, updatedAt: new Date(deps.now()) })
      .where(eq(users.id, account.id))
      .returning({ tokenVersion: users.tokenVersion }),
  ]);
  return tokenFor(deps, account.id, caller.email, updated.tokenVersion);
}
