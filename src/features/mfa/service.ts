/**
 * The caller's own second factors: TOTP (pending until a first code confirms it; the confirmation
 * answers 10 recovery codes, shown once), recovery codes (regenerated with the password), and the
 * summary. Enrolling TOTP needs a sign-in within 10 minutes (security/recent-auth.ts); removing it
 * and regenerating codes, that and a proof, or a step-up (security/step-up.ts). A factor proved in the caller's session joins its amr, so an
 * enrol-only session (MFA_REQUIRED_ROLES) becomes a full one. Removing one ends every session of
 * the user, the caller's too (token version +1); every change is audited and mailed.
 */
import type { Config } from "../../config";
import type { Database, Db } from "../../db/database";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { assertLoginAllowed, attemptTurn, confirmPassword, countFailure, type PasswordCheckDeps } from "../../security/password-check";
import { requireRecentAuth } from "../../security/recent-auth";
import { checkedStepUp } from "../../security/step-up";
import { acceptedStep, newRecoveryCodes, newTotpSecret, recoveryCodeHash, type SecretCipher } from "../../security/totp";
import { auditStatement } from "../../store/audit";
import {
  deleteRecoveryCodesStatement,
  deleteTotpStatement,
  factorCounts,
  pendingTotpStatement,
  replaceRecoveryCodesRows,
  totpOf,
  totpRows,
  totpStepStatement,
} from "../../store/mfa";
import { enqueueNotification } from "../../store/outbox";
import { addAmrStatement } from "../../store/sessions";
import { tokenVersionBump } from "../../store/users";
import { checkedEnrolCode } from "./enrol-code";
import type { FactorRemoveBody, MfaStatus, RecoveryCodesBody, TotpConfirmBody } from "./model";

export interface MfaDeps extends PasswordCheckDeps {
  db: Database;
  now: () => number;
  cipher: SecretCipher;
  config: PasswordCheckDeps["config"] & Pick<Config, "publicUrl" | "rpId" | "rpOrigins" | "mfaRequiredRoles" | "smtpUrl">;
}

export async function mfaStatus(deps: MfaDeps, caller: Caller): Promise<MfaStatus> {
  const counts = await factorCounts(deps.db, caller.id);
  return { totp: counts.totp > 0, passkeys: counts.passkeys, recoveryCodesLeft: counts.recoveryCodesLeft };
}

/** A new pending secret (replacing a pending one): its base32 form, the otpauth URI and its QR code. 409 when TOTP is already on. */
export async function startTotp(deps: MfaDeps, caller: Caller) {
  requireRecentAuth(caller, deps.now());
  const enrolment = await newTotpSecret(caller.email);
  const [stored] = await deps.db.writeAll((tx) => [pendingTotpStatement(tx, caller.id, deps.cipher.seal(enrolment.secret), new Date(deps.now()))]);
  if (stored.length === 0) throw new AppError("TOTP_ALREADY_ENABLED");
  return enrolment;
}

/** The step a code is good for against the user's stored secret (pending or active), or undefined. */
const stepOf = (deps: MfaDeps, totp: { secretSealed: string; lastStep: number }, code: string) =>
  acceptedStep(deps.cipher.open(totp.secretSealed).toString("utf8"), code.trim(), deps.now(), totp.lastStep);

/** Statements that note a change of the user's factors: audited, mailed. */
export const noted = (tx: Db, caller: Caller, kind: "MFA_ENABLED" | "MFA_DISABLED" | "PASSKEY_ADDED", at: Date, details?: Record<string, unknown>) =>
  Promise.all([
    auditStatement(tx, { action: kind, actor: caller.email, subjectType: "User", subjectId: caller.id, details }, at),
    enqueueNotification(tx, kind, caller.email, { userId: caller.id }, at),
  ]);

/** 10 new recovery codes: the codes, shown once, and their hashes, stored in place of the user's earlier ones (replaceRecoveryCodesRows). */
export function freshRecoveryCodes() {
  const codes = newRecoveryCodes();
  return { codes, hashes: codes.map((c) => recoveryCodeHash(c) as string) };
}

/**
 * The first code confirms the pending secret: TOTP is on, mailed MFA_ENABLED; answers 10 new
 * recovery codes. A first factor under MFA_REQUIRED_ROLES also takes the enrolment code (enrol-code.ts).
 */
export async function confirmTotp(deps: MfaDeps, caller: Caller, body: TotpConfirmBody, address: string) {
  requireRecentAuth(caller, deps.now());
  const totp = await totpOf(deps.db, caller.id);
  if (!totp || totp.confirmedAt) throw new AppError("TOTP_NOT_PENDING");
  const spendEnrolCode = await checkedEnrolCode(deps, caller, body.enrolCode, address);
  const step = await stepOf(deps, totp, body.code);
  if (step === undefined) throw new AppError("INVALID_CODE");
  const { codes, hashes } = freshRecoveryCodes();
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    if ((await totpStepStatement(tx, caller.id, step, now, true)).length === 0) throw new AppError("INVALID_CODE");
    await spendEnrolCode?.(tx);
    for (const statement of replaceRecoveryCodesRows(tx, caller.id, hashes, now)) await statement;
    if (caller.session) await addAmrStatement(tx, caller.session.id, "otp");
    await noted(tx, caller, "MFA_ENABLED", now);
  });
  return { recoveryCodes: codes };
}

/**
 * A current code of the caller's authenticator app, checked in the e-mail's turn and throttled like
 * a login (a wrong one is counted and audited MFA_FAILED, as in the sign-in's second step): the
 * code's step, which the caller spends (totpStepStatement) in the unit of what it proved.
 */
export async function codeProof(deps: MfaDeps, caller: Caller, code: string, address: string): Promise<number> {
  using _turn = await attemptTurn(caller.email);
  const allowed = await assertLoginAllowed(deps, caller, { address }, (db) => ({ totp: totpRows(db, caller.id) }));
  const [totp] = allowed.alongside.totp;
  const step = totp?.confirmedAt ? await stepOf(deps, totp, code) : undefined;
  if (step !== undefined) return step;
  await countFailure(deps, allowed, { action: "MFA_FAILED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { address } }, caller.id);
  throw new AppError("INVALID_CODE");
}

/** A code's step spent: a replay of it (here or at a sign-in) is refused. */
export const spendCode = (caller: Caller, step: number, now: Date) => async (tx: Db) => {
  if ((await totpStepStatement(tx, caller.id, step, now)).length === 0) throw new AppError("INVALID_CODE");
};

/**
 * What removing a factor proves, so that a token alone (left in a browser, a log) cannot strip an
 * account: a step-up token (security/step-up.ts: a fresh proof, the way for an account without a
 * password), or, after a sign-in within 10 minutes, the password or a current code of the
 * authenticator app (codeProof). Answers the statement that spends the proof, for the removal's unit.
 */
export async function removalProof(deps: MfaDeps, caller: Caller, body: FactorRemoveBody, address: string): Promise<(tx: Db) => Promise<void>> {
  if (body.stepUpToken !== undefined) return checkedStepUp(deps, caller, body.stepUpToken);
  requireRecentAuth(caller, deps.now());
  if (body.password !== undefined) {
    await confirmPassword(deps, caller, body.password, address);
    return async () => undefined;
  }
  return spendCode(caller, await codeProof(deps, caller, body.code ?? "", address), new Date(deps.now()));
}

/**
 * TOTP removed, proved as removalProof says. Every session of the user ends, the caller's too;
 * recovery codes go too when no passkey is left; mailed MFA_DISABLED.
 */
export async function removeTotp(deps: MfaDeps, caller: Caller, body: FactorRemoveBody, address: string) {
  const totp = await totpOf(deps.db, caller.id);
  if (!totp?.confirmedAt) throw new AppError("TOTP_NOT_ENABLED");
  const spend = await removalProof(deps, caller, body, address);
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    await spend(tx);
    await deleteTotpStatement(tx, caller.id);
    await dropCodesWithoutFactor(tx, caller.id);
    await tokenVersionBump(tx, caller.id);
    await noted(tx, caller, "MFA_DISABLED", now, { factor: "totp" });
  });
}

/** Recovery codes guard second factors: with none left, they go too. */
export async function dropCodesWithoutFactor(tx: Db, userId: number) {
  const counts = await factorCounts(tx, userId);
  if (counts.totp === 0 && counts.passkeys === 0) await deleteRecoveryCodesStatement(tx, userId);
}

/** 10 new recovery codes replace the old ones, with the password (after a recent sign-in, throttled like a login) or a step-up token; 409 without a second factor. */
export async function regenerateRecoveryCodes(deps: MfaDeps, caller: Caller, body: RecoveryCodesBody, address: string) {
  let spend: (tx: Db) => Promise<void> = async () => undefined;
  if (body.stepUpToken !== undefined) spend = checkedStepUp(deps, caller, body.stepUpToken);
  else {
    requireRecentAuth(caller, deps.now());
    await confirmPassword(deps, caller, body.password ?? "", address);
  }
  const counts = await factorCounts(deps.db, caller.id);
  if (counts.totp === 0 && counts.passkeys === 0) throw new AppError("MFA_NOT_ENABLED");
  const { codes, hashes } = freshRecoveryCodes();
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    await spend(tx);
    for (const statement of replaceRecoveryCodesRows(tx, caller.id, hashes, now)) await statement;
    await auditStatement(tx, { action: "RECOVERY_CODES_REGENERATED", actor: caller.email, subjectType: "User", subjectId: caller.id }, now);
  });
  return { recoveryCodes: codes };
}
