/**
 * Sign-in, refresh, logout and password change. A login opens a session (store/sessions.ts)
 * with a rotating refresh token; access tokens are signed bearer tokens naming the session
 * (`sid`) and the user's token version. Ending a session refuses its tokens at once (the guard
 * reads the session with the user); bumping the token version (a password change, logout with a
 * sid-less token or `?scope=all`) ends every session and every sid-less token of the user.
 *
 * Wrong e-mail and wrong password take the same path and the same time (security/password-check.ts),
 * and both answer 401 INVALID_CREDENTIALS.
 */
import type { Reader } from "../../db/database";
import { AppError } from "../../errors";
import { existing } from "../../models/user";
import type { Caller } from "../../security/caller";
import { unauthorized } from "../../security/guard";
import { attemptTurn, type CheckedPassword, failuresCleared, withPassword, wrongCurrentPassword } from "../../security/password-check";
import { assertPasswordAllowed } from "../../security/password-policy";
import { hashPassword, needsRehash } from "../../security/passwords";
import { completeSignIn } from "../../security/sign-in-completion";
import { auditStatement, type AuditRecord } from "../../store/audit";
import { bearerRefreshStateOf, endSessionStatement, isOpen, keptSessionRows, randomToken, refreshStateOf, rotationRows } from "../../store/sessions";
import { findUser, newPasswordStatement, normalizeEmail, rehashStatement, tokenVersionBump, userById, userOf } from "../../store/users";
import type { ChangePasswordBody, LoginBody, MfaRequired, TokenResponse } from "./model";
import { type ChallengeDeps, secondStepChallenge } from "./second-step";
import { type AnswerSession, newSession, type SessionDeps, type SignInClient, signedInRows, tokenAnswer } from "./session-answer";

export type { SessionDeps, SignInClient } from "./session-answer";

/**
 * Login's checks and writes, in the e-mail's turn: the throttle, the account, the password,
 * then the refusals of a right password (its failures are cleared all the same), then, for an
 * account with a second factor, the second step's challenge; else one list unit: the session,
 * failures cleared, last login, the audit row, a rehash, the sign-in's device
 * (security/sign-in-completion.ts), and the answer's user read back.
 * Sign-ins are audited, never with the password: LOGIN with the client address, LOGIN_FAILED
 * with the e-mail tried and the address (and the reason when the password was right).
 */
async function signIn(deps: SessionDeps & ChallengeDeps, email: string, password: string, client: SignInClient, deviceToken?: string) {
  const { address } = client;
  const failed = (reason?: string): AuditRecord => ({
    action: "LOGIN_FAILED",
    actor: email,
    subjectType: "User",
    subjectId: email,
    details: { email, address, ...(reason && { reason }) },
  });
  using _turn = await attemptTurn(email);
  // Awaited here: the turn ends when this function returns.
  return await withPassword(deps, { email, password, client: { address, deviceToken }, failure: failed() }, async (checked) => {
    if (!checked) throw new AppError("INVALID_CREDENTIALS");
    return rightPassword(deps, checked, password, client, failed);
  });
}

/** A right password's sign-in (signIn), in the e-mail's turn: refused, a second step's challenge, or the session's unit. */
async function rightPassword(deps: SessionDeps & ChallengeDeps, checked: CheckedPassword, password: string, client: SignInClient, failed: (reason?: string) => AuditRecord) {
  const { account } = checked;
  const refused = !account.active ? "ACCOUNT_DISABLED" : deps.config.requireEmailVerification && !account.emailVerified ? "EMAIL_NOT_VERIFIED" : undefined;
  if (refused) {
    await deps.db.writeAll((tx) => ({
      cleared: failuresCleared(tx, checked),
      audited: auditStatement(tx, failed(refused), new Date(deps.now())),
    }));
    throw new AppError(refused);
  }
  // The password is only the first step: no token, and the failures stay counted until the second
  // (which the deviceToken's trust, when good, carries over to).
  if (account.secondFactors > 0) return secondStepChallenge(deps, account, account.secondFactors, { deviceToken: checked.device?.token });
  const lastLogin = new Date(deps.now());
  const rehash = needsRehash(account.passwordHash) ? await hashPassword(password) : undefined;
  const session = newSession(deps, lastLogin, ["pwd"]);
  const { email } = checked.origin;
  const signedIn = { id: account.id, email, tokenVersion: account.tokenVersion };
  const completed = completeSignIn({ userId: account.id, email, firstSignIn: account.lastLogin === null, ...client, deviceToken: checked.device?.token }, lastLogin);
  const { user } = await deps.db.writeAll((tx) => ({
    ...signedInRows(tx, deps, signedIn, client, session, { toClear: checked, completed }),
    rehashed: rehash ? rehashStatement(tx, account.id, account.passwordHash, rehash) : undefined,
  }));
  return { signedIn, user: userOf(user), session, deviceToken: completed.deviceToken };
}

/**
 * E-mail and password: the token answer (with the device's deviceToken), or, for an account with
 * a second factor, the challenge of the second step (POST /api/auth/login/mfa) and no token.
 */
export async function login(deps: SessionDeps & ChallengeDeps, input: LoginBody, client: SignInClient): Promise<TokenResponse | MfaRequired> {
  const done = await signIn(deps, normalizeEmail(input.email), input.password, client, input.deviceToken);
  if ("mfaRequired" in done) return done;
  // Signed after the e-mail's turn: the next attempt for it need not wait for the signature.
  return { ...(await tokenAnswer(deps, done.signedIn, done.user, done.session)), deviceToken: done.deviceToken };
}

/**
 * Today's refresh, by the bearer alone: a fresh token for the version the caller's token carries
 * (so a refresh racing a logout cannot outlive it), in the caller's session and never beyond its
 * end, with the session's sign-in time and amr; a sid-less token refreshes to a sid-less token.
 * A session token is refused (401) with LEGACY_BEARER_REFRESH=off, and once its session has used
 * its refresh token: a client that rotates never needs it, so a stolen access token cannot be
 * stretched over the session's life by it.
 */
export async function refresh(deps: SessionDeps, caller: Caller): Promise<TokenResponse> {
  // A key's caller has no sign-in to renew: signing a token for it would lift the key's scopes.
  if (caller.apiKey) throw new AppError("API_KEY_NOT_ALLOWED");
  const { session } = caller;
  if (!session) return tokenAnswer(deps, caller, ownUser(deps, caller));
  if (!deps.config.legacyBearerRefresh) throw unauthorized();
  const state = await bearerRefreshStateOf(deps.db, session.id);
  if (!state || state.rotated) throw unauthorized();
  return tokenAnswer(deps, caller, ownUser(deps, caller), { ...session, authTime: Math.floor(state.signedInAt / 1000) });
}

/** The caller's session as an answer's tokens carry it on: its sign-in time stays the caller's. */
/** The caller's own User, for an answer's tokens (404 USER_NOT_FOUND were it deleted meanwhile). */
const ownUser = (deps: SessionDeps, caller: Caller) => findUser(deps.db, caller.id).then(existing(caller.id));

const callerSession = (caller: Caller, refreshToken?: string): AnswerSession | undefined =>
  caller.session && { ...caller.session, authTime: caller.authTime ?? 0, ...(refreshToken && { refreshToken }) };

/**
 * A refresh token exchanged for a fresh access token and a new refresh token (rotation), in two
 * round trips: the token with its session and user, then one unit (a third when a concurrent
 * refresh of the same token won the rotation). A rotated token presented
 * again within REFRESH_REUSE_GRACE_S is answered once more with a sibling (an answer lost on the
 * way); after that, or a second time, it is taken for stolen: its whole session ends, audited.
 */
export async function refreshWithToken(deps: SessionDeps, refreshToken: string, source: Reader = deps.db): Promise<TokenResponse> {
  const state = await refreshStateOf(source, refreshToken);
  const now = new Date(deps.now());
  if (!state || !isOpen(state, now.getTime(), deps.config.sessionIdleTimeoutMs)) throw unauthorized();
  const graceFrom = new Date(now.getTime() - deps.config.refreshReuseGraceS * 1000);
  const reused = state.rotatedAt !== null && (state.sibling !== null || state.rotatedAt < graceFrom.getTime());
  if (reused) {
    const audit = { action: "REFRESH_TOKEN_REUSED", actor: state.email, subjectType: "User", subjectId: state.userId, details: { sessionId: state.sessionId } };
    await deps.db.writeAll((tx) => [endSessionStatement(tx, state.userId, state.sessionId, now), auditStatement(tx, audit, now)]);
    throw unauthorized();
  }
  const next = randomToken(32);
  const rotate = (inGrace: boolean) =>
    deps.db.writeAll((tx) => ({
      ...rotationRows(tx, state.sessionId, refreshToken, next, now, inGrace ? graceFrom : undefined),
      user: userById(tx, state.userId),
    }));
  let { issued, user } = await rotate(state.rotatedAt !== null);
  // Another request rotated the same token meanwhile (two tabs, a retry): it got the successor,
  // this one the sibling, as the grace would have answered a moment later.
  if (issued.length === 0 && state.rotatedAt === null) ({ issued, user } = await rotate(true));
  if (issued.length === 0) {
    // An edge's copy that did not know yet that another edge had rotated the token: the primary's
    // conditional write refused it, so it is judged again on the primary's state (reuse detection).
    if (deps.db.primary && source !== deps.db.primary) return refreshWithToken(deps, refreshToken, deps.db.primary);
    throw unauthorized();
  }
  const session = { id: state.sessionId, expiresAt: state.expiresAt, authTime: Math.floor(state.signedInAt / 1000), amr: state.amr.split(","), refreshToken: next };
  return tokenAnswer(deps, { id: state.userId, email: state.email, tokenVersion: state.tokenVersion }, userOf(user), session);
}

/**
 * Ends the caller's session (its access and refresh tokens); with `all`, or for a sid-less token,
 * every session and sid-less token of the caller (token version +1). Audited LOGOUT, in the same unit.
 */
export async function logout(deps: SessionDeps, caller: Caller, all: boolean) {
  const now = new Date(deps.now());
  const one = !all && caller.session;
  const audit = { action: "LOGOUT", actor: caller.email, subjectType: "User", subjectId: caller.id, details: one ? { sessionId: one.id } : { scope: "all" } };
  await deps.db.writeAll((tx) => [one ? endSessionStatement(tx, caller.id, one.id, now) : tokenVersionBump(tx, caller.id), auditStatement(tx, audit, now)]);
}

/**
 * The new password stored, in the caller's turn, after checking the current one like a login:
 * the new token version. The caller's session is carried over to it with `refreshToken` as its
 * only refresh token; every other session ends with the version.
 */
async function storeNewPassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string, refreshToken: string): Promise<number> {
  const subject = { actor: caller.email, subjectType: "User", subjectId: caller.id };
  using _turn = await attemptTurn(caller.email);
  const failure = { ...subject, action: "PASSWORD_CHANGE_FAILED", details: { address } };
  // Hashed once, even when the current password is checked again at the primary (withPassword).
  let passwordHash: Promise<string> | undefined;
  // Awaited here: the turn ends when this function returns.
  return await withPassword(deps, { email: caller.email, password: input.currentPassword, client: { address }, failure }, async (checked) => {
    if (!checked) throw wrongCurrentPassword();
    passwordHash ??= hashPassword(input.newPassword);
    const hash = await passwordHash;
    const now = new Date(deps.now());
    // The gate (in cleared) before the new password: it compares the account as the check read it.
    const { updated } = await deps.db.writeAll((tx) => ({
      cleared: failuresCleared(tx, checked),
      audited: auditStatement(tx, { ...subject, action: "PASSWORD_CHANGED" }, now),
      updated: newPasswordStatement(tx, checked.account.id, hash, now),
      kept: caller.session ? keptSessionRows(tx, caller.session.id, refreshToken, now) : undefined,
    }));
    return updated[0].tokenVersion;
  });
}

/**
 * Checks the current password (throttled like a login, since a stolen token must not become a
 * password oracle), stores the new one and revokes every earlier token and every other session;
 * answers with a new token (and, in a session, a new refresh token: the caller stays signed in).
 */
export async function changePassword(deps: SessionDeps, caller: Caller, input: ChangePasswordBody, address: string): Promise<TokenResponse> {
  await assertPasswordAllowed(deps, input.newPassword, caller.email, "newPassword");
  const refreshToken = randomToken(32);
  const tokenVersion = await storeNewPassword(deps, caller, input, address, refreshToken);
  return tokenAnswer(deps, { ...caller, tokenVersion }, ownUser(deps, caller), callerSession(caller, refreshToken));
}
