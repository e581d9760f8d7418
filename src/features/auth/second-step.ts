/**
 * Sign-in beyond the password: the second step (a TOTP code, a recovery code or a passkey after a
 * right password, against a single-use mfaToken) and passwordless sign-in with a passkey.
 *
 * An mfaToken lives 5 minutes, is used up by the step that completes it and burnt by its 5th
 * wrong code (TOTP or recovery code alike); every wrong code also counts in the login throttle (a
 * right password does not clear it until the second step is done) and is audited MFA_FAILED.
 * mfaTokens and passwordless sign-in's challenges are sealed (security/webauthn.ts): the first step
 * writes nothing. An mfaToken carries its user, the token version it was issued under (a password
 * change, a factor removed or a deactivation since voids it), the amr so far, 32 random bytes, its
 * id (and its passkeyOptions' challenge), and the deviceToken the password step presented when it
 * was good: then the second step, too, counts only that device's failures and is refused by none of
 * the e-mail's or the network's (security/password-check.ts). Its id is recorded as used by the
 * sign-in's own unit, and a wrong code is counted by it. Registration's WebAuthn challenges live in
 * the database (store/mfa.ts), so any instance on one primary finishes what another began.
 */
import { randomBytes } from "node:crypto";
import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { Db, Reader, UnitAnswers } from "../../db/database";
import { foundOrAgain } from "../../db/miss";
import { AppError } from "../../errors";
import { assertLoginAllowed, attemptTurn, countFailure } from "../../security/password-check";
import { completeSignIn } from "../../security/sign-in-completion";
import { acceptedStep, isRecoveryCode, recoveryCodeHash, type SecretCipher } from "../../security/totp";
import {
  checkAssertion,
  challengeOf,
  type RelyingPartyConfig,
  relyingParty,
  relyingPartyOf,
  openSealed,
  requestOptions,
  sealedChallengeExpiry,
  sealedFor,
} from "../../security/webauthn";
import type { AuditRecord } from "../../store/audit";
import {
  type ChallengePurpose,
  challengeFailureStatement,
  challengeRows,
  liveChallengeRows,
  mfaTokenHolder,
  passkeyByCredentialRows,
  passkeyUsedStatement,
  totpRows,
  totpStepStatement,
  unusedRecoveryCodeRows,
  useRecoveryCodeStatement,
} from "../../store/mfa";
import { enqueueNotification } from "../../store/outbox";
import type { PasskeyAssertion } from "../../models/webauthn";
import type { LoginMfaBody, MfaRequired, PasskeyRequestOptions, PasskeySignInBody, TokenResponse } from "./model";
import { newSession, runSignedIn, type SessionDeps, type SignedInAccount, type SignInClient, signedInRows, tokenAnswer } from "./session-answer";

export interface SecondStepDeps extends SessionDeps {
  cipher: SecretCipher;
  config: SessionDeps["config"] & RelyingPartyConfig;
}

/** What the first step needs to hand out the second's challenge. */
export type ChallengeDeps = Pick<SessionDeps, "now"> & { cipher: SecretCipher; config: RelyingPartyConfig };

const MFA_TOKEN_TTL_MS = 5 * 60_000;
const CHALLENGE_TTL_MS = 5 * 60_000;
const USED_CHALLENGE_MARGIN_MS = 60_000;
const MFA_MAX_FAILURES = 5;

const MFA_TOKEN = "mfa-token";

const invalidCode = () => new AppError("INVALID_MFA_CODE");
const invalidPasskey = () => new AppError("INVALID_PASSKEY");
const asAssertion = (passkey: PasskeyAssertion) => ({ clientExtensionResults: {}, ...passkey }) as AuthenticationResponseJSON;

/**
 * What a sealed mfaToken carries (its facts, in this order); `passkey`: its answer offered
 * passkeyOptions, whose challenge is its id; `deviceToken`: the account's, presented with the
 * password and good then (a random token of ours: base64url, no ".").
 */
interface MfaTokenFacts {
  id: string;
  userId: number;
  tokenVersion: number;
  amr: string;
  passkey: boolean;
  deviceToken?: string;
  expiresAt: number;
}

/** The facts of a live mfaToken sealed by this service, or undefined (altered, sealed for another purpose, expired, or an earlier release's random token). */
function openMfaToken(deps: SecondStepDeps, mfaToken: string, now: number): MfaTokenFacts | undefined {
  const opened = openSealed(deps.cipher, mfaToken, MFA_TOKEN, now);
  const [id, userId, tokenVersion, amr, passkey, device] = opened?.facts ?? [];
  if (!opened || !id || !amr || !Number.isSafeInteger(Number(userId)) || !Number.isSafeInteger(Number(tokenVersion))) return undefined;
  const deviceToken = device && device !== "-" ? device : undefined;
  return { id, userId: Number(userId), tokenVersion: Number(tokenVersion), amr, passkey: passkey === "p", deviceToken, expiresAt: opened.expiresAt };
}

/**
 * The second step's challenge for an account whose password was right: a fresh mfaToken (sealed,
 * nothing written), the methods it may be completed with and, with a passkey (and passkeys
 * configured), the request options whose challenge is the token's id. `factors`: 1 an active
 * TOTP, +2 a passkey; `firstStep`: how the first step signed in (pwd, or fed for another provider);
 * `deviceToken`: the account's, when the password step presented a good one.
 */
export async function secondStepChallenge(
  deps: ChallengeDeps,
  account: { id: number; tokenVersion: number },
  factors: number,
  { firstStep = "pwd", deviceToken }: { firstStep?: string; deviceToken?: string } = {},
): Promise<MfaRequired> {
  const random = new Uint8Array(randomBytes(32));
  const id = Buffer.from(random).toString("base64url");
  const rp = factors & 2 ? relyingPartyOf(deps.config) : undefined;
  const passkeyOptions = rp && (await requestOptions(rp, "preferred", random));
  const facts = [id, String(account.id), String(account.tokenVersion), firstStep, passkeyOptions ? "p" : "-", deviceToken ?? "-"];
  const mfaToken = sealedFor(deps.cipher, MFA_TOKEN, deps.now() + MFA_TOKEN_TTL_MS, facts);
  const methods: MfaRequired["methods"] = [...(factors & 1 ? (["totp"] as const) : []), "recovery_code", ...(passkeyOptions ? (["passkey"] as const) : [])];
  return { mfaRequired: true, mfaToken, methods, expiresIn: MFA_TOKEN_TTL_MS / 1000, ...(passkeyOptions && { passkeyOptions: passkeyOptions as PasskeyRequestOptions }) };
}

/** What the second step proved, and the write that uses it up (refusing a replay that raced it). */
interface Proof {
  amr: string;
  use(tx: Db, now: Date): Promise<boolean>;
}

/** How the body would prove the second factor: a passkey assertion, a recovery code (its hash; none when it cannot be one) or a TOTP code. */
function offeredFactor(body: LoginMfaBody) {
  if (body.passkey) return { kind: "passkey", assertion: body.passkey } as const;
  const code = body.code ?? "";
  return isRecoveryCode(code) ? ({ kind: "recovery", hash: recoveryCodeHash(code) } as const) : ({ kind: "totp", code: code.trim() } as const);
}
type OfferedFactor = ReturnType<typeof offeredFactor>;

/** What the proof is checked against, read with the throttle: the assertion's passkey, the recovery code unused, or the TOTP authenticator. */
const factorRows = (offered: OfferedFactor, userId: number) => (db: Reader) => ({
  passkey: offered.kind === "passkey" ? passkeyByCredentialRows(db, offered.assertion.id) : undefined,
  recovery: offered.kind === "recovery" && offered.hash ? unusedRecoveryCodeRows(db, userId, offered.hash) : undefined,
  totp: offered.kind === "totp" ? totpRows(db, userId) : undefined,
});
type FactorRows = UnitAnswers<ReturnType<ReturnType<typeof factorRows>>>;

/** The proof a code or an assertion gives for the account, checked against what factorRows read; undefined when it is wrong. */
async function proofOf(
  deps: SecondStepDeps,
  userId: number,
  email: string,
  offered: OfferedFactor,
  challenge: string | null,
  factor: FactorRows,
  now: Date,
): Promise<Proof | undefined> {
  if (offered.kind === "passkey") {
    if (!challenge) return undefined;
    const checked = await checkAssertion(deps, relyingParty(deps.config), asAssertion(offered.assertion), challenge, factor.passkey?.[0], {
      userId,
      requireUserVerification: false,
    });
    return checked && { amr: "hwk", use: async (tx, at) => (await passkeyUsedStatement(tx, checked.passkeyId, checked.newCounter, at)).length > 0 };
  }
  if (offered.kind === "recovery") {
    const { hash } = offered;
    if (!hash || !factor.recovery?.[0]) return undefined;
    return {
      amr: "rec",
      async use(tx, at) {
        if ((await useRecoveryCodeStatement(tx, userId, hash, at)).length === 0) return false;
        await enqueueNotification(tx, "RECOVERY_CODE_USED", email, { userId }, at);
        return true;
      },
    };
  }
  const totp = factor.totp?.[0];
  if (!totp?.confirmedAt) return undefined;
  const step = await acceptedStep(deps.cipher.open(totp.secretSealed).toString("utf8"), offered.code, now.getTime(), totp.lastStep);
  return step === undefined ? undefined : { amr: "otp", use: async (tx, at) => (await totpStepStatement(tx, userId, step, at)).length > 0 };
}

/**
 * `POST /api/auth/login/mfa`: the mfaToken completed by a TOTP code, a recovery code (used up,
 * and mailed RECOVERY_CODE_USED) or a passkey assertion of the account's: the login answer, amr
 * pwd plus otp, rec or hwk. Wrong, used, expired or burnt: 401 INVALID_MFA_CODE; a wrong one, of
 * whichever kind, is counted on the token (5 burn it) and in the login throttle the token carries
 * (its deviceToken's, else the e-mail's: 429 once it is full), and audited MFA_FAILED.
 */
export async function completeSecondStep(deps: SecondStepDeps, body: LoginMfaBody, client: SignInClient): Promise<TokenResponse> {
  const now = new Date(deps.now());
  const token = openMfaToken(deps, body.mfaToken, now.getTime());
  const held = token && (await mfaTokenHolder(deps.db, token.userId, token.id));
  if (!token || !held || held.used) throw invalidCode();
  const { email } = held;
  const { userId } = token;
  const offered = offeredFactor(body);
  // In the e-mail's turn, as a login: parallel guesses see each other's failures.
  using _turn = await attemptTurn(email);
  const attempt = { address: client.address, deviceToken: token.deviceToken };
  const { alongside: factor, ...toClear } = await assertLoginAllowed(deps, { id: userId, email }, attempt, factorRows(offered, userId));
  /** A wrong code: counted on the token (burnt at the limit), then where the attempt's failures count, audited. */
  const wrongCode = async () => {
    await deps.db.write(async (tx) => {
      const [counted] = await challengeFailureStatement(tx, `${token.id}.failures`, new Date(token.expiresAt + USED_CHALLENGE_MARGIN_MS));
      if (counted.failures >= MFA_MAX_FAILURES) await recordedUsed(tx, "mfa-used", token.id, token.expiresAt, now);
    });
    const failure: AuditRecord = { action: "MFA_FAILED", actor: email, subjectType: "User", subjectId: userId, details: { address: client.address } };
    await countFailure(deps, toClear, failure, userId);
    return invalidCode();
  };
  const proof = await proofOf(deps, userId, email, offered, token.passkey ? token.id : null, factor, now);
  if (!proof) throw await wrongCode();
  if (!held.active) throw new AppError("ACCOUNT_DISABLED");
  // Issued before a password change, a factor's removal or a deactivation: void.
  if (held.tokenVersion !== token.tokenVersion) throw invalidCode();
  const account: SignedInAccount = { id: userId, email, tokenVersion: held.tokenVersion };
  const session = newSession(deps, now, [...token.amr.split(","), proof.amr]);
  // An account with a second factor has signed in before: its device is judged as any other's.
  const completed = completeSignIn({ userId, email, firstSignIn: false, ...client, deviceToken: toClear.device?.token }, now);
  const user = await deps.db.write(async (tx) => {
    // The proof first: one spent since it was read (a replay on another instance won the race)
    // wrote nothing, and the unit ends empty so that its failure is counted like any wrong code's.
    if (!(await proof.use(tx, now))) return undefined;
    // The token and the proof are used up together, or neither (a replay racing this one loses).
    if (!(await recordedUsed(tx, "mfa-used", token.id, token.expiresAt, now))) throw invalidCode();
    return runSignedIn(signedInRows(tx, deps, account, client, session, { toClear, completed }));
  });
  if (!user) throw await wrongCode();
  return { ...(await tokenAnswer(deps, account, user, session)), deviceToken: completed.deviceToken };
}

/**
 * `POST /api/auth/passkey/options`: request options for a passwordless sign-in, their challenge
 * sealed for 5 minutes (security/webauthn.ts): nothing is written until it is answered.
 */
export async function passkeySignInOptions(deps: SecondStepDeps): Promise<PasskeyRequestOptions> {
  const rp = relyingParty(deps.config);
  const challenge = sealedFor(deps.cipher, "passkey", deps.now() + CHALLENGE_TTL_MS);
  return (await requestOptions(rp, "required", challenge)) as PasskeyRequestOptions;
}

/** Records a sealed challenge or mfaToken id as used (kept a minute past its expiry, for instances whose clocks lag); false when it already was. */
async function recordedUsed(tx: Db, purpose: ChallengePurpose, key: string, expiresAt: number, now: Date) {
  const [swept, recorded] = challengeRows(tx, { key, purpose, expiresAt: new Date(expiresAt + USED_CHALLENGE_MARGIN_MS) }, now);
  await swept;
  return (await recorded).length > 0;
}

/**
 * `POST /api/auth/passkey`: a passwordless sign-in with a discoverable credential, user
 * verification required; the login answer, amr hwk. The challenge must be one of this ceremony's,
 * live, and not answered before; it is used up either way, by the sign-in's own unit when it passes.
 */
export async function passkeySignIn(deps: SecondStepDeps, body: PasskeySignInBody, client: SignInClient): Promise<TokenResponse> {
  const rp = relyingParty(deps.config);
  const now = new Date(deps.now());
  const challenge = challengeOf(body.response.response);
  const expiresAt = challenge && sealedChallengeExpiry(deps.cipher, challenge, "passkey", now.getTime());
  if (!challenge || !expiresAt) throw invalidPasskey();
  // Whether it was answered before (a replay is refused as such, not as a clone's counter) and the credential: one read unit.
  // A passkey registered at another edge a moment ago: read again at the primary (db/miss.ts).
  const [[used], [found]] = await foundOrAgain(
    deps.db,
    (source) => source.readAll((db) => [liveChallengeRows(db, "passkey-used", challenge, now), passkeyByCredentialRows(db, body.response.id)]),
    ([, rows]) => rows.length === 0,
  );
  if (used) throw invalidPasskey();
  const checked = await checkAssertion(deps, rp, asAssertion(body.response), challenge, found, { requireUserVerification: true });
  if (!checked) {
    await deps.db.write((tx) => recordedUsed(tx, "passkey-used", challenge, expiresAt, now));
    throw invalidPasskey();
  }
  const refused = !checked.active ? "ACCOUNT_DISABLED" : deps.config.requireEmailVerification && !checked.emailVerified ? "EMAIL_NOT_VERIFIED" : undefined;
  if (refused) throw new AppError(refused);
  const account: SignedInAccount = { id: checked.userId, email: checked.email, tokenVersion: checked.tokenVersion };
  const session = newSession(deps, now, ["hwk"]);
  const completed = completeSignIn({ userId: checked.userId, email: checked.email, firstSignIn: false, ...client }, now);
  const user = await deps.db.write(async (tx) => {
    if (!(await recordedUsed(tx, "passkey-used", challenge, expiresAt, now))) throw invalidPasskey();
    if ((await passkeyUsedStatement(tx, checked.passkeyId, checked.newCounter, now)).length === 0) throw invalidPasskey();
    return runSignedIn(signedInRows(tx, deps, account, client, session, { completed }));
  });
  return { ...(await tokenAnswer(deps, account, user, session)), deviceToken: completed.deviceToken };
}
