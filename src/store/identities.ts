/**
 * Identities at other providers (identities) and federated sign-ins between their requests
 * (federation_flows): every statement on them, and the account a sign-in through an identity
 * lands in, read with what the sign-in checks of it (read again at an edge's primary on a miss:
 * db/miss.ts).
 */
import { and, asc, eq, lte, sql } from "drizzle-orm";
import type { Db, Reader } from "../db/database";
import { foundOrAgain } from "../db/miss";
import { apiKeys, deviceTokens, federationFlows, identities, mfaRecoveryCodes, mfaTotp, passkeys, users } from "../db/schema";
import { sha256Base64url } from "../digest";
import { secondFactorsOf } from "./mfa";

export type IdentityRow = typeof identities.$inferSelect;

/** What a federated sign-in checks of an account, whether found by identity or by e-mail. */
const accountColumns = {
  id: users.id,
  email: users.email,
  active: users.active,
  tokenVersion: users.tokenVersion,
  emailVerified: users.emailVerified,
  emailChangedAt: users.emailChangedAt,
  lastLogin: users.lastLogin,
  hasPassword: sql<boolean>`${users.passwordHash} is not null`.mapWith(Boolean),
  secondFactors: secondFactorsOf(),
  // Named in full, as secondFactorsOf does: drizzle leaves a lone table's columns unqualified, and a bare "id" in the subquery would be roles'.
  admin: sql<boolean>`exists(select 1 from user_roles join roles on roles.id = user_roles.role_id where user_roles.user_id = users.id and roles.name = 'ADMIN')`.mapWith(Boolean),
};
export interface FederatedAccount {
  id: number;
  email: string;
  active: boolean;
  tokenVersion: number;
  emailVerified: boolean;
  emailChangedAt: Date | null;
  lastLogin: Date | null;
  hasPassword: boolean;
  /** 1 an active TOTP, +2 a passkey. */
  secondFactors: number;
  admin: boolean;
}

/** The account an identity signs in to, with its identity's id; undefined when (issuer, subject) is linked to none. */
export async function accountOfIdentity(db: Reader, issuer: string, subject: string): Promise<(FederatedAccount & { identityId: number }) | undefined> {
  const [row] = await foundOrAgain(db, (source) =>
    source
      .select({ ...accountColumns, identityId: identities.id })
      .from(identities)
      .innerJoin(users, eq(users.id, identities.userId))
      .where(and(eq(identities.issuer, issuer), eq(identities.subject, subject))),
  );
  return row as (FederatedAccount & { identityId: number }) | undefined;
}

/** The account with an e-mail (stored lower-case), as a federated sign-in checks it. */
export async function accountByEmail(db: Reader, email: string): Promise<FederatedAccount | undefined> {
  const [row] = await foundOrAgain(db, (source) => source.select(accountColumns).from(users).where(eq(users.email, email)));
  return row as FederatedAccount | undefined;
}

export async function accountById(db: Reader, id: number): Promise<FederatedAccount | undefined> {
  const [row] = await foundOrAgain(db, (source) => source.select(accountColumns).from(users).where(eq(users.id, id)));
  return row as FederatedAccount | undefined;
}

/** A new link; the unique (issuer, subject) refuses a second owner (the caller maps the conflict). */
export const linkIdentityStatement = (
  tx: Db,
  row: { userId: number; provider: string; issuer: string; subject: string; email: string | null; tokensSealed: string | null },
  now: Date,
) =>
  tx
    .insert(identities)
    .values({ ...row, createdAt: now, lastUsedAt: now })
    .returning({ id: identities.id });

/** Its last use, the address the provider gave then, and its tokens then when they are kept (else none: KEEP_TOKENS off drops earlier ones). */
export const identityUsedStatement = (tx: Db, use: { identityId: number; email: string | null; tokensSealed?: string }, now: Date) =>
  tx
    .update(identities)
    .set({ lastUsedAt: now, email: use.email, tokensSealed: use.tokensSealed ?? null })
    .where(eq(identities.id, use.identityId));

export const identitiesOf = (db: Reader, userId: number) =>
  db.select().from(identities).where(eq(identities.userId, userId)).orderBy(asc(identities.createdAt), asc(identities.id));

export const deleteIdentityStatement = (tx: Db, userId: number, id: number) =>
  tx
    .delete(identities)
    .where(and(eq(identities.userId, userId), eq(identities.id, id)))
    .returning();

/** What else signs the user in besides identity `id`: a password, a passkey, another identity. */
export async function otherSignInMethods(tx: Reader, userId: number, id: number) {
  const [row] = await tx
    .select({
      password: sql<number>`${users.passwordHash} is not null`,
      passkeys: sql<number>`(select count(*) from ${passkeys} where ${passkeys.userId} = ${userId})`,
      identities: sql<number>`(select count(*) from ${identities} where ${identities.userId} = ${userId} and ${identities.id} <> ${id})`,
    })
    .from(users)
    .where(eq(users.id, userId));
  return row ? Number(row.password) + Number(row.passkeys) + Number(row.identities) : 0;
}

/**
 * The first proof of an account's address (verification or a reset) of an account that never had
 * one: every identity, API key, passkey, TOTP (with its recovery codes) and deviceToken added
 * before it goes, so whoever made the account with someone else's address keeps no way in.
 * An address proven before, or changed since (by its signed-in owner), keeps them. Statements
 * for the proof's own unit, before the address is marked verified.
 */
export function beforeFirstProofRows(tx: Db, userId: number) {
  const neverProven = sql`exists(select 1 from ${users} where ${users.id} = ${userId} and ${users.emailVerified} = 0 and ${users.emailChangedAt} is null)`;
  return [identities, apiKeys, passkeys, mfaTotp, mfaRecoveryCodes, deviceTokens].map((table) => tx.delete(table).where(and(eq(table.userId, userId), neverProven)));
}

/* ---- Flows between requests ---- */

export type FlowKind = "state" | "code";
const flowId = (kind: FlowKind, key: string) => sha256Base64url(`${kind}:${key}`);

/** A flow step kept until `expiresAt` under its state or code (only a SHA-256 of it); expired ones are swept by the same unit. */
export const keepFlowRows = (tx: Db, kind: FlowKind, key: string, provider: string, data: unknown, expiresAt: Date, now: Date) => [
  tx.delete(federationFlows).where(lte(federationFlows.expiresAt, now)),
  tx.insert(federationFlows).values({ id: flowId(kind, key), kind, provider, data, expiresAt }),
];

/** Takes a live flow step (deleted: single use); undefined when unknown, used or expired. */
export async function takeFlow(tx: Db, kind: FlowKind, key: string, now: Date): Promise<{ provider: string; data: unknown } | undefined> {
  const [row] = await tx
    .delete(federationFlows)
    .where(eq(federationFlows.id, flowId(kind, key)))
    .returning({ provider: federationFlows.provider, data: federationFlows.data, expiresAt: federationFlows.expiresAt });
  return row && row.expiresAt > now ? row : undefined;
}
