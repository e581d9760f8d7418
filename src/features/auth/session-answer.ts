/**
 * The end of every sign-in (password, password and a second factor, passkey): the unit that opens
 * the session and stamps the sign-in, and the token answer. A sign-in's session carries `amr`,
 * how it signed in; its tokens carry it too.
 */
import type { Db } from "../../db/database";
import type { User } from "../../models/user";
import type { Tokens } from "../../security/bearer-tokens";
import { failuresCleared, type FailuresToClear, type PasswordCheckDeps } from "../../security/password-check";
import type { completeSignIn } from "../../security/sign-in-completion";
import type { PasswordPolicyDeps } from "../../security/password-policy";
import { auditStatement } from "../../store/audit";
import { openSessionRows, randomToken } from "../../store/sessions";
import { lastLoginStatement, userById, userOf } from "../../store/users";
import type { TokenResponse } from "./model";

export interface SessionDeps extends PasswordCheckDeps, PasswordPolicyDeps {
  tokens: Tokens;
  config: PasswordCheckDeps["config"] &
    PasswordPolicyDeps["config"] & {
      requireEmailVerification: boolean;
      sessionMaxAgeMs: number;
      sessionIdleTimeoutMs: number;
      sessionMaxPerUser: number;
      refreshReuseGraceS: number;
      legacyBearerRefresh: boolean;
    };
}

/** Where a sign-in comes from: the client address and its user agent with the device label (security/device-label.ts). */
export interface SignInClient {
  address: string;
  userAgent: string | null;
  device: string | null;
}

/** A session an answer's tokens belong to: its id, absolute end (ms), sign-in time (s), how it signed in and, when one is handed out, its new refresh token. */
export interface AnswerSession {
  id: string;
  expiresAt: number;
  authTime: number;
  amr?: string[];
  refreshToken?: string;
}

/**
 * The one token answer: a bearer token for the account (its id, e-mail and token version) and,
 * in a session, never outliving it, with the refresh token being handed out; and the user.
 */
export async function tokenAnswer(
  deps: SessionDeps,
  account: { id: number; email: string; tokenVersion: number },
  user: User | Promise<User>,
  session?: AnswerSession,
): Promise<TokenResponse> {
  const bound = session && { sid: session.id, notAfter: Math.floor(session.expiresAt / 1000), authTime: session.authTime, amr: session.amr };
  const [token, shown] = await Promise.all([deps.tokens.issue(account.email, account.tokenVersion, account.id, bound), user]);
  const now = deps.now();
  const answer: TokenResponse = { token, tokenType: "Bearer", expiresIn: deps.tokens.expiryOf(bound) - Math.floor(now / 1000), user: shown };
  if (session?.refreshToken === undefined) return answer;
  // The refresh token lives while its session does: until the absolute end, unless left idle.
  const refreshExpiresIn = Math.floor((Math.min(session.expiresAt, now + deps.config.sessionIdleTimeoutMs) - now) / 1000);
  return { ...answer, refreshToken: session.refreshToken, refreshExpiresIn };
}

/** The account a completed sign-in is for. */
export interface SignedInAccount {
  id: number;
  email: string;
  tokenVersion: number;
}

/** A new session's id, absolute end and first refresh token, opened `at` by a sign-in of `amr`. */
export const newSession = (deps: SessionDeps, at: Date, amr: string[]) => ({
  id: randomToken(16),
  expiresAt: at.getTime() + deps.config.sessionMaxAgeMs,
  authTime: Math.floor(at.getTime() / 1000),
  refreshToken: randomToken(32),
  amr,
});

/** What a sign-in's unit also writes: the login failures its success clears, and its device (security/sign-in-completion.ts). */
export interface SignInEffects {
  toClear?: FailuresToClear;
  completed: ReturnType<typeof completeSignIn>;
}

/**
 * The statements that complete a sign-in, for one unit: the session opened with its first refresh
 * token, the login failures its success clears, the device it came from, the last login, the
 * audit row LOGIN (with the client address, and how it signed in unless by password alone), and
 * the answer's user read back.
 */
export function signedInRows(tx: Db, deps: SessionDeps, account: SignedInAccount, client: SignInClient, session: ReturnType<typeof newSession>, effects: SignInEffects) {
  const at = new Date(session.expiresAt - deps.config.sessionMaxAgeMs);
  const { amr } = session;
  const opened = { id: session.id, userId: account.id, tokenVersion: account.tokenVersion, ...client, amr };
  const details = { address: client.address, ...(amr.join() === "pwd" ? {} : { amr }) };
  return {
    session: openSessionRows(tx, opened, session.refreshToken, { now: at, expiresAt: new Date(session.expiresAt) }, deps.config.sessionMaxPerUser),
    cleared: effects.toClear ? failuresCleared(tx, effects.toClear) : [],
    device: effects.completed.rows(tx),
    lastLogin: lastLoginStatement(tx, account.id, at),
    audited: auditStatement(tx, { action: "LOGIN", actor: account.email, subjectType: "User", subjectId: account.id, details }, at),
    user: userById(tx, account.id),
  };
}

/** Runs a sign-in's statements (signedInRows) one after another inside a closure unit; answers the user's rows. */
export async function runSignedIn(rows: ReturnType<typeof signedInRows>) {
  for (const statement of [...rows.session, ...rows.cleared, ...rows.device]) await statement;
  await rows.lastLogin;
  await rows.audited;
  return userOf(await rows.user);
}
