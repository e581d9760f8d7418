/**
 * A step-up: a fresh proof, from a signed-in caller, that the account's owner is at the keyboard,
 * for a change a token alone must not make (removing a factor, moving the e-mail address, linking
 * a provider), on accounts that may have no password. It is proved by the password, a TOTP code
 * or a passkey assertion (POST /api/account/step-up, the mfa feature), or by a fresh sign-in at a
 * provider linked to the account (prompt=login, max_age=0, its auth_time checked: the federation
 * feature); never by a recent sign-in alone.
 *
 * Either way the caller gets a step-up token: sealed by the data cipher (nothing is written when
 * it is made), 5 minutes, for the user, the token version (a password change or a factor removed
 * since voids it) and the session that made it (another session's token is no proof), and single
 * use: the change that takes it records it as used in its own unit, so a replay finds it there.
 */
import { randomBytes } from "node:crypto";
import type { Db } from "../db/database";
import { AppError } from "../errors";
import { challengeRows } from "../store/mfa";
import type { Caller } from "./caller";
import { openSealed, sealedFor } from "./webauthn";
import type { DataCipher } from "./data-encryption";

const STEP_UP = "step-up";
export const STEP_UP_TTL_MS = 5 * 60_000;
/** A used token is remembered a minute past its end, for instances whose clocks lag. */
const USED_MARGIN_MS = 60_000;

/** How the caller proved it: pwd, otp, hwk (a passkey) or fed (a provider). */
export type StepUpMethod = "pwd" | "otp" | "hwk" | "fed";

export interface StepUp {
  stepUpToken: string;
  /** Seconds. */
  expiresIn: number;
  method: StepUpMethod;
}

export type StepUpDeps = { cipher: Pick<DataCipher, "seal" | "open">; now: () => number };
type StepUpCaller = Pick<Caller, "id" | "tokenVersion" | "session">;

const sessionOf = (caller: StepUpCaller) => caller.session?.id ?? "-";

/** A new step-up token for the caller, proved by `method`. */
export function issueStepUp(deps: StepUpDeps, caller: StepUpCaller, method: StepUpMethod): StepUp {
  const facts = [randomBytes(16).toString("base64url"), String(caller.id), String(caller.tokenVersion), sessionOf(caller), method];
  return { stepUpToken: sealedFor(deps.cipher, STEP_UP, deps.now() + STEP_UP_TTL_MS, facts), expiresIn: STEP_UP_TTL_MS / 1000, method };
}

const invalid = () => new AppError("INVALID_STEP_UP");

/**
 * The caller's step-up token checked (403 INVALID_STEP_UP unless it opens, is live and is this
 * caller's, in this session, at this token version); answers the statement that spends it, for the
 * change's own unit: it throws INVALID_STEP_UP when the token was spent already.
 */
export function checkedStepUp(deps: StepUpDeps, caller: StepUpCaller, token: string): (tx: Db) => Promise<void> {
  const now = deps.now();
  const opened = openSealed(deps.cipher, token, STEP_UP, now);
  const [id, userId, tokenVersion, session] = opened?.facts ?? [];
  if (!opened || !id || userId !== String(caller.id) || tokenVersion !== String(caller.tokenVersion) || session !== sessionOf(caller)) throw invalid();
  const expiresAt = new Date(opened.expiresAt + USED_MARGIN_MS);
  return async (tx) => {
    const [swept, recorded] = challengeRows(tx, { key: `step-up.${id}`, purpose: "step-up-used", expiresAt }, new Date(now));
    await swept;
    if ((await recorded).length === 0) throw invalid();
  };
}
