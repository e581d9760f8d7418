/**
 * Second factors (mfa_totp, mfa_recovery_codes, passkeys) and what lives between two requests of
 * a sign-in or a WebAuthn ceremony (mfa_challenges): every statement on them. Secrets arrive
 * sealed (the TOTP secret) or hashed (recovery codes, mfaTokens, challenges); nothing here sees a
 * plain secret but a passkey's public key.
 */
import { and, asc, count, eq, gt, isNotNull, isNull, lt, lte, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { mfaChallenges, mfaRecoveryCodes, mfaTotp, passkeys, users } from "../db/schema";
import { sha256Base64url } from "../digest";

/* ---- TOTP ---- */

const totpRow = prepared((db: Reader) =>
  db
    .select()
    .from(mfaTotp)
    .where(eq(mfaTotp.userId, sql.placeholder("userId")))
    .prepare(),
);
/** The user's TOTP authenticator (at most one row): a (prepared) read for a read unit. */
export const totpRows = (db: Reader, userId: number) => bound(totpRow(db), { userId });
export const totpOf = async (db: Reader, userId: number) => (await totpRows(db, userId))[0];

/** A new pending secret replaces any pending one; an active one stays (the insert does nothing). */
export const pendingTotpStatement = (tx: Db, userId: number, secretSealed: string, now: Date) =>
  tx
    .insert(mfaTotp)
    .values({ userId, secretSealed, createdAt: now })
    .onConflictDoUpdate({ target: mfaTotp.userId, set: { secretSealed, createdAt: now, lastStep: 0 }, setWhere: isNull(mfaTotp.confirmedAt) })
    .returning({ userId: mfaTotp.userId });

const totpStep = prepared((tx: Db, shape) => {
  const confirm = shape === "confirm";
  const now = placeholder<Date>("now");
  const step = sql.placeholder("step");
  return tx
    .update(mfaTotp)
    .set({ lastStep: placeholder<number>("step"), lastUsedAt: now, ...(confirm && { confirmedAt: now }) })
    .where(and(eq(mfaTotp.userId, sql.placeholder("userId")), lt(mfaTotp.lastStep, step), confirm ? isNull(mfaTotp.confirmedAt) : isNotNull(mfaTotp.confirmedAt)))
    .returning({ userId: mfaTotp.userId })
    .prepare();
});
/**
 * A code of `step` accepted: only if no code of that step or a later one was (two requests with
 * one code: one wins). `confirm` also activates a pending secret. Answers a row when it took (prepared: a sign-in's statement).
 */
export const totpStepStatement = (tx: Db, userId: number, step: number, now: Date, confirm = false) => bound(totpStep(tx, confirm ? "confirm" : ""), { userId, step, now });

export const deleteTotpStatement = (tx: Db, userId: number) => tx.delete(mfaTotp).where(eq(mfaTotp.userId, userId)).returning({ userId: mfaTotp.userId });

/* ---- Recovery codes ---- */

/** The user's codes replaced by these hashes. */
export const replaceRecoveryCodesRows = (tx: Db, userId: number, hashes: string[], now: Date) => [
  tx.delete(mfaRecoveryCodes).where(eq(mfaRecoveryCodes.userId, userId)),
  tx.insert(mfaRecoveryCodes).values(hashes.map((codeHash) => ({ userId, codeHash, createdAt: now }))),
];

export const deleteRecoveryCodesStatement = (tx: Db, userId: number) => tx.delete(mfaRecoveryCodes).where(eq(mfaRecoveryCodes.userId, userId));

const unusedRecoveryCode = prepared((db: Reader) =>
  db
    .select({ id: mfaRecoveryCodes.id })
    .from(mfaRecoveryCodes)
    .where(and(eq(mfaRecoveryCodes.userId, sql.placeholder("userId")), eq(mfaRecoveryCodes.codeHash, sql.placeholder("codeHash")), isNull(mfaRecoveryCodes.usedAt)))
    .prepare(),
);
/** The user's unused recovery code of this hash (at most one row): a (prepared) read for the second step's read unit. */
export const unusedRecoveryCodeRows = (db: Reader, userId: number, codeHash: string) => bound(unusedRecoveryCode(db), { userId, codeHash });

/** A recovery code spent, once: answers a row only when it was the user's and unused. */
export const useRecoveryCodeStatement = (tx: Db, userId: number, codeHash: string, now: Date) =>
  tx
    .update(mfaRecoveryCodes)
    .set({ usedAt: now })
    .where(and(eq(mfaRecoveryCodes.userId, userId), eq(mfaRecoveryCodes.codeHash, codeHash), isNull(mfaRecoveryCodes.usedAt)))
    .returning({ id: mfaRecoveryCodes.id });

/* ---- Passkeys ---- */

export type PasskeyRow = typeof passkeys.$inferSelect;

/**
 * A column of the user a passkey belongs to (its user_id), as a scalar subquery rather than a
 * join: Bun 1.4.5 prepares a bun:sqlite statement that joins again each time it is bound (docs/performance.md,
 * "Bun 1.4.5 re-prepares"), and the sign-ins read a row with its owner on every attempt (47 against 11 µs a
 * read in raw bun:sqlite). The owner always exists: user_id references users, deleted in cascade.
 */
const ownerColumn = <C extends SQLiteColumn>(column: C) => sql<C["_"]["data"]>`${sql.raw(`(select ${column.name} from users where users.id = passkeys.user_id)`)}`.mapWith(column);

/** A passkey by its credential id, with its owner's e-mail and state: a passkey sign-in's one read. */
const credentialHolder = prepared((db: Reader) =>
  db
    .select({
      passkey: passkeys,
      email: ownerColumn(users.email),
      active: ownerColumn(users.active),
      emailVerified: ownerColumn(users.emailVerified),
      tokenVersion: ownerColumn(users.tokenVersion),
    })
    .from(passkeys)
    .where(eq(passkeys.credentialId, sql.placeholder("credentialId")))
    .prepare(),
);
/** The passkey of a credential id with its owner's sign-in state (at most one row): a (prepared) read for a read unit. */
export const passkeyByCredentialRows = (db: Reader, credentialId: string) => bound(credentialHolder(db), { credentialId });
export type CredentialHolder = Awaited<ReturnType<typeof passkeyByCredentialRows>>[number];

export const passkeysOf = (db: Reader, userId: number) => db.select().from(passkeys).where(eq(passkeys.userId, userId)).orderBy(asc(passkeys.createdAt), asc(passkeys.id));

export const insertPasskeyStatement = (tx: Db, row: typeof passkeys.$inferInsert) => tx.insert(passkeys).values(row).returning();

/** The counter moved forward (never back: a clone racing the original loses). Answers a row when it took. */
export const passkeyUsedStatement = (tx: Db, id: string, counter: number, now: Date) =>
  tx
    .update(passkeys)
    .set({ counter, lastUsedAt: now })
    .where(and(eq(passkeys.id, id), sql`(${passkeys.counter} < ${counter} or (${passkeys.counter} = 0 and ${counter} = 0))`))
    .returning({ id: passkeys.id });

export const renamePasskeyStatement = (tx: Db, userId: number, id: string, name: string) =>
  tx
    .update(passkeys)
    .set({ name })
    .where(and(eq(passkeys.id, id), eq(passkeys.userId, userId)))
    .returning();

export const deletePasskeyStatement = (tx: Db, userId: number, id: string) =>
  tx
    .delete(passkeys)
    .where(and(eq(passkeys.id, id), eq(passkeys.userId, userId)))
    .returning({ id: passkeys.id });

export const deletePasskeysStatement = (tx: Db, userId: number) => tx.delete(passkeys).where(eq(passkeys.userId, userId));

/** Every second factor of the user gone: TOTP, passkeys, recovery codes and pending sign-ins. */
export const removeFactorsRows = (tx: Db, userId: number) => [
  deleteTotpStatement(tx, userId),
  deletePasskeysStatement(tx, userId),
  deleteRecoveryCodesStatement(tx, userId),
  tx.delete(mfaChallenges).where(eq(mfaChallenges.userId, userId)),
];

/* ---- The summary ---- */

/** How many of each factor the user has: an active TOTP (0/1), passkeys, unused recovery codes. */
export async function factorCounts(db: Reader, userId: number) {
  const [row] = await db
    .select({
      totp: sql<number>`(select count(*) from ${mfaTotp} where ${mfaTotp.userId} = ${userId} and ${mfaTotp.confirmedAt} is not null)`,
      passkeys: sql<number>`(select count(*) from ${passkeys} where ${passkeys.userId} = ${userId})`,
      recoveryCodesLeft: sql<number>`(select count(*) from ${mfaRecoveryCodes} where ${mfaRecoveryCodes.userId} = ${userId} and ${mfaRecoveryCodes.usedAt} is null)`,
    })
    .from(users)
    .where(eq(users.id, userId));
  return row;
}

/**
 * SQL for a login's account read (a select from users alone, where drizzle leaves column names
 * unqualified, so the subqueries name theirs in full): 1 when the user has an active TOTP, +2 with a passkey.
 */
export const secondFactorsOf = () =>
  sql<number>`(exists(select 1 from mfa_totp where mfa_totp.user_id = users.id and mfa_totp.confirmed_at is not null) + 2 * exists(select 1 from passkeys where passkeys.user_id = users.id))`;

/* ---- Between two requests ---- */

/**
 * `passkey-used`: a passwordless sign-in's sealed challenge once answered; `mfa-used`: a sealed
 * mfaToken's id once used or burnt (`mfa-failures` counts its wrong codes); `enrol-code`: a first
 * enrolment's code (below); `step-up-used`: a sealed step-up token once spent (security/step-up.ts). Not `passkey` or `login`, the purposes of the rows of the random
 * challenges and mfaTokens earlier releases kept: an instance of one of them beside this one during
 * an upgrade must not take a used one for a live one.
 */
export type ChallengePurpose = "register" | "passkey-used" | "mfa-used" | "enrol-code" | "step-up-used";
export type ChallengeRow = typeof mfaChallenges.$inferSelect;

/**
 * A new mfaToken or challenge (keyed by its hash), with the expired ones swept in the same unit;
 * or a sealed challenge (security/webauthn.ts) recorded as used, until it has expired: the insert
 * answers a row only to the first answer of that challenge, none to a replay.
 */
export const challengeRows = (tx: Db, row: Omit<typeof mfaChallenges.$inferInsert, "id" | "failures"> & { key: string }, now: Date) => {
  const { key, purpose, userId = null, challenge = null, amr = null, expiresAt } = row;
  return [bound(sweepChallenges(tx), { now: now.getTime() }), bound(insertChallenge(tx), { id: sha256Base64url(key), purpose, userId, challenge, amr, expiresAt })] as const;
};
// Prepared: a used sealed challenge or mfaToken is recorded in its sign-in's unit.
const sweepChallenges = prepared((tx: Db) =>
  tx
    .delete(mfaChallenges)
    .where(lte(mfaChallenges.expiresAt, sql.placeholder("now")))
    .prepare(),
);
const insertChallenge = prepared((tx: Db) =>
  tx
    .insert(mfaChallenges)
    .values({
      id: sql.placeholder("id"),
      purpose: sql.placeholder("purpose"),
      userId: sql.placeholder("userId"),
      challenge: sql.placeholder("challenge"),
      amr: sql.placeholder("amr"),
      expiresAt: placeholder<Date>("expiresAt"),
    })
    .onConflictDoNothing()
    .returning({ id: mfaChallenges.id })
    .prepare(),
);

const liveChallengeRow = prepared((db: Reader) =>
  db
    .select()
    .from(mfaChallenges)
    .where(and(eq(mfaChallenges.id, sql.placeholder("id")), eq(mfaChallenges.purpose, sql.placeholder("purpose")), gt(mfaChallenges.expiresAt, sql.placeholder("now"))))
    .prepare(),
);
// `now` in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
/** An unexpired row of the purpose, by its token or challenge (at most one row): a (prepared) read for a read unit. */
export const liveChallengeRows = (db: Reader, purpose: ChallengePurpose, key: string, now: Date) =>
  bound(liveChallengeRow(db), { id: sha256Base64url(key), purpose, now: now.getTime() });
/** An unexpired row of the purpose, by its token or challenge. */
export const liveChallenge = async (db: Reader, purpose: ChallengePurpose, key: string, now: Date) =>
  (await foundOrAgain(db, (source) => liveChallengeRows(source, purpose, key, now)))[0];

/** The row used up, once: answers it only to the one request that took it. */
export const takeChallengeStatement = (tx: Db, purpose: ChallengePurpose, key: string, now: Date) =>
  tx
    .delete(mfaChallenges)
    .where(and(eq(mfaChallenges.id, sha256Base64url(key)), eq(mfaChallenges.purpose, purpose), gt(mfaChallenges.expiresAt, now)))
    .returning();

/**
 * A wrong code against a sealed mfaToken (features/auth/second-step.ts), counted by its id until it
 * expires: answers the count so far (the caller burns the token at its limit).
 */
export const challengeFailureStatement = (tx: Db, key: string, expiresAt: Date) =>
  tx
    .insert(mfaChallenges)
    .values({ id: sha256Base64url(key), purpose: "mfa-failures", failures: 1, expiresAt })
    .onConflictDoUpdate({ target: mfaChallenges.id, set: { failures: sql`${mfaChallenges.failures} + 1` } })
    .returning({ failures: mfaChallenges.failures });

/* ---- A first enrolment's code (MFA_REQUIRED_ROLES) ---- */

/** How long a first enrolment's code lives (ms). */
export const ENROL_CODE_LIFETIME_MS = 10 * 60_000;

/** The key of the user's one live code: a new code replaces the last, its tries back at 0. */
export const enrolCodeKey = (userId: number) => `enrol-code.${userId}`;
/** What is kept of a code (in the row's challenge column): a SHA-256, never the code. */
export const enrolCodeHash = (userId: number, code: string) => sha256Base64url(`${enrolCodeKey(userId)}.${code}`);

/** The user's new code (its hash), live for ENROL_CODE_LIFETIME_MS, with the expired rows swept in the same unit. */
export const enrolCodeRows = (tx: Db, userId: number, codeHash: string, now: Date) => {
  const row = { challenge: codeHash, failures: 0, expiresAt: new Date(now.getTime() + ENROL_CODE_LIFETIME_MS) };
  return [
    bound(sweepChallenges(tx), { now: now.getTime() }),
    tx
      .insert(mfaChallenges)
      .values({ id: sha256Base64url(enrolCodeKey(userId)), purpose: "enrol-code", userId, ...row })
      .onConflictDoUpdate({ target: mfaChallenges.id, set: row }),
  ] as const;
};

/** A wrong try of the user's code: answers the tries so far (none when no code is live). */
export const enrolCodeFailureStatement = (tx: Db, userId: number) =>
  tx
    .update(mfaChallenges)
    .set({ failures: sql`${mfaChallenges.failures} + 1` })
    .where(and(eq(mfaChallenges.id, sha256Base64url(enrolCodeKey(userId))), eq(mfaChallenges.purpose, "enrol-code")))
    .returning({ failures: mfaChallenges.failures });

/**
 * One more code mailed to the user within the current window (`windowMs`, from the first mail of
 * it; an ended window starts again at 1): answers how many, and when the window ends. The row's
 * `failures` column is that count.
 */
export const enrolCodeMailedStatement = (tx: Db, userId: number, now: Date, windowMs: number) => {
  const ended = sql`${mfaChallenges.expiresAt} <= ${now.getTime()}`;
  return tx
    .insert(mfaChallenges)
    .values({ id: sha256Base64url(`enrol-code-mailed.${userId}`), purpose: "enrol-code-mailed", userId, failures: 1, expiresAt: new Date(now.getTime() + windowMs) })
    .onConflictDoUpdate({
      target: mfaChallenges.id,
      set: {
        failures: sql`case when ${ended} then 1 else ${mfaChallenges.failures} + 1 end`,
        expiresAt: sql`case when ${ended} then excluded.expires_at else ${mfaChallenges.expiresAt} end`,
      },
    })
    .returning({ mailed: mfaChallenges.failures, windowEndsAt: mfaChallenges.expiresAt });
};

/** What an ADMIN sees of a user's factors (never a secret, a hash or a key). */
export async function factorsOf(db: Reader, userId: number) {
  const [totp, keys, [codes]] = await Promise.all([
    totpOf(db, userId),
    passkeysOf(db, userId),
    db
      .select({
        total: count(),
        left: sql<number>`count(*) - count(${mfaRecoveryCodes.usedAt})`,
        createdAt: sql<number | null>`min(${mfaRecoveryCodes.createdAt})`,
        lastUsedAt: sql<number | null>`max(${mfaRecoveryCodes.usedAt})`,
      })
      .from(mfaRecoveryCodes)
      .where(eq(mfaRecoveryCodes.userId, userId)),
  ]);
  return { totp: totp?.confirmedAt ? totp : undefined, passkeys: keys, recoveryCodes: codes };
}

const mfaTokenHolderRow = prepared((db: Reader) =>
  db
    .select({
      email: users.email,
      tokenVersion: users.tokenVersion,
      active: users.active,
      used: sql<number>`exists(select 1 from mfa_challenges where mfa_challenges.id = ${sql.placeholder("used")} and mfa_challenges.purpose = 'mfa-used')`,
    })
    .from(users)
    .where(eq(users.id, sql.placeholder("userId")))
    .prepare(),
);
/** The account a sealed mfaToken names, and whether its id was used up (or burnt): the second step's first read (prepared). */
export const mfaTokenHolder = async (db: Reader, userId: number, tokenId: string) =>
  (await foundOrAgain(db, (source) => bound(mfaTokenHolderRow(source), { userId, used: sha256Base64url(tokenId) })))[0];
