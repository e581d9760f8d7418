/**
 * API keys (api_keys): every statement on them. A key's secret never reaches this table, only
 * its SHA-256 (security/api-keys.ts makes and checks both); the guard reads a key with its owner
 * in one statement, as it reads a session.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import type { Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { positionsOf } from "../db/reads";
import { apiKeys, auditLog, outbox, users } from "../db/schema";
import { auditSelection } from "./audit";
import { notificationSelection, traced } from "./outbox";
import { type AlsoUser, readCaller, withUserById } from "./users";
import type { MaybePromise } from "../maybe-promise";

const roleNames = sql<string | null>`(select group_concat(r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = ${users.id})`;

/**
 * The key a bearer's prefix names, with its owner: the guard's one read for an API key. The prefix
 * is bound as `+?`, as sessions.ts binds a sid (bySid): Bun 1.4.5 prepares a bound join again on
 * every run; the unique index on the prefix still finds the key.
 */
const byPrefix = eq(apiKeys.prefix, sql`+${sql.placeholder("prefix")}`);
const keyColumns = {
  id: apiKeys.id,
  secretHash: apiKeys.secretHash,
  scopes: apiKeys.scopes,
  expiresAt: apiKeys.expiresAt,
  lastUsedAt: apiKeys.lastUsedAt,
  userId: users.id,
  email: users.email,
  active: users.active,
  tokenVersion: users.tokenVersion,
  roles: roleNames,
};
const keyAndOwner = prepared((db: Reader) => db.select(keyColumns).from(apiKeys).innerJoin(users, eq(users.id, apiKeys.userId)).where(byPrefix).prepare());
const keyAndOwnerWithUser = prepared((db: Reader) =>
  withUserById(db, (columns) => db.select(columns).from(apiKeys).innerJoin(users, eq(users.id, apiKeys.userId)).where(byPrefix), Object.values(keyColumns)).prepare(),
);

export interface KeyHolder {
  id: number;
  secretHash: string;
  scopes: string;
  /** Epoch milliseconds, or null for a key without an expiry. */
  expiresAt: number | null;
  lastUsedAt: number | null;
  userId: number;
  email: string;
  active: boolean;
  tokenVersion: number;
  roles: string | null;
}

/** The key with `prefix` and its owner, read as raw values in keyColumns' order (as sessionHolder reads); with `also`, that user in the same statement. */
export function keyHolder(db: Reader, prefix: string, also?: AlsoUser): MaybePromise<KeyHolder | undefined> {
  return readCaller(
    () => keyAndOwner(db).values({ prefix }),
    () => keyAndOwnerWithUser(db).values({ prefix, userId: also?.id }),
    also,
    keyHolderOf,
  );
}

const keyAt = positionsOf(keyColumns);
/** A row of keyColumns and its owner's, as raw values (instants as epoch milliseconds, flags as 0/1). */
const keyHolderOf = (v: ArrayLike<unknown>): KeyHolder => ({
  id: v[keyAt.id] as number,
  secretHash: v[keyAt.secretHash] as string,
  scopes: v[keyAt.scopes] as string,
  expiresAt: v[keyAt.expiresAt] as number | null,
  lastUsedAt: v[keyAt.lastUsedAt] as number | null,
  userId: v[keyAt.userId] as number,
  email: v[keyAt.email] as string,
  active: Boolean(v[keyAt.active]),
  tokenVersion: v[keyAt.tokenVersion] as number,
  roles: v[keyAt.roles] as string | null,
});

export interface NewApiKey {
  userId: number;
  name: string;
  prefix: string;
  secretHash: string;
  scopes: string[];
  createdAt: Date;
  expiresAt: Date | null;
}

/** What a list shows of a key: never its hash. */
const listedColumns = {
  id: apiKeys.id,
  name: apiKeys.name,
  prefix: apiKeys.prefix,
  scopes: apiKeys.scopes,
  createdAt: apiKeys.createdAt,
  expiresAt: apiKeys.expiresAt,
  lastUsedAt: apiKeys.lastUsedAt,
  lastUsedFrom: apiKeys.lastUsedFrom,
};
export type ListedKey = { id: number; name: string; prefix: string; scopes: string; createdAt: Date; expiresAt: Date | null; lastUsedAt: Date | null; lastUsedFrom: string | null };

/** The user's keys, fewer than `max` (the placeholders userId, max): the new key's condition. */
const roomForKey = sql`(select count(*) from ${apiKeys} where ${apiKeys.userId} = ${sql.placeholder("userId")}) < ${sql.placeholder("max")}`;
/** The new key, found by its prefix (unique): there only if the statement before inserted it. */
const isNewKey = eq(apiKeys.prefix, sql.placeholder("prefix"));
/** What its audit row and its mail say of a new key (never the key or its hash). */
const described = sql`'keyId', ${apiKeys.id}, 'name', ${apiKeys.name}, 'prefix', ${apiKeys.prefix}, 'scopes', json(${sql.placeholder("scopesJson")})`;

const insertKeyIfRoom = prepared((tx: Db) =>
  tx
    .insert(apiKeys)
    .select(
      tx
        .select({
          id: sql<null>`null`.as("id"),
          userId: sql<number>`${sql.placeholder("userId")}`.as("user_id"),
          name: sql<string>`${sql.placeholder("name")}`.as("name"),
          prefix: sql<string>`${sql.placeholder("prefix")}`.as("prefix"),
          secretHash: sql<string>`${sql.placeholder("secretHash")}`.as("secret_hash"),
          scopes: sql<string>`${sql.placeholder("scopes")}`.as("scopes"),
          createdAt: sql<number>`${sql.placeholder("createdAt")}`.as("created_at"),
          expiresAt: sql<number | null>`${sql.placeholder("expiresAt")}`.as("expires_at"),
          lastUsedAt: sql<null>`null`.as("last_used_at"),
          lastUsedFrom: sql<null>`null`.as("last_used_from"),
        })
        .from(sql`(select 1)`)
        .where(roomForKey),
    )
    .returning(listedColumns)
    .prepare(),
);
const newKeyAudit = prepared((tx: Db) =>
  tx
    .insert(auditLog)
    .select(
      tx
        .select(
          auditSelection({
            action: sql`'API_KEY_CREATED'`,
            actor: sql`${sql.placeholder("actor")}`,
            subjectType: "User",
            subjectId: sql`${sql.placeholder("subjectId")}`,
            details: sql`json_object(${described})`,
            at: sql`${sql.placeholder("createdAt")}`,
          }),
        )
        .from(apiKeys)
        .where(isNewKey),
    )
    .prepare(),
);
const newKeyMail = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(notificationSelection("API_KEY_CREATED", placeholder<string>("actor"), sql`json_object('userId', ${apiKeys.userId}, ${described})`, placeholder<Date>("createdAt")))
        .from(apiKeys)
        .where(isNewKey),
    )
    .prepare(),
);

/**
 * A new key of the user, unless they hold `max` already, with its audit row and API_KEY_CREATED
 * to `email`: statements for one list unit (one round trip to a remote primary), the first
 * answering the key's listed row, or no row when the user had no room (nothing was written).
 */
export function newKeyRows(tx: Db, key: NewApiKey, max: number, email: string) {
  const values = {
    ...key,
    scopes: key.scopes.join(","),
    scopesJson: JSON.stringify(key.scopes),
    createdAt: key.createdAt.getTime(),
    expiresAt: key.expiresAt?.getTime() ?? null,
    max,
    actor: email,
    subjectId: String(key.userId),
  };
  return { key: bound(insertKeyIfRoom(tx), values), audit: bound(newKeyAudit(tx), values), mail: bound(newKeyMail(tx), traced(values)) };
}

const keysOf = prepared((db: Reader) =>
  db
    .select(listedColumns)
    .from(apiKeys)
    .where(eq(apiKeys.userId, sql.placeholder("userId")))
    .orderBy(asc(apiKeys.id))
    .prepare(),
);
/** The user's keys, oldest first. */
export const keysOfUser = async (db: Reader, userId: number): Promise<ListedKey[]> => await keysOf(db).all({ userId });

/** Deletes the user's key `id`: answers a row when it was theirs. */
export const deleteKeyStatement = (tx: Db, userId: number, id: number) =>
  tx
    .delete(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId)))
    .returning({ id: apiKeys.id, prefix: apiKeys.prefix, name: apiKeys.name });

/** Deletes every key of the user (a bootstrap promotion). */
export const deleteKeysOfStatement = (tx: Db, userId: number) => tx.delete(apiKeys).where(eq(apiKeys.userId, userId));

/**
 * The keys' lastUsedAt and lastUsedFrom moved forward, in one statement: `uses` maps a key id to
 * when and from where it was used.
 */
export function touchKeysStatement(tx: Db, uses: Record<number, { at: number; from: string }>) {
  const json = JSON.stringify(uses);
  const used = sql`(select j.value from json_each(${json}) j where j.key = cast(${apiKeys.id} as text))`;
  return tx
    .update(apiKeys)
    .set({
      lastUsedAt: sql`max(coalesce(${apiKeys.lastUsedAt}, 0), json_extract(${used}, '$.at'))`,
      lastUsedFrom: sql`json_extract(${used}, '$.from')`,
    })
    .where(sql`cast(${apiKeys.id} as text) in (select j.key from json_each(${json}) j)`);
}
