/**
 * A step-up proved here (security/step-up.ts): the password, a current code of the authenticator
 * app (spent) or an assertion of one of the caller's passkeys (user verification required, as for
 * a passwordless sign-in), each checked in the e-mail's turn and counted in the login throttle
 * when wrong. A recent sign-in is not asked for: the proof is fresher than any.
 */
import { randomBytes } from "node:crypto";
import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { Db } from "../../db/database";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { assertLoginAllowed, attemptTurn, confirmPassword, countFailure } from "../../security/password-check";
import { issueStepUp, type StepUp, type StepUpMethod } from "../../security/step-up";
import { challengeOf, checkAssertion, openSealed, relyingParty, requestOptions, sealedFor } from "../../security/webauthn";
import { challengeRows, passkeyByCredentialRows, passkeyUsedStatement } from "../../store/mfa";
import type { StepUpBody } from "./model";
import { codeProof, type MfaDeps, spendCode } from "./service";

/** The sealed challenge's ceremony: a sign-in's or a second step's challenge is no step-up's. */
const CEREMONY = "step-up-passkey";
const CHALLENGE_TTL_MS = 5 * 60_000;
const USED_MARGIN_MS = 60_000;

/** Request options for a passkey of the caller's, the challenge sealed for this ceremony and this user (nothing written). */
export async function stepUpPasskeyOptions(deps: MfaDeps, caller: Caller) {
  const rp = relyingParty(deps.config);
  const challenge = sealedFor(deps.cipher, CEREMONY, deps.now() + CHALLENGE_TTL_MS, [randomBytes(16).toString("base64url"), String(caller.id)]);
  return requestOptions(rp, "required", challenge);
}

/** A passkey's assertion for the step-up's challenge: the statement that records both used, or undefined when it is not the caller's or not right. */
async function passkeyProof(deps: MfaDeps, caller: Caller, assertion: StepUpBody["passkey"] & object, now: Date): Promise<((tx: Db) => Promise<void>) | undefined> {
  const challenge = challengeOf(assertion.response);
  const sealed = challenge && Buffer.from(challenge, "base64url");
  const opened = sealed && sealed.toString("base64url") === challenge ? openSealed(deps.cipher, sealed.toString("utf8"), CEREMONY, now.getTime()) : undefined;
  if (!challenge || !opened || opened.facts[1] !== String(caller.id)) return undefined;
  const [found] = await passkeyByCredentialRows(deps.db, assertion.id);
  const response = { clientExtensionResults: {}, ...assertion } as AuthenticationResponseJSON;
  const checked = await checkAssertion(deps, relyingParty(deps.config), response, challenge, found, { userId: caller.id, requireUserVerification: true });
  if (!checked) return undefined;
  return async (tx) => {
    const [swept, recorded] = challengeRows(tx, { key: challenge, purpose: "passkey-used", expiresAt: new Date(opened.expiresAt + USED_MARGIN_MS) }, now);
    await swept;
    if ((await recorded).length === 0 || (await passkeyUsedStatement(tx, checked.passkeyId, checked.newCounter, now)).length === 0) throw new AppError("INVALID_PASSKEY");
  };
}

/** `POST /api/account/step-up`: the proof checked and spent, a step-up token answered. */
export async function stepUp(deps: MfaDeps, caller: Caller, body: StepUpBody, address: string): Promise<StepUp> {
  const now = new Date(deps.now());
  let method: StepUpMethod;
  let spend: (tx: Db) => Promise<void>;
  if (body.password !== undefined) {
    await confirmPassword(deps, caller, body.password, address);
    method = "pwd";
    spend = async () => undefined;
  } else if (body.code !== undefined) {
    spend = spendCode(caller, await codeProof(deps, caller, body.code, address), now);
    method = "otp";
  } else {
    using _turn = await attemptTurn(caller.email);
    const allowed = await assertLoginAllowed(deps, caller, { address });
    const proved = body.passkey && (await passkeyProof(deps, caller, body.passkey, now));
    if (!proved) {
      await countFailure(deps, allowed, { action: "MFA_FAILED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { address } }, caller.id);
      throw new AppError("INVALID_PASSKEY");
    }
    spend = proved;
    method = "hwk";
  }
  await deps.db.write(spend);
  return issueStepUp(deps, caller, method);
}
