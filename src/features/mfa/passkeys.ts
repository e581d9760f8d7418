/**
 * The caller's passkeys: registration (options, then the authenticator's answer, checked by
 * @simplewebauthn/server against the challenge kept in the database, so any instance can finish
 * it), the list, renaming and removal. Adding one needs a recent sign-in; it is audited, mailed
 * PASSKEY_ADDED, and joins the caller's session amr (hwk). Removing one needs a recent sign-in and
 * a proof (the password or a current code) and ends every session of the user, the caller's too.
 */
import type { RegistrationResponseJSON } from "@simplewebauthn/server";
import { integrityKind } from "../../db/errors";
import { AppError } from "../../errors";
import type { Caller } from "../../security/caller";
import { requireRecentAuth } from "../../security/recent-auth";
import { challengeOf, loadWebAuthn, relyingParty, userHandleOf } from "../../security/webauthn";
import {
  challengeRows,
  deletePasskeyStatement,
  factorCounts,
  insertPasskeyStatement,
  liveChallenge,
  type PasskeyRow,
  passkeysOf,
  renamePasskeyStatement,
  replaceRecoveryCodesRows,
  takeChallengeStatement,
} from "../../store/mfa";
import { addAmrStatement, randomToken } from "../../store/sessions";
import { tokenVersionBump } from "../../store/users";
import type { FactorRemoveBody, NewPasskey, NewPasskeyBody, Passkey } from "./model";
import { checkedEnrolCode } from "./enrol-code";
import { dropCodesWithoutFactor, freshRecoveryCodes, type MfaDeps, noted, removalProof } from "./service";

const CHALLENGE_TTL_MS = 5 * 60_000;

const shown = (row: PasskeyRow): Passkey => ({
  id: row.id,
  name: row.name,
  createdAt: row.createdAt.toISOString(),
  lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
});

/** Creation options for a discoverable credential (its other passkeys excluded), the challenge kept 5 minutes. */
export async function registrationOptions(deps: MfaDeps, caller: Caller) {
  requireRecentAuth(caller, deps.now());
  const rp = relyingParty(deps.config);
  const existing = await passkeysOf(deps.db, caller.id);
  const { generateRegistrationOptions } = await loadWebAuthn();
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: caller.email,
    userID: userHandleOf(caller.id),
    userDisplayName: caller.email,
    attestationType: "none",
    timeout: CHALLENGE_TTL_MS,
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports?.split(",").filter(Boolean) })),
    authenticatorSelection: { residentKey: "required", userVerification: "preferred" },
  });
  const now = new Date(deps.now());
  await deps.db.writeAll((tx) => challengeRows(tx, { key: options.challenge, purpose: "register", userId: caller.id, expiresAt: new Date(now.getTime() + CHALLENGE_TTL_MS) }, now));
  return options;
}

/**
 * The authenticator's answer to the caller's registration options: the new passkey, and, when the
 * account has no unused recovery code (its first second factor), 10 of them, shown once, as an
 * authenticator app's confirmation answers: without them a lost passkey would lock the account out.
 * A first factor under MFA_REQUIRED_ROLES also takes the enrolment code (enrol-code.ts). 400
 * PASSKEY_REJECTED when it does not verify.
 */
export async function addPasskey(deps: MfaDeps, caller: Caller, body: NewPasskeyBody, address: string): Promise<NewPasskey> {
  requireRecentAuth(caller, deps.now());
  const rp = relyingParty(deps.config);
  const now = new Date(deps.now());
  const challenge = challengeOf(body.response.response);
  const pending = challenge && (await liveChallenge(deps.db, "register", challenge, now));
  if (!challenge || !pending || pending.userId !== caller.id) throw new AppError("PASSKEY_REJECTED");
  const spendEnrolCode = await checkedEnrolCode(deps, caller, body.enrolCode, address);
  const { verifyRegistrationResponse } = await loadWebAuthn();
  const verified = await verifyRegistrationResponse({
    response: { clientExtensionResults: {}, ...body.response } as RegistrationResponseJSON,
    expectedChallenge: challenge,
    expectedOrigin: rp.origins,
    expectedRPID: rp.id,
    requireUserVerification: false,
  }).catch(() => undefined);
  if (!verified?.verified) throw new AppError("PASSKEY_REJECTED");
  const { credential } = verified.registrationInfo;
  const fresh = freshRecoveryCodes();
  try {
    const { added, recoveryCodes } = await deps.db.write(async (tx) => {
      if ((await takeChallengeStatement(tx, "register", challenge, now)).length === 0) throw new AppError("PASSKEY_REJECTED");
      await spendEnrolCode?.(tx);
      const [added] = await insertPasskeyStatement(tx, {
        id: randomToken(12),
        userId: caller.id,
        credentialId: credential.id,
        publicKey: Buffer.from(credential.publicKey).toString("base64url"),
        counter: credential.counter,
        transports: credential.transports?.join(",") ?? null,
        name: body.name.trim(),
        createdAt: now,
      });
      if (caller.session) await addAmrStatement(tx, caller.session.id, "hwk");
      await noted(tx, caller, "PASSKEY_ADDED", now, { passkeyId: added.id });
      if ((await factorCounts(tx, caller.id)).recoveryCodesLeft > 0) return { added };
      for (const statement of replaceRecoveryCodesRows(tx, caller.id, fresh.hashes, now)) await statement;
      return { added, recoveryCodes: fresh.codes };
    });
    return { ...shown(added), ...(recoveryCodes && { recoveryCodes }) };
  } catch (error) {
    if (integrityKind(error) === "duplicate") throw new AppError("PASSKEY_EXISTS");
    throw error;
  }
}

export const listPasskeys = async (deps: MfaDeps, caller: Caller) => (await passkeysOf(deps.db, caller.id)).map(shown);

export async function renamePasskey(deps: MfaDeps, caller: Caller, id: string, name: string): Promise<Passkey> {
  const [row] = await deps.db.writeAll((tx) => [renamePasskeyStatement(tx, caller.id, id, name.trim())]);
  if (row.length === 0) throw new AppError("PASSKEY_NOT_FOUND");
  return shown(row[0]);
}

/**
 * One of the caller's passkeys removed, proved as TOTP's removal is (service.ts removalProof: a
 * step-up, or a recent sign-in and the password or a current code, which it spends): every session
 * of the user ends (the caller's too), mailed MFA_DISABLED; recovery codes go with the last factor.
 */
export async function removePasskey(deps: MfaDeps, caller: Caller, id: string, body: FactorRemoveBody, address: string) {
  const spend = await removalProof(deps, caller, body, address);
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    if ((await deletePasskeyStatement(tx, caller.id, id)).length === 0) throw new AppError("PASSKEY_NOT_FOUND");
    await spend(tx);
    await dropCodesWithoutFactor(tx, caller.id);
    await tokenVersionBump(tx, caller.id);
    await noted(tx, caller, "MFA_DISABLED", now, { factor: "passkey", passkeyId: id });
  });
}
