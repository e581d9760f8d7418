/**
 * Passkeys (WebAuthn through @simplewebauthn/server): the relying party from configuration only
 * (PUBLIC_URL's host and origin, RP_ID / RP_ORIGINS overriding them), never from a request's Host
 * header; and an assertion checked against a stored credential, its signature counter included:
 * a counter that does not move forward (a cloned authenticator) is refused and audited.
 */
import { randomBytes } from "node:crypto";
import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { Database } from "../db/database";
import { AppError } from "../errors";
import { writeAudit } from "../store/audit";
import type { CredentialHolder } from "../store/mfa";
import type { DataCipher } from "./data-encryption";

let webAuthn: Promise<typeof import("@simplewebauthn/server")> | undefined;
/**
 * @simplewebauthn/server (with its CBOR and ASN.1 parsers, the largest library here) is loaded by the
 * first ceremony, not at start. reflect-metadata first: tsyringe, under its certificate checks,
 * needs that polyfill when it loads, and in the compiled binary a lazily loaded library's modules
 * do not run in its own import order (test/binary.test.ts).
 */
export const loadWebAuthn = () => (webAuthn ??= import("reflect-metadata").then(() => import("@simplewebauthn/server")));

export interface RelyingParty {
  id: string;
  name: string;
  origins: string[];
}

export interface RelyingPartyConfig {
  publicUrl?: string;
  rpId?: string;
  rpOrigins: readonly string[];
}

/** The relying party, or undefined without PUBLIC_URL or RP_ID. */
export function relyingPartyOf(config: RelyingPartyConfig): RelyingParty | undefined {
  const publicUrl = config.publicUrl ? new URL(config.publicUrl) : undefined;
  const id = config.rpId ?? publicUrl?.hostname;
  if (!id) return undefined;
  const origins = config.rpOrigins.length > 0 ? [...config.rpOrigins] : [publicUrl?.origin ?? `https://${id}`];
  return { id, name: "usersvc", origins };
}

/** The relying party; 400 PASSKEYS_NOT_CONFIGURED without one. */
export function relyingParty(config: RelyingPartyConfig): RelyingParty {
  const rp = relyingPartyOf(config);
  if (!rp) throw new AppError("PASSKEYS_NOT_CONFIGURED");
  return rp;
}

/** The WebAuthn user handle of an account: its id, as the authenticator keeps it with a discoverable credential. */
export const userHandleOf = (userId: number) => new TextEncoder().encode(String(userId));

/** Request options for a sign-in with any of the account's (discoverable) credentials; a random challenge unless given (a string as its UTF-8 bytes). */
export const requestOptions = async (rp: RelyingParty, userVerification: "required" | "preferred", challenge?: string | Uint8Array<ArrayBuffer>) =>
  (await loadWebAuthn()).generateAuthenticationOptions({ rpID: rp.id, userVerification, timeout: 300_000, challenge });

/*
 * A sealed challenge: a ceremony's challenge that needs no row until it is answered. The data
 * cipher (AES-256-GCM under DATA_ENCRYPTION_KEY, which every instance shares) seals the ceremony it
 * was issued for, when it expires, 16 random bytes (or the facts the caller gives, random bytes
 * among them: an mfaToken's, features/auth/second-step.ts); the challenge is that sealed text's
 * UTF-8 bytes, as options carry any challenge (base64url). Anything altered, sealed for another
 * ceremony, or past its expiry does not open. It stays single use through its answer's own unit,
 * which records it as used (store/mfa.ts challengeRows): a replay finds it there.
 */
type ChallengeCipher = Pick<DataCipher, "seal" | "open">;

/** The sealed text of `facts` (no dots in them; 16 random bytes unless given) for `ceremony`, good until `expiresAt` (ms): a challenge as request options carry it (its UTF-8 bytes). */
export const sealedFor = (cipher: ChallengeCipher, ceremony: string, expiresAt: number, facts: readonly string[] = [randomBytes(16).toString("base64url")]) =>
  cipher.seal([ceremony, expiresAt, ...facts].join("."));

/** The facts and expiry of a sealed text, undefined unless it opens, is for `ceremony` and is still live at `now`. */
export function openSealed(cipher: ChallengeCipher, sealed: string, ceremony: string, now: number): { expiresAt: number; facts: string[] } | undefined {
  let plain: string;
  try {
    plain = cipher.open(sealed).toString("utf8");
  } catch {
    return undefined;
  }
  const [sealedFor, expiry, ...facts] = plain.split(".");
  const expiresAt = Number(expiry);
  return sealedFor === ceremony && Number.isSafeInteger(expiresAt) && expiresAt > now ? { expiresAt, facts } : undefined;
}

/** When a sealed challenge (as an answer's clientDataJSON carries it: base64url) for `ceremony` expires; undefined unless it opens, is for that ceremony and is still live at `now`. */
export function sealedChallengeExpiry(cipher: ChallengeCipher, challenge: string, ceremony: string, now: number): number | undefined {
  const sealed = Buffer.from(challenge, "base64url");
  // One spelling per challenge: the used record is keyed by the text as signed.
  if (sealed.toString("base64url") !== challenge) return undefined;
  return openSealed(cipher, sealed.toString("utf8"), ceremony, now)?.expiresAt;
}

/** The challenge a ceremony's answer signed (from its clientDataJSON), to find the ceremony by. */
export function challengeOf(response: { clientDataJSON: string }): string | undefined {
  try {
    const data = JSON.parse(Buffer.from(response.clientDataJSON, "base64url").toString("utf8"));
    return typeof data?.challenge === "string" && data.challenge.length <= 200 ? data.challenge : undefined;
  } catch {
    return undefined;
  }
}

/** The signature counter an assertion's authenticator data carries (bytes 33-36, big-endian). */
function signCountOf(response: AuthenticationResponseJSON): number | undefined {
  const data = Buffer.from(response.response.authenticatorData, "base64url");
  return data.length >= 37 ? data.readUInt32BE(33) : undefined;
}

export interface CheckedAssertion {
  passkeyId: string;
  userId: number;
  email: string;
  active: boolean;
  emailVerified: boolean;
  tokenVersion: number;
  newCounter: number;
}

/**
 * An assertion checked against the credential it names (`found`: its passkey and owner, read by
 * the caller with what else it reads): signed for `challenge` at one of the relying party's origins, by a credential of `userId` when given (a second factor), with user
 * verification when `requireUserVerification` (passwordless). Undefined when refused; a counter
 * going backwards is audited PASSKEY_COUNTER_REGRESSION first.
 */
export async function checkAssertion(
  deps: { db: Database; now: () => number },
  rp: RelyingParty,
  response: AuthenticationResponseJSON,
  challenge: string,
  found: CredentialHolder | undefined,
  options: { userId?: number; requireUserVerification: boolean },
): Promise<CheckedAssertion | undefined> {
  if (!found || (options.userId !== undefined && found.passkey.userId !== options.userId)) return undefined;
  const { passkey } = found;
  const handle = response.response.userHandle;
  if (handle && Buffer.from(handle, "base64url").toString("utf8") !== String(passkey.userId)) return undefined;
  const counter = signCountOf(response);
  if (counter !== undefined && (counter > 0 || passkey.counter > 0) && counter <= passkey.counter) {
    const details = { passkeyId: passkey.id, storedCounter: passkey.counter, presentedCounter: counter };
    const audit = { action: "PASSKEY_COUNTER_REGRESSION", actor: found.email, subjectType: "User", subjectId: passkey.userId, details };
    await deps.db.write((tx) => writeAudit(tx, audit, new Date(deps.now())));
    return undefined;
  }
  try {
    const { verifyAuthenticationResponse } = await loadWebAuthn();
    const { verified, authenticationInfo } = await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.id,
      credential: { id: passkey.credentialId, publicKey: Buffer.from(passkey.publicKey, "base64url"), counter: passkey.counter },
      requireUserVerification: options.requireUserVerification,
    });
    if (!verified) return undefined;
    const { email, active, emailVerified, tokenVersion } = found;
    return { passkeyId: passkey.id, userId: passkey.userId, email, active, emailVerified, tokenVersion, newCounter: authenticationInfo.newCounter };
  } catch {
    // A malformed answer, a wrong origin, RP or signature, or no user verification where required.
    return undefined;
  }
}
