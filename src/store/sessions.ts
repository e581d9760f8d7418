/**
 * Sessions and their rotating refresh tokens (sessions, refresh_tokens): every statement on them.
 *
 * A session is open while it has not ended, is before its absolute expiry, was seen within the
 * idle timeout, and carries its user's token version: every event that bumps the version (a
 * password change or reset, an e-mail change, revoke-tokens, deactivation, logout with a sid-less
 * token or `?scope=all`) ends every session of the user in the same write, with no list to walk.
 * Refresh tokens exist raw only in the answer that hands them out; the table keeps a SHA-256.
 */
import { and, desc, eq, isNull, ne, sql } from "drizzle-orm";
import type { Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { positionsOf } from "../db/reads";
import { refreshTokens, sessions, users } from "../db/schema";
import { sha256Base64url } from "../digest";
import { keyRevoked } from "./signing-keys";
import { type AlsoUser, readCaller, withUserById } from "./users";
import type { MaybePromise } from "../maybe-promise";

/** Random bytes as base64url: 16 for a session id, 32 for a refresh token. */
export const randomToken = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url");
export const refreshHash = sha256Base64url;

const roleNames = sql<string | null>`(select group_concat(r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = ${users.id})`;

/** What the guard and a refresh read of a session and its user: one row, one read. */
const sessionAndUser = {
  userId: users.id,
  email: users.email,
  active: users.active,
  tokenVersion: users.tokenVersion,
  roles: roleNames,
  sessionVersion: sessions.tokenVersion,
  endedAt: sessions.endedAt,
  expiresAt: sessions.expiresAt,
  lastSeenAt: sessions.lastSeenAt,
  amr: sessions.amr,
};

/**
 * The token's session: `+?`, not `?`. Bun 1.4.5's bun:sqlite prepares a join again each time a
 * value is bound to it (docs/performance.md, "Bun 1.4.5 re-prepares"), and this one is every session token's read: 23–25 µs
 * CPU a run in a loop with `?`, 5.1–5.4 with `+?` (1.4.4: 5.2 either way). Unary plus changes no
 * value and no comparison (the column's TEXT affinity still applies), and the plan still seeks the
 * primary key.
 */
const bySid = eq(sessions.id, sql`+${sql.placeholder("sid")}`);

/** The session a token's `sid` names, with its user: the guard's one read for a session token. */
/** The guard's columns: the session with its user, and whether the token's signing key was withdrawn. */
const guardColumns = { ...sessionAndUser, keyRevoked: keyRevoked(sql.placeholder("kid")) };
const callerBySession = prepared((db: Reader) => db.select(guardColumns).from(sessions).innerJoin(users, eq(users.id, sessions.userId)).where(bySid).prepare());

const callerBySessionWithUser = prepared((db: Reader) =>
  withUserById(db, (columns) => db.select(columns).from(sessions).innerJoin(users, eq(users.id, sessions.userId)).where(bySid), Object.values(guardColumns)).prepare(),
);

/** A session with its user, as isOpen judges it: instants in epoch milliseconds. */
export interface SessionHolder {
  userId: number;
  email: string;
  active: boolean;
  tokenVersion: number;
  roles: string | null;
  sessionVersion: number;
  endedAt: number | null;
  expiresAt: number;
  lastSeenAt: number;
  /** How the session signed in, comma-separated (pwd, otp, hwk, rec). */
  amr: string;
  /** Whether the token's signing key was withdrawn (`usersvc keys rotate --revoke`). */
  keyRevoked?: boolean;
}

const sessionAt = positionsOf(guardColumns);
/** A row of guardColumns as raw values (instants as epoch milliseconds, flags as 0/1). */
const sessionHolderOf = (v: ArrayLike<unknown>): SessionHolder => ({
  userId: v[sessionAt.userId] as number,
  email: v[sessionAt.email] as string,
  active: Boolean(v[sessionAt.active]),
  tokenVersion: v[sessionAt.tokenVersion] as number,
  roles: v[sessionAt.roles] as string | null,
  sessionVersion: v[sessionAt.sessionVersion] as number,
  endedAt: v[sessionAt.endedAt] as number | null,
  expiresAt: v[sessionAt.expiresAt] as number,
  lastSeenAt: v[sessionAt.lastSeenAt] as number,
  amr: v[sessionAt.amr] as string,
  keyRevoked: Boolean(v[sessionAt.keyRevoked]),
});

/**
 * The session a token names, with its user, as the guard checks it: read as raw values in
 * guardColumns' order, skipping drizzle's row mapping as the bearer read does
 * (users.ts tokenHolder); with `also`, that user in the same statement.
 */
export function sessionHolder(db: Reader, sid: string, kid = "", also?: AlsoUser): MaybePromise<SessionHolder | undefined> {
  return readCaller(
    () => callerBySession(db).values({ sid, kid }),
    () => callerBySessionWithUser(db).values({ sid, kid, userId: also?.id }),
    also,
    sessionHolderOf,
  );
}

/** Whether a session read with its user is open at `now`: not ended, of the user's token version, within both lifetimes, and the user active. */
export const isOpen = (s: Pick<SessionHolder, "active" | "tokenVersion" | "sessionVersion" | "endedAt" | "expiresAt" | "lastSeenAt">, now: number, idleMs: number) =>
  s.active && s.endedAt === null && s.sessionVersion === s.tokenVersion && s.expiresAt > now && s.lastSeenAt + idleMs > now;

export interface NewSession {
  id: string;
  userId: number;
  tokenVersion: number;
  address: string;
  userAgent: string | null;
  device: string | null;
  amr: string[];
}

const insertSession = prepared((tx: Db) =>
  tx
    .insert(sessions)
    .values({
      id: sql.placeholder("id"),
      userId: sql.placeholder("userId"),
      tokenVersion: sql.placeholder("tokenVersion"),
      createdAt: placeholder<Date>("now"),
      lastSeenAt: placeholder<Date>("now"),
      expiresAt: placeholder<Date>("expiresAt"),
      address: sql.placeholder("address"),
      userAgent: sql.placeholder("userAgent"),
      device: sql.placeholder("device"),
      amr: sql.placeholder("amr"),
    })
    .prepare(),
);

const insertRefresh = prepared((tx: Db) =>
  tx
    .insert(refreshTokens)
    .values({ tokenHash: sql.placeholder("tokenHash"), sessionId: sql.placeholder("sessionId"), createdAt: placeholder<Date>("now") })
    .prepare(),
);

/**
 * Ends the user's open sessions beyond the `keep` most recently used (SESSION_MAX_PER_USER), the
 * one just opened counting as the most recent.
 */
const endBeyondCap = prepared((tx: Db) =>
  tx
    .update(sessions)
    .set({ endedAt: placeholder<Date>("now") })
    .where(
      sql`${sessions.id} in (select s.id from sessions s join users u on u.id = s.user_id
        where s.user_id = ${sql.placeholder("userId")} and s.ended_at is null and s.token_version = u.token_version and s.expires_at > ${sql.placeholder("nowMs")}
        order by s.last_seen_at desc, s.created_at desc limit -1 offset ${sql.placeholder("keep")})`,
    )
    .prepare(),
);

/** The statements of a sign-in's unit that open its session with its first refresh token (the hash of `refreshToken`), keeping the user within `maxPerUser`. */
export function openSessionRows(tx: Db, session: NewSession, refreshToken: string, at: { now: Date; expiresAt: Date }, maxPerUser: number) {
  return [
    bound(insertSession(tx), { ...session, amr: session.amr.join(","), now: at.now, expiresAt: at.expiresAt }),
    bound(insertRefresh(tx), { tokenHash: refreshHash(refreshToken), sessionId: session.id, now: at.now }),
    bound(endBeyondCap(tx), { userId: session.userId, now: at.now, nowMs: at.now.getTime(), keep: maxPerUser }),
  ];
}

/** A refresh token's state, its session's and its user's: a refresh's first read. */
const refreshState = prepared((db: Reader) =>
  db
    .select({ ...sessionAndUser, sessionId: sessions.id, signedInAt: sessions.createdAt, rotatedAt: refreshTokens.rotatedAt, sibling: refreshTokens.sibling })
    .from(refreshTokens)
    .innerJoin(sessions, eq(sessions.id, refreshTokens.sessionId))
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(eq(refreshTokens.tokenHash, sql`+${sql.placeholder("tokenHash")}`))
    .prepare(),
);
/** A refresh token's state with its session and user (instants in epoch milliseconds), or undefined for an unknown token. */
export async function refreshStateOf(db: Reader, token: string) {
  const [row] = await foundOrAgain(db, (source) => refreshState(source).all({ tokenHash: refreshHash(token) }));
  return (
    row && {
      ...row,
      active: Boolean(row.active),
      endedAt: row.endedAt?.getTime() ?? null,
      expiresAt: row.expiresAt.getTime(),
      lastSeenAt: row.lastSeenAt.getTime(),
      signedInAt: row.signedInAt.getTime(),
      rotatedAt: row.rotatedAt?.getTime() ?? null,
    }
  );
}

/**
 * What a bearer-only refresh reads of the caller's session: when it signed in, and whether it has
 * ever used its refresh token. A rotated token's row stays until the session is pruned (a password
 * change keeps it too, renamed: keptSessionRows), so its existence is the session's memory of it.
 */
const bearerRefreshState = prepared((db: Reader) =>
  db
    .select({
      signedInAt: sessions.createdAt,
      rotated: sql<number>`exists (select 1 from ${refreshTokens} where ${refreshTokens.sessionId} = ${sessions.id} and ${refreshTokens.rotatedAt} is not null)`,
    })
    .from(sessions)
    .where(eq(sessions.id, sql.placeholder("sessionId")))
    .prepare(),
);
/** The session's sign-in instant (ms) and whether it has used its refresh token, or undefined for an unknown session. */
export async function bearerRefreshStateOf(db: Reader, sessionId: string) {
  const [row] = await foundOrAgain(db, (source) => bearerRefreshState(source).all({ sessionId }));
  return row && { signedInAt: row.signedInAt.getTime(), rotated: Boolean(row.rotated) };
}

/**
 * A rotation's own check that its session is not over: the state it was judged on may be an edge's
 * copy that does not know yet of a logout or a reuse detected at another edge, and the rotation
 * runs at the primary, which does.
 */
const sessionNotEnded = sql`exists (select 1 from ${sessions} where ${sessions.id} = ${refreshTokens.sessionId} and ${sessions.endedAt} is null)`;

/** The current token rotated: it names its successor, once (two rotations racing: one wins). */
const rotateCurrent = prepared((tx: Db) =>
  tx
    .update(refreshTokens)
    .set({ rotatedAt: placeholder<Date>("now"), successor: placeholder<string>("next") })
    .where(and(eq(refreshTokens.tokenHash, sql.placeholder("tokenHash")), isNull(refreshTokens.rotatedAt), sessionNotEnded))
    .prepare(),
);
/** A rotated token within its grace: it names one sibling successor, once. */
const rotateInGrace = prepared((tx: Db) =>
  tx
    .update(refreshTokens)
    .set({ sibling: placeholder<string>("next") })
    .where(
      and(
        eq(refreshTokens.tokenHash, sql.placeholder("tokenHash")),
        isNull(refreshTokens.sibling),
        sql`${refreshTokens.rotatedAt} >= ${sql.placeholder("graceFrom")}`,
        sessionNotEnded,
      ),
    )
    .prepare(),
);
/** The successor, only if the rotation above named it (so a lost race hands out nothing). */
const insertSuccessor = prepared((tx: Db) =>
  tx
    .insert(refreshTokens)
    .select(
      tx
        .select({
          tokenHash: sql<string>`${sql.placeholder("next")}`.as("token_hash"),
          sessionId: refreshTokens.sessionId,
          createdAt: sql<number>`${sql.placeholder("nowMs")}`.as("created_at"),
          rotatedAt: sql<null>`null`.as("rotated_at"),
          successor: sql<null>`null`.as("successor"),
          sibling: sql<null>`null`.as("sibling"),
        })
        .from(refreshTokens)
        .where(
          and(
            eq(refreshTokens.tokenHash, sql.placeholder("tokenHash")),
            sql`(${refreshTokens.successor} = ${sql.placeholder("next")} or ${refreshTokens.sibling} = ${sql.placeholder("next")})`,
          ),
        ),
    )
    .returning({ tokenHash: refreshTokens.tokenHash })
    .prepare(),
);
const touchOne = prepared((tx: Db) =>
  tx
    .update(sessions)
    .set({ lastSeenAt: placeholder<Date>("now") })
    .where(eq(sessions.id, sql.placeholder("sessionId")))
    .prepare(),
);

/**
 * The statements of a rotation: `token` rotated (or, `inGraceFrom` given, answered once more with
 * a sibling) to `next`, and the session seen now. `issued` answers a row only when `next` was stored.
 */
export function rotationRows(tx: Db, sessionId: string, token: string, next: string, now: Date, inGraceFrom?: Date) {
  const values = { tokenHash: refreshHash(token), next: refreshHash(next), now, nowMs: now.getTime(), sessionId };
  return {
    rotated: inGraceFrom ? bound(rotateInGrace(tx), { ...values, graceFrom: inGraceFrom.getTime() }) : bound(rotateCurrent(tx), values),
    issued: bound(insertSuccessor(tx), values),
    seen: bound(touchOne(tx), values),
  };
}

const endById = prepared((tx: Db) =>
  tx
    .update(sessions)
    .set({ endedAt: placeholder<Date>("now") })
    .where(and(eq(sessions.id, sql.placeholder("sessionId")), eq(sessions.userId, sql.placeholder("userId")), isNull(sessions.endedAt)))
    .returning({ id: sessions.id })
    .prepare(),
);
/** Ends the user's session (its access and refresh tokens): answers a row when it was open. */
export const endSessionStatement = (tx: Db, userId: number, sessionId: string, now: Date) => bound(endById(tx), { sessionId, userId, now });

const endOthers = prepared((tx: Db) =>
  tx
    .update(sessions)
    .set({ endedAt: placeholder<Date>("now") })
    .where(and(eq(sessions.userId, sql.placeholder("userId")), ne(sessions.id, sql.placeholder("keep")), isNull(sessions.endedAt)))
    .prepare(),
);
/** Ends every session of the user but `keep` (none: all of them). */
export const endOtherSessionsStatement = (tx: Db, userId: number, keep: string | undefined, now: Date) => bound(endOthers(tx), { userId, keep: keep ?? "", now });

/** A factor proved within the session (enrolment) joins its amr, so an enrol-only session becomes a full one. */
export const addAmrStatement = (tx: Db, sessionId: string, method: string) =>
  tx
    .update(sessions)
    .set({ amr: sql`${sessions.amr} || ',' || ${method}` })
    .where(and(eq(sessions.id, sessionId), sql`instr(',' || ${sessions.amr} || ',', ${`,${method},`}) = 0`));

/** The session carried over to the user's new token version (after its own password change), with none of its earlier refresh tokens. */
const carryOver = prepared((tx: Db) =>
  tx
    .update(sessions)
    .set({ tokenVersion: sql`(select ${users.tokenVersion} from ${users} where ${users.id} = ${sessions.userId})`, lastSeenAt: placeholder<Date>("now") })
    .where(and(eq(sessions.id, sql.placeholder("sessionId")), isNull(sessions.endedAt)))
    .prepare(),
);
const dropCurrentRefreshOf = prepared((tx: Db) =>
  tx
    .delete(refreshTokens)
    .where(and(eq(refreshTokens.sessionId, sql.placeholder("sessionId")), isNull(refreshTokens.rotatedAt)))
    .prepare(),
);
/** Rotated tokens renamed out of reach (no raw token hashes to "spent:…"), so the session still remembers it rotated (bearerRefreshState). */
const retireRotatedOf = prepared((tx: Db) =>
  tx
    .update(refreshTokens)
    .set({ tokenHash: sql`'spent:' || ${refreshTokens.tokenHash}` })
    .where(and(eq(refreshTokens.sessionId, sql.placeholder("sessionId")), sql`${refreshTokens.rotatedAt} is not null and ${refreshTokens.tokenHash} not like 'spent:%'`))
    .prepare(),
);
/** The statements that keep a session through its user's token-version bump (run after it), with a new refresh token as its only usable one. */
export function keptSessionRows(tx: Db, sessionId: string, refreshToken: string, now: Date) {
  return [
    bound(carryOver(tx), { sessionId, now }),
    bound(dropCurrentRefreshOf(tx), { sessionId }),
    bound(retireRotatedOf(tx), { sessionId }),
    bound(insertRefresh(tx), { tokenHash: refreshHash(refreshToken), sessionId, now }),
  ];
}

/** What a session list shows; never a refresh token or its hash. */
const listed = prepared((db: Reader) =>
  db
    .select({
      id: sessions.id,
      device: sessions.device,
      userAgent: sessions.userAgent,
      address: sessions.address,
      amr: sessions.amr,
      createdAt: sessions.createdAt,
      lastSeenAt: sessions.lastSeenAt,
      expiresAt: sessions.expiresAt,
    })
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(
      and(
        eq(sessions.userId, sql.placeholder("userId")),
        isNull(sessions.endedAt),
        eq(sessions.tokenVersion, users.tokenVersion),
        sql`${sessions.expiresAt} > ${sql.placeholder("now")}`,
        sql`${sessions.lastSeenAt} > ${sql.placeholder("seenSince")}`,
      ),
    )
    .orderBy(desc(sessions.lastSeenAt), desc(sessions.createdAt))
    .prepare(),
);
/** The user's open sessions, the most recently active first. */
export const openSessionsOf = (db: Reader, userId: number, now: number, idleMs: number) => listed(db).all({ userId, now, seenSince: now - idleMs });

/** The sessions' lastSeenAt moved forward, in one statement: `touches` maps a session id to when it was seen (ms). */
export const touchSessionsStatement = (tx: Db, touches: Record<string, number>) =>
  tx
    .update(sessions)
    .set({ lastSeenAt: sql`max(${sessions.lastSeenAt}, (select j.value from json_each(${JSON.stringify(touches)}) j where j.key = ${sessions.id}))` })
    .where(sql`${sessions.id} in (select j.key from json_each(${JSON.stringify(touches)}) j)`);

/**
 * Deletes the sessions that ended before `cutoff` (with their refresh tokens): ended by hand, by
 * their absolute or idle expiry, or by a token-version bump (dated by their last activity).
 */
export function pruneSessionsRows(tx: Db, cutoff: number, idleMs: number) {
  return [
    tx.delete(sessions).where(
      sql`min(coalesce(${sessions.endedAt}, ${sessions.expiresAt}), ${sessions.expiresAt}, ${sessions.lastSeenAt} + ${idleMs}) < ${cutoff}
          or (${sessions.lastSeenAt} < ${cutoff} and ${sessions.tokenVersion} <> (select ${users.tokenVersion} from ${users} where ${users.id} = ${sessions.userId}))`,
    ),
    tx.delete(refreshTokens).where(sql`${refreshTokens.sessionId} not in (select ${sessions.id} from ${sessions})`),
  ];
}
