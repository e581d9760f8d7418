/**
 * The OpenID Provider's rows (features/oauth-server): clients, consents, grants, codes and
 * refresh tokens. Secrets, codes and refresh tokens are kept only as SHA-256 digests. A grant is
 * what every code and token names: revoking it (or deleting its client, user or session) ends them.
 */
import { and, asc, eq, isNull, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../db/database";
import { prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { positionsOf } from "../db/reads";
import { oauthClients, oauthCodes, oauthConsents, oauthGrants, oauthRefreshTokens, sessions, users } from "../db/schema";
import type { MaybePromise } from "../maybe-promise";
import { keyRevoked } from "./signing-keys";
import { type AlsoUser, readCaller, withUserById } from "./users";

export interface ClientRow {
  id: number;
  clientId: string;
  name: string;
  secretHash: string | null;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  scopes: string[];
  grantTypes: string[];
  firstParty: boolean;
  dynamic: boolean;
  createdAt: Date;
  /** RS256, ES256 or EdDSA: what its ID tokens are signed with. */
  idTokenSignedResponseAlg: "RS256" | "ES256" | "EdDSA";
}

const list = (csv: string) => (csv === "" ? [] : csv.split(","));

type StoredClient = typeof oauthClients.$inferSelect;
const clientOf = (row: StoredClient): ClientRow => ({
  ...row,
  idTokenSignedResponseAlg: row.idTokenSignedResponseAlg as ClientRow["idTokenSignedResponseAlg"],
  redirectUris: JSON.parse(row.redirectUris),
  postLogoutRedirectUris: JSON.parse(row.postLogoutRedirectUris),
  scopes: list(row.scopes),
  grantTypes: list(row.grantTypes),
});

export type NewClient = Omit<ClientRow, "id">;

export async function insertClient(db: Database, client: NewClient): Promise<ClientRow> {
  const [row] = await db.writeAll((tx) => [
    tx
      .insert(oauthClients)
      .values({
        ...client,
        redirectUris: JSON.stringify(client.redirectUris),
        postLogoutRedirectUris: JSON.stringify(client.postLogoutRedirectUris),
        scopes: client.scopes.join(","),
        grantTypes: client.grantTypes.join(","),
      })
      .returning(),
  ]);
  return clientOf(row[0]);
}

export const allClients = async (db: Reader) => (await db.select().from(oauthClients).orderBy(asc(oauthClients.id))).map(clientOf);

export async function clientByClientId(db: Reader, clientId: string): Promise<ClientRow | undefined> {
  const [row] = await foundOrAgain(db, (source) => source.select().from(oauthClients).where(eq(oauthClients.clientId, clientId)));
  return row && clientOf(row);
}

/** Deletes the client (its consents, grants, codes and tokens go with it); whether there was one. */
export async function deleteClient(db: Database, clientId: string): Promise<boolean> {
  const [gone] = await db.writeAll((tx) => [tx.delete(oauthClients).where(eq(oauthClients.clientId, clientId)).returning({ id: oauthClients.id })]);
  return gone.length > 0;
}

// ── Consents ──

export async function consentOf(db: Reader, userId: number, clientPk: number): Promise<string[] | undefined> {
  const [row] = await db
    .select({ scopes: oauthConsents.scopes })
    .from(oauthConsents)
    .where(and(eq(oauthConsents.userId, userId), eq(oauthConsents.clientId, clientPk)));
  return row && list(row.scopes);
}

export const saveConsentStatement = (tx: Db, userId: number, clientPk: number, scopes: string[], at: Date) =>
  tx
    .insert(oauthConsents)
    .values({ userId, clientId: clientPk, scopes: scopes.join(","), createdAt: at })
    .onConflictDoUpdate({ target: [oauthConsents.userId, oauthConsents.clientId], set: { scopes: scopes.join(","), createdAt: at } });

/** The apps a user consented to ("Apps with access"), oldest first. */
export const consentsOfUser = (db: Reader, userId: number) =>
  db
    .select({ clientId: oauthClients.clientId, name: oauthClients.name, scopes: oauthConsents.scopes, createdAt: oauthConsents.createdAt })
    .from(oauthConsents)
    .innerJoin(oauthClients, eq(oauthClients.id, oauthConsents.clientId))
    .where(eq(oauthConsents.userId, userId))
    .orderBy(asc(oauthConsents.createdAt));

/** Withdraws the user's consent to the client and ends every grant it made; whether there was one. */
export async function withdrawConsent(db: Database, userId: number, clientId: string, at: Date): Promise<boolean> {
  const client = await clientByClientId(db, clientId);
  if (!client) return false;
  const [gone] = await db.writeAll((tx) => [
    tx
      .delete(oauthConsents)
      .where(and(eq(oauthConsents.userId, userId), eq(oauthConsents.clientId, client.id)))
      .returning({ userId: oauthConsents.userId }),
    tx
      .update(oauthGrants)
      .set({ revokedAt: at })
      .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, client.id), isNull(oauthGrants.revokedAt))),
  ]);
  return gone.length > 0;
}

// ── Grants, codes and refresh tokens ──

export type NewGrant = typeof oauthGrants.$inferInsert;

export const insertGrantStatement = (tx: Db, grant: NewGrant) => tx.insert(oauthGrants).values(grant);
export const insertCodeStatement = (tx: Db, code: typeof oauthCodes.$inferInsert) => tx.insert(oauthCodes).values(code);
export const insertRefreshStatement = (tx: Db, grantId: string, tokenHash: string, at: Date) => tx.insert(oauthRefreshTokens).values({ grantId, tokenHash, createdAt: at });
export const revokeGrantStatement = (tx: Db, grantId: string, at: Date) =>
  tx
    .update(oauthGrants)
    .set({ revokedAt: at })
    .where(and(eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));

/**
 * What the guard reads of a client token's grant on every request: whether it is revoked, its
 * user's state and token version, and (bound to a sign-in) its session's, in one read. No join of
 * the client: the token's signed claims name it, and deleting the client deletes its grants.
 * Instants are epoch milliseconds, as the sessions' guard read keeps them (no Date per request).
 */
export interface GrantHolder {
  userId: number | null;
  grantVersion: number | null;
  revokedAt: number | null;
  sessionId: string | null;
  email: string | null;
  active: boolean | null;
  userVersion: number | null;
  roles: string | null;
  sessionEndedAt: number | null;
  sessionExpiresAt: number | null;
  sessionLastSeenAt: number | null;
  sessionVersion: number | null;
  keyRevoked: boolean;
}

/** A grant as the token endpoint judges it: the guard's holder, and what the grant issues from. */
export interface GrantState extends GrantHolder {
  id: string;
  clientPk: number;
  clientId: string;
  scopes: string[];
  authTime: Date | null;
  amr: string | null;
}

const roleNames = sql<string | null>`(select group_concat(r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = ${users.id})`;

const holderColumns = {
  userId: oauthGrants.userId,
  grantVersion: oauthGrants.tokenVersion,
  revokedAt: oauthGrants.revokedAt,
  sessionId: oauthGrants.sessionId,
  email: users.email,
  active: users.active,
  userVersion: users.tokenVersion,
  roles: roleNames,
  sessionEndedAt: sessions.endedAt,
  sessionExpiresAt: sessions.expiresAt,
  sessionLastSeenAt: sessions.lastSeenAt,
  sessionVersion: sessions.tokenVersion,
  /** Whether the access token's signing key (a placeholder, "" for none) was withdrawn (`usersvc keys rotate --revoke`). */
  keyRevoked: keyRevoked(sql.placeholder("kid")),
};
const grantColumns = {
  ...holderColumns,
  id: oauthGrants.id,
  clientPk: oauthGrants.clientId,
  clientId: oauthClients.clientId,
  scopes: oauthGrants.scopes,
  authTime: oauthGrants.authTime,
  amr: oauthGrants.amr,
};

/**
 * The grant and its user and session, one prepared statement (building the SQL each time cost
 * more than running it). The id is bound as `+?`, as sessions.ts binds a sid: Bun 1.4.5 prepares a
 * bound join again on every run.
 */
const grantRead = (db: Reader, columns: Record<string, unknown>, withClient: boolean) => {
  const grants = db.select(columns as typeof grantColumns).from(oauthGrants);
  return (withClient ? grants.innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId)) : grants)
    .leftJoin(users, eq(users.id, oauthGrants.userId))
    .leftJoin(sessions, eq(sessions.id, oauthGrants.sessionId))
    .where(eq(oauthGrants.id, sql`+${sql.placeholder("id")}`));
};
const grantWithClient = prepared((db: Reader) => grantRead(db, grantColumns, true).prepare());
const grantHolder = prepared((db: Reader) => grantRead(db, holderColumns, false).prepare());
/** The holder, and the user of GET /api/users/{id} in the same statement, as a session's read carries it (users.ts withUserById). */
const grantHolderWithUser = prepared((db: Reader) => withUserById(db, (columns) => grantRead(db, columns, false), Object.values(holderColumns)).prepare());

const holderAt = positionsOf(holderColumns);
const grantAt = positionsOf(grantColumns);
/** A row of holderColumns as raw values (flags as 0/1), its first columns the same in a row of grantColumns. */
const holderOf = (v: ArrayLike<unknown>): GrantHolder => ({
  userId: v[holderAt.userId] as number | null,
  grantVersion: v[holderAt.grantVersion] as number | null,
  revokedAt: v[holderAt.revokedAt] as number | null,
  sessionId: v[holderAt.sessionId] as string | null,
  email: v[holderAt.email] as string | null,
  active: v[holderAt.active] === null ? null : Boolean(v[holderAt.active]),
  userVersion: v[holderAt.userVersion] as number | null,
  roles: v[holderAt.roles] as string | null,
  sessionEndedAt: v[holderAt.sessionEndedAt] as number | null,
  sessionExpiresAt: v[holderAt.sessionExpiresAt] as number | null,
  sessionLastSeenAt: v[holderAt.sessionLastSeenAt] as number | null,
  sessionVersion: v[holderAt.sessionVersion] as number | null,
  keyRevoked: Boolean(v[holderAt.keyRevoked]),
});
const grantOf = (v: ArrayLike<unknown>): GrantState => ({
  ...holderOf(v),
  id: v[grantAt.id] as string,
  clientPk: v[grantAt.clientPk] as number,
  clientId: v[grantAt.clientId] as string,
  scopes: list(v[grantAt.scopes] as string),
  authTime: v[grantAt.authTime] === null ? null : new Date(v[grantAt.authTime] as number),
  amr: v[grantAt.amr] as string | null,
});

/** The grant with its client, user and session (the token endpoint, revocation, introspection), and whether the key `kid` of the token that names it was withdrawn. */
export async function grantState(db: Reader, grantId: string, kid = ""): Promise<GrantState | undefined> {
  const [row] = (await grantWithClient(db).values({ id: grantId, kid })) as ArrayLike<unknown>[];
  return row && grantOf(row);
}

/**
 * The guard's read of a client token's grant, as raw values (as the guard's other reads are), and
 * whether the key `kid` of the token was withdrawn; with `also`, that user in the same statement.
 */
export function grantHolderOf(db: Reader, grantId: string, kid: string, also?: AlsoUser): MaybePromise<GrantHolder | undefined> {
  return readCaller(
    () => grantHolder(db).values({ id: grantId, kid }),
    () => grantHolderWithUser(db).values({ id: grantId, kid, userId: also?.id }),
    also,
    holderOf,
  );
}

/** grantState for the provider's own routes: read again at an edge's primary when its copy does not know the grant yet (db/miss.ts); the guard re-reads by itself. */
export const grantFound = (db: Reader, grantId: string, kid = "") => foundOrAgain(db, (source) => grantState(source, grantId, kid));

/** Takes the code (once): its row, and whether it had been taken before (a replay). */
export async function takeCode(db: Database, codeHash: string, at: Date) {
  return db.write(async (tx) => {
    const [code] = await tx.select().from(oauthCodes).where(eq(oauthCodes.codeHash, codeHash));
    if (!code) return undefined;
    if (code.usedAt === null) await tx.update(oauthCodes).set({ usedAt: at }).where(eq(oauthCodes.codeHash, codeHash));
    return { ...code, replayed: code.usedAt !== null };
  });
}

export const refreshTokenRow = async (db: Reader, tokenHash: string) =>
  (await foundOrAgain(db, (source) => source.select().from(oauthRefreshTokens).where(eq(oauthRefreshTokens.tokenHash, tokenHash))))[0];

/** Marks a refresh token rotated (or its grace used), only if it still is as read: false when a concurrent request got there first. */
export async function rotateRefresh(db: Database, tokenHash: string, grantId: string, next: string, at: Date, grace: boolean): Promise<boolean> {
  return db.write(async (tx) => {
    const condition = grace
      ? and(eq(oauthRefreshTokens.tokenHash, tokenHash), eq(oauthRefreshTokens.graceUsed, false))
      : and(eq(oauthRefreshTokens.tokenHash, tokenHash), isNull(oauthRefreshTokens.rotatedAt));
    const changed = await tx
      .update(oauthRefreshTokens)
      .set(grace ? { graceUsed: true } : { rotatedAt: at })
      .where(condition)
      .returning({ tokenHash: oauthRefreshTokens.tokenHash });
    if (changed.length === 0) return false;
    await insertRefreshStatement(tx, grantId, next, at);
    return true;
  });
}

/** Ends a session the provider's cookie names (end-session), as logout does. */
export const endSessionById = (tx: Db, sessionId: string, at: Date) =>
  tx
    .update(sessions)
    .set({ endedAt: at })
    .where(and(eq(sessions.id, sessionId), isNull(sessions.endedAt)));

/** The session a provider cookie names, with its user: what authorize needs to skip the sign-in page. */
export async function browserSession(db: Reader, sessionId: string) {
  const [row] = await db
    .select({
      userId: sessions.userId,
      createdAt: sessions.createdAt,
      amr: sessions.amr,
      endedAt: sessions.endedAt,
      expiresAt: sessions.expiresAt,
      lastSeenAt: sessions.lastSeenAt,
      sessionVersion: sessions.tokenVersion,
      tokenVersion: users.tokenVersion,
      active: users.active,
    })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(eq(sessions.id, sessionId));
  return row;
}

/** The claims userinfo and ID tokens give of a user. */
export async function userClaims(db: Reader, userId: number) {
  const [row] = await db.select({ name: users.name, email: users.email, emailVerified: users.emailVerified }).from(users).where(eq(users.id, userId));
  return row;
}
