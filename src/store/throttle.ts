/**
 * Throttle counters (login_throttle, reset_throttle): fixed-window counts per key ("email:…",
 * "ip:…"), shared by every worker process through the database. Login counts its failures,
 * password reset its requests, open routes their requests per client address (in reset_throttle,
 * under the route's own key prefix); a window starts at the first count and ends after its length.
 *
 * Login counts each failure three times: for the e-mail from the client network (`pairKey`, the
 * seed's LOGIN_MAX_FAILURES), for the e-mail across networks (`emailKey`, LOGIN_MAX_FAILURES_GLOBAL)
 * and for the client address. The failure that brings the e-mail's global count to its limit locks
 * the e-mail out everywhere (login_lockouts), mails the owner LOGIN_LOCKED once, and starts the
 * count again, all in the failure's one unit.
 */
import { and, eq, getTableColumns, gt, gte, inArray, lte, or, sql, type AnyColumn } from "drizzle-orm";
import type { Database, Db, Reader, Statement } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { loginLockouts, loginThrottle, outbox, resetThrottle } from "../db/schema";
import { auditStatement, type AuditRecord } from "./audit";
import { notificationSelection, traced } from "./outbox";

/** Login's window: failures count for 15 minutes from the first. */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000;
/** Password reset's window: requests count for an hour from the first. */
export const RESET_WINDOW_MS = 60 * 60 * 1000;

export type ThrottleRow = typeof loginThrottle.$inferSelect;

/** A global lockout's first length; each further one within a day of the last one's end doubles it, up to a day. */
export const LOCKOUT_BASE_MS = LOGIN_WINDOW_MS;
const DAY_MS = 24 * 60 * 60 * 1000;

/** The e-mail's failures across networks (login), or its requests (password reset). */
export const emailKey = (email: string) => `email:${email}`;
/** The e-mail's login failures from one client network (/24, /48). */
export const pairKey = (email: string, network: string) => `${emailKey(email)}|${network}`;
export const addressKey = (address: string) => `ip:${address}`;

/** Where one login attempt comes from, as its counters know it. */
export interface AttemptOrigin {
  email: string;
  /** The client network (http/client-network.ts). */
  network: string;
  address: string;
}

const currentThrottleRows = prepared((db: Reader) =>
  db
    .select()
    .from(loginThrottle)
    .where(and(inArray(loginThrottle.key, [sql.placeholder("pairKey"), sql.placeholder("addressKey")]), gt(loginThrottle.windowStartedAt, sql.placeholder("since"))))
    .prepare(),
);

/** The e-mail-and-network's and the address's login failure rows in their current windows: a (prepared) read for a read unit. */
export function loginThrottleRows(db: Reader, origin: AttemptOrigin, now: number) {
  // `since` in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
  return bound(currentThrottleRows(db), { pairKey: pairKey(origin.email, origin.network), addressKey: addressKey(origin.address), since: now - LOGIN_WINDOW_MS });
}

const lockoutOf = prepared((db: Reader) =>
  db
    .select({ lockedUntil: loginLockouts.lockedUntil })
    .from(loginLockouts)
    .where(eq(loginLockouts.email, sql.placeholder("email")))
    .prepare(),
);
/** The e-mail's global lockout (its end), if it ever had one: a statement for a read unit. */
export const loginLockoutRows = (db: Reader, email: string) => bound(lockoutOf(db), { email });

/** A fixed-window counter table: login's failures and password reset's requests. */
type CounterTable = typeof loginThrottle | typeof resetThrottle;
type CountColumn<T extends CounterTable> = Exclude<keyof T["$inferSelect"], "key" | "windowStartedAt">;

/**
 * One more on `key` in its fixed window (a new window when the last one has ended), as one
 * prepared upsert answering the row: every throttle counts with it, so none builds SQL per call.
 */
function windowCounter<T extends CounterTable>(table: T, count: CountColumn<T>, windowMs: number) {
  const columns: Record<string, AnyColumn> = getTableColumns(table);
  const counted = columns[count as string];
  const statement = prepared((tx: Db) => {
    // Both CASEs see the row as it was, so both test the old window. In SQL `now` and `since` are
    // in the stored form (ms); `at`, a column's value, is a Date its encoder stores.
    const expired = sql`${table.windowStartedAt} <= ${sql.placeholder("since")}`;
    // Cast: the count column's name is a type parameter, and a computed key is no column to drizzle's types.
    const values = { key: sql.placeholder("key"), [count]: 1, windowStartedAt: sql.placeholder("at") } as never;
    return tx
      .insert(table)
      .values(values)
      .onConflictDoUpdate({
        target: table.key,
        set: {
          [count]: sql`case when ${expired} then 1 else ${counted} + 1 end`,
          windowStartedAt: sql`case when ${expired} then ${sql.placeholder("now")} else ${table.windowStartedAt} end`,
        },
      })
      .returning()
      .prepare();
  });
  return (tx: Db, key: string, now: number) => bound(statement(tx), { key, at: new Date(now), now, since: now - windowMs });
}

const countFailure = windowCounter(loginThrottle, "failures", LOGIN_WINDOW_MS);

/** The e-mail's global count has reached its limit: the condition of a lockout's statements. */
const globalLimitReached = and(eq(loginThrottle.key, sql.placeholder("key")), gte(loginThrottle.failures, sql.placeholder("limit")));

/**
 * The e-mail locked out, if its global count has reached the limit: a day after the last lockout
 * ended (or the first time) for LOCKOUT_BASE_MS, else for twice the last one's length, up to a day.
 * In SET every column reads the row as it was.
 */
const lockOut = prepared((tx: Db) => {
  const escalated = sql`case when ${loginLockouts.lockedUntil} > ${sql.placeholder("now")} - ${DAY_MS}
    then min(${loginLockouts.durationMs} * 2, ${DAY_MS}) else ${LOCKOUT_BASE_MS} end`;
  const first = {
    email: sql`${sql.placeholder("email")}`.as("email"),
    lockedUntil: sql`${sql.placeholder("now")} + ${LOCKOUT_BASE_MS}`.as("locked_until"),
    durationMs: sql`${LOCKOUT_BASE_MS}`.as("duration_ms"),
  };
  return tx
    .insert(loginLockouts)
    .select(tx.select(first).from(loginThrottle).where(globalLimitReached))
    .onConflictDoUpdate({ target: loginLockouts.email, set: { lockedUntil: sql`${sql.placeholder("now")} + ${escalated}`, durationMs: escalated } })
    .prepare();
});

/** LOGIN_LOCKED to the account's owner, if the statement before locked the e-mail out. */
const lockedMail = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(
          notificationSelection(
            "LOGIN_LOCKED",
            placeholder<string>("email"),
            sql`json_object('userId', ${sql.placeholder("userId")}, 'lockedUntil', (select ${loginLockouts.lockedUntil} from ${loginLockouts} where ${loginLockouts.email} = ${sql.placeholder("email")}))`,
            placeholder<Date>("at"),
          ),
        )
        .from(loginThrottle)
        .where(globalLimitReached),
    )
    .prepare(),
);

/** After a lockout the global count starts again. */
const restartGlobalCount = prepared((tx: Db) => tx.delete(loginThrottle).where(globalLimitReached).prepare());

/** One failed login as its unit counts it. */
export interface LoginFailure extends AttemptOrigin {
  now: number;
  audit: AuditRecord;
  /** LOGIN_MAX_FAILURES_GLOBAL: the failure that reaches it locks the e-mail out on every network. */
  globalLimit: number;
  /** The account's id, when the e-mail has one: its owner is mailed LOGIN_LOCKED. */
  userId?: number;
}

/**
 * One more login failure for the e-mail from its network, for the e-mail everywhere and for the
 * address, each in its own window, the lockout the global count may reach, and the audit row, in
 * the one unit (a batch: no more round trips than the counters alone), after `before`'s statements
 * (an embedded replica's gate: store/login-gate.ts).
 */
export async function countLoginFailure(db: Database, failure: LoginFailure, before: (tx: Db) => Statement[] = () => []) {
  const { email, now, globalLimit: limit } = failure;
  const global = { key: emailKey(email), limit };
  await db.writeAll((tx) => [
    ...before(tx),
    countFailure(tx, pairKey(email, failure.network), now),
    countFailure(tx, emailKey(email), now),
    countFailure(tx, addressKey(failure.address), now),
    bound(lockOut(tx), { ...global, email, now }),
    ...(failure.userId === undefined ? [] : [bound(lockedMail(tx), traced({ ...global, email, userId: failure.userId, at: now }))]),
    bound(restartGlobalCount(tx), global),
    auditStatement(tx, failure.audit, new Date(now)),
  ]);
}

const deleteCounter = prepared((tx: Db) =>
  tx
    .delete(loginThrottle)
    .where(eq(loginThrottle.key, sql.placeholder("key")))
    .prepare(),
);

/** The e-mail's login failures from that network cleared (other networks, the global count and the address keep theirs): a statement for a unit. */
export const clearLoginFailures = (tx: Db, email: string, network: string) => bound(deleteCounter(tx), { key: pairKey(email, network) });

/**
 * An ADMIN's unlock: every login failure count of the e-mail (from every network, and across them)
 * and its lockout, with the lockouts' doubling, gone: statements for a unit.
 */
export function unlockStatements(tx: Db, email: string) {
  const prefix = `${pairKey(email, "")}`;
  return [
    tx.delete(loginThrottle).where(or(eq(loginThrottle.key, emailKey(email)), sql`substr(${loginThrottle.key}, 1, ${prefix.length}) = ${prefix}`)),
    tx.delete(loginLockouts).where(eq(loginLockouts.email, email)),
  ];
}

const oldLockouts = prepared((tx: Db) =>
  tx
    .delete(loginLockouts)
    .where(lte(loginLockouts.lockedUntil, sql.placeholder("before")))
    .prepare(),
);

/** Lockouts that ended a day ago no longer double the next: a statement of the outbox sender's housekeeping. */
export const forgetOldLockouts = (tx: Db, now: number) => bound(oldLockouts(tx), { before: now - DAY_MS });

const countRequestOn = windowCounter(resetThrottle, "requests", RESET_WINDOW_MS);

/** One more password-reset request on `key` in its hourly window; the new count, and when that window ends. */
export async function countResetRequest(tx: Db, key: string, now: number) {
  const [row] = await countRequestOn(tx, key, now);
  return { requests: row.requests, endsAt: row.windowStartedAt.getTime() + RESET_WINDOW_MS };
}

const endedResetWindows = prepared((tx: Db) =>
  tx
    .delete(resetThrottle)
    .where(lte(resetThrottle.windowStartedAt, sql.placeholder("before")))
    .prepare(),
);

/** Ended reset windows go: a statement of the outbox sender's housekeeping unit. */
export const forgetEndedResetWindows = (tx: Db, now: number) => bound(endedResetWindows(tx), { before: now - RESET_WINDOW_MS });

/**
 * A counter of requests per client address in fixed windows of `windowMs`, in reset_throttle under
 * `prefix` (so every worker shares it): each call counts one, as a unit of its own, and answers the
 * new count and when its window ends.
 */
export function addressCounter(prefix: string, windowMs: number) {
  const count = windowCounter(resetThrottle, "requests", windowMs);
  return async (db: Database, address: string, now: number) => {
    // Judged on the row the upsert answers: an embedded replica need not pull it.
    const [[row]] = await db.writeAll((tx) => [count(tx, `${prefix}:ip:${address}`, now)], { unread: true });
    return { requests: row.requests, endsAt: row.windowStartedAt.getTime() + windowMs };
  };
}
