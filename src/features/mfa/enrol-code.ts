/**
 * A first enrolment under MFA_REQUIRED_ROLES, confirmed out of band: a user in such a role without
 * a second factor enrols the first one (TOTP's confirmation, a passkey's registration) only with a
 * 6-digit code mailed to the account's verified address (POST /api/account/mfa/enrol-code) or,
 * where no mail is sent, given by the operator (`usersvc mfa enrol-code --email E`): a password
 * alone cannot enrol an attacker's authenticator. A code lives 10 minutes, is burnt by its 5th
 * wrong try and is kept only hashed (store/mfa.ts); a new one replaces the last; at most 3 are
 * mailed to an account in 10 minutes. Each wrong try counts in the e-mail's login throttle, as a
 * sign-in's wrong code does.
 */
import { randomInt } from "node:crypto";
import type { Config } from "../../config";
import type { Database, Db, Reader } from "../../db/database";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { assertLoginAllowed, attemptTurn, countFailure, type PasswordCheckDeps, refuseUntil } from "../../security/password-check";
import { requireRecentAuth } from "../../security/recent-auth";
import { auditStatement } from "../../store/audit";
import {
  enrolCodeFailureStatement,
  enrolCodeHash,
  enrolCodeKey,
  enrolCodeMailedStatement,
  enrolCodeRows,
  factorCounts,
  liveChallengeRows,
  takeChallengeStatement,
} from "../../store/mfa";
import { enqueueNotification } from "../../store/outbox";
import { greetingOf, normalizeEmail, userStatusByEmail } from "../../store/users";

/** What the enrolment code needs: the database and clock, the login throttle's limits, and the two settings that decide whether a code is needed and mailed. */
export interface EnrolCodeDeps extends PasswordCheckDeps {
  config: PasswordCheckDeps["config"] & Pick<Config, "mfaRequiredRoles" | "smtpUrl">;
}

const MAX_TRIES = 5;
const MAX_MAILED = 3;
const MAIL_WINDOW_MS = 10 * 60_000;

const newCode = () => String(randomInt(0, 1_000_000)).padStart(6, "0");

async function hasFactor(db: Reader, userId: number) {
  const counts = await factorCounts(db, userId);
  return counts.totp > 0 || counts.passkeys > 0;
}

/** Whether MFA_REQUIRED_ROLES holds the caller's enrolment to a code: a role of theirs requires a factor, and they have none yet. */
const needsCode = async (deps: EnrolCodeDeps, caller: Caller) => caller.roles.some((role) => deps.config.mfaRequiredRoles.includes(role)) && !(await hasFactor(deps.db, caller.id));

/** The statements that keep a fresh code for the user (replacing a live one), audited as issued `by` mail or the operator. */
const issuedRows = (tx: Db, userId: number, actor: string, code: string, by: "mail" | "operator", now: Date) => [
  ...enrolCodeRows(tx, userId, enrolCodeHash(userId, code), now),
  auditStatement(tx, { action: "MFA_ENROL_CODE_ISSUED", actor, subjectType: "User", subjectId: userId, details: { by } }, now),
];

/**
 * `POST /api/account/mfa/enrol-code`: a fresh code mailed (MFA_ENROL_CODE) to the caller's verified
 * address. 409 when the caller needs none, or when no SMTP is set up (the operator gives codes
 * then); 403 while the address is unverified; 429 with Retry-After past 3 mails in 10 minutes.
 */
export async function mailEnrolCode(deps: EnrolCodeDeps, caller: Caller) {
  requireRecentAuth(caller, deps.now());
  if (!(await needsCode(deps, caller))) throw new AppError("ENROL_CODE_NOT_NEEDED");
  if (!deps.config.smtpUrl) throw new AppError("ENROL_CODE_FROM_OPERATOR");
  if (!(await greetingOf(deps.db, caller.id))?.emailVerified) throw new AppError("EMAIL_VERIFICATION_REQUIRED");
  const code = newCode();
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    const [counted] = await enrolCodeMailedStatement(tx, caller.id, now, MAIL_WINDOW_MS);
    // Past the limit the unit rolls back, its count with it.
    if (counted.mailed > MAX_MAILED) refuseUntil(counted.windowEndsAt.getTime(), now.getTime());
    for (const statement of issuedRows(tx, caller.id, caller.email, code, "mail", now)) await statement;
    await enqueueNotification(tx, "MFA_ENROL_CODE", caller.email, { userId: caller.id }, now, { token: code });
  });
}

/**
 * The code of a first enrolment that MFA_REQUIRED_ROLES holds to one (none needed: undefined):
 * 403 ENROL_CODE_REQUIRED without it; 400 INVALID_ENROL_CODE for a wrong, expired or burnt one,
 * counted on the code (the 5th burns it) and in the login throttle (429 once full), audited
 * MFA_ENROL_CODE_FAILED. Answers the statement that spends it, for the enrolment's own unit (a
 * wrong authenticator code after a right enrolment code leaves the latter live).
 */
export async function checkedEnrolCode(deps: EnrolCodeDeps, caller: Caller, given: string | undefined, address: string): Promise<((tx: Db) => Promise<void>) | undefined> {
  if (!(await needsCode(deps, caller))) return undefined;
  if (given === undefined) throw new AppError("ENROL_CODE_REQUIRED");
  const now = new Date(deps.now());
  const key = enrolCodeKey(caller.id);
  const hash = enrolCodeHash(caller.id, given.trim());
  // In the e-mail's turn, as a sign-in's second step: parallel guesses see each other's failures.
  using _turn = await attemptTurn(caller.email);
  const allowed = await assertLoginAllowed(deps, caller, { address }, (db) => ({ code: liveChallengeRows(db, "enrol-code", key, now) }));
  const [live] = allowed.alongside.code;
  if (live?.challenge === hash)
    return async (tx) => {
      const [taken] = await takeChallengeStatement(tx, "enrol-code", key, now);
      if (taken?.challenge !== hash) throw new AppError("INVALID_ENROL_CODE");
    };
  if (live)
    await deps.db.write(async (tx) => {
      const [counted] = await enrolCodeFailureStatement(tx, caller.id);
      if (counted && counted.failures >= MAX_TRIES) await takeChallengeStatement(tx, "enrol-code", key, now);
    });
  const failure = { action: "MFA_ENROL_CODE_FAILED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { address } };
  await countFailure(deps, allowed, failure, caller.id);
  throw new AppError("INVALID_ENROL_CODE");
}

/**
 * `usersvc mfa enrol-code --email E`: a fresh code for an active account without a second factor
 * (replacing a live one), for the operator to hand over where no mail is sent; or why there is none.
 */
export async function issueEnrolCode(deps: { db: Database; now: () => number }, email: string): Promise<{ code: string } | { refused: string }> {
  const [user] = await userStatusByEmail(deps.db, normalizeEmail(email));
  if (!user?.active) return { refused: `no active user with e-mail ${email}` };
  if (await hasFactor(deps.db, user.id)) return { refused: `${email} has a second factor already: it needs no enrolment code` };
  const code = newCode();
  await deps.db.writeAll((tx) => issuedRows(tx, user.id, "system", code, "operator", new Date(deps.now())));
  return { code };
}
