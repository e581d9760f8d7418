/**
 * Sessions: login, refresh, logout and password change. Tokens are stateless; revocation is
 * the user's token version, which logout and a password change bump (the guard refuses a
 * token carrying an older one).
 *
 * Wrong e-mail and wrong password take the same path and the same time (security/password-check.ts),
 * and both answer 401 INVALID_CREDENTIALS.
 */
import { AppError } from "../../errors";
import type { User } from "../../models/user";
import { TOKEN_TTL_SECONDS, type Tokens } from "../../security/bearer-tokens";
import type { Caller } from "../../security/caller";
import { attemptTurn, checkPassword, wrongCurrentPassword, type PasswordCheckDeps } from "../../security/password-check";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../../security/password-policy";
import { hashPassword, needsRehash } from "../../security/passwords";
import { auditStatement, type AuditRecord } from "../../store/audit";
import { clearLoginFailures } from "../../store/throttle";
import { findUser, lastLoginStatement, newPasswordStatement, normalizeEmail, rehashStatement, tokenVersionBump, userById, userOf } from "../../store/users";
import type { ChangePasswordBody, LoginBody, TokenResponse } from "./model";

export interface SessionDeps extends PasswordCheckDeps, PasswordPolicyDeps {
  tokens: Tokens;
  config: PasswordCheckDeps["config"] & PasswordPolicyDeps["config"] & { requireEmailVerification: boolean };
}

/** The one token answer: a bearer token for the account (its id, e-mail and token version), and the user. */
async function tokenAnswer(deps: SessionDeps, account: { id: number; email: string; tokenVersion: number }, user: User | Promise<User>): Promise<TokenResponse> {
  const [token, shown] = await Promise.all([deps.tokens.issue(account.email, account.tokenVersion, account.id), user]);
  return { token, tokenType: "Bearer", expiresIn: TOKEN_TTL_SECONDS, user: shown };
}

/**
 * Login's checks and writes, in the e-mail's turn: the throttle, the account, the password,
 * then the refusals of a right password (its failures are cleared all the same), then one list
 * unit: failures cleared, last login, the audit row, a rehash, and the answer's user read back.
 * Sign-ins are audited, never with the password: LOGIN with the client address, LOGIN_FAILED
 * with the e-mail tried and the address (and the reason when the password was right).
 */
async function signIn(deps: SessionDeps, email: string, password: string, address: string) {
  const failed = (reason?: string): AuditRecord => ({
    action: "LOGIN_FAILED",
    actor: email,
    subjectType: "User",
    subjectId: email,
    details: { email, address, ...(reason && { reason }) },
  });
  using _turn = await attemptTurn(email);
  const checked = await checkPassword(deps, email, password, address, failed());
  if (!checked) throw new AppError("INVALID_CREDENTIALS");
  const { account, emailHasFailures } = checked;
  const refused = !account.active ? "ACCOUNT_DISABLED" : deps.config.requireEmailVerification && !account.emailVerified ? "EMAIL_NOT_VERIFIED" : undefined;
  if (refused) {
    await deps.db.writeAll((tx) => ({
      cleared: emailHasFailures ? clearLoginFailures(tx, email) : undefined,
      audited: auditStatement(tx, failed(refused), new Date(deps.now())),
    }));
    throw new AppError(refused);
  }
  const lastLogin = new Date(deps.now());
  const rehash = needsRehash(account.passwordHash) ? await hashPassword(password) : undefined;
  const { user } = await deps.db.writeAll((tx) => ({
    cleared: emailHasFailures ? clearLoginFailures(tx, email) : undefined,
    lastLogin: lastLoginStatement(tx, account.id, lastLogin),
    audited: auditStatement(tx, { action: "LOGIN", actor: email, subjectType: "User", subjectId: account.id, details: { address } }, lastLogin),
    rehashed: rehash ? rehashStatement(tx, account.id, account.passwordHash, rehash) : undefined,
    user: userById(tx, account.id),
  }));
  return { id: account.id, tokenVersion: account.tokenVersion, user: userOf(user) };
}

export async function login(deps: SessionDeps, input: LoginBody, address: string): Promise<TokenResponse> {
  const email = normalizeEmail(input.email);
  const { id, tokenVersion, user } = await signIn(deps, email, input.password, address);
  // Signed after the e-mail's turn: the next attempt for it need not wait for the signature.
  return tokenAnswer(deps, { id, email, tokenVersion }, user);
}

/** A fresh token for the version the caller's token carries (so a refresh racing a logout cannot outlive it). */
export function refresh(deps: SessionDeps, caller: Caller): Promise<TokenResponse> {
  return tokenAnswer(deps, caller, findUser(deps.db, caller.id));
}

/** Revokes every token issued to the caller so far (audited LOGOUT, in the same unit). */
export async function logout(deps: SessionDeps, caller: Caller) {
  const audit = { action: "LOGOUT", actor: caller.email, subjectType: "User", subjectId: caller.id };
  await deps.db.writeAll((tx) => [tokenVersionBump(tx, caller.id), auditStatement(tx, audit, new Date(deps.now()))]);
}

/** The new password stored, in the caller's turn, after checking the current one like a login: the new token version. */
async function storeNewPassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string): Promise<number> {
  const subject = { actor: caller.email, subjectType: "User", subjectId: caller.id };
  using _turn = await attemptTurn(caller.email);
  const checked = await checkPassword(deps, caller.email, input.currentPassword, address, { ...subject, action: "PASSWORD_CHANGE_FAILED", details: { address } });
  if (!checked) throw wrongCurrentPassword();
  const passwordHash = await hashPassword(input.newPassword);
  const now = new Date(deps.now());
  const { updated } = await deps.db.writeAll((tx) => ({
    cleared: checked.emailHasFailures ? clearLoginFailures(tx, caller.email) : undefined,
    audited: auditStatement(tx, { ...subject, action: "PASSWORD_CHANGED" }, now),
    updated: newPasswordStatement(tx, checked.account.id, passwordHash, now),
  }));
  return updated[0].tokenVersion;
}

/**
 * Checks the current password (throttled like a login, since a stolen token must not become a
 * password oracle), stores the new one and revokes every earlier token; answers with a new token.
 */
export async function changePassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string): Promise<TokenResponse> {
  await assertPasswordAllowed(deps, input.newPassword, caller.email, "newPassword");
  const tokenVersion = await storeNewPassword(deps, caller, input, address);
  return tokenAnswer(deps, { ...caller, tokenVersion }, findUser(deps.db, caller.id));
}
