/**
 * Throttle counters (login_throttle, reset_throttle): fixed-window counts per key ("email:…",
 * "ip:…"), shared by every worker process through the database. Login counts its failures,
 * password reset its requests, open routes their requests per client address (in reset_throttle,
 * under the route's own key prefix); a window starts at the first count and ends after its length.
 */
import { and, eq, getTableColumns, gt, inArray, lte, sql, type AnyColumn } from "drizzle-orm";
import type { Database, Db, Reader } from "../db/database";
import { bound, prepared } from "../db/prepared";
import { loginThrottle, resetThrottle } from "../db/schema";
import { auditStatement, type AuditRecord } from "./audit";

/** Login's window: failures count for 15 minutes from the first. */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000;
/** Password reset's window: requests count for an hour from the first. */
export const RESET_WINDOW_MS = 60 * 60 * 1000;

export type ThrottleRow = typeof loginThrottle.$inferSelect;

export const emailKey = (email: string) => `email:${email}`;
export const addressKey = (address: string) => `ip:${address}`;

const currentThrottleRows = prepared((db: Reader) =>
  db
    .select()
    .from(loginThrottle)
    .where(and(inArray(loginThrottle.key, [sql.placeholder("emailKey"), sql.placeholder("addressKey")]), gt(loginThrottle.windowStartedAt, sql.placeholder("since"))))
    .prepare(),
);

/** The e-mail's and the address's login failure rows in their current windows: a (prepared) read for a read unit. */
export function loginThrottleRows(db: Reader, email: string, address: string, now: number) {
  // `since` in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
  return bound(currentThrottleRows(db), { emailKey: emailKey(email), addressKey: addressKey(address), since: now - LOGIN_WINDOW_MS });
}

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

/**
 * One more login failure for the e-mail and for the address, each in its own window, and its audit
 * row, in the one unit (a batch: no more round trips than the counters alone).
 */
export async function countLoginFailure(db: Database, email: string, address: string, now: number, audit: AuditRecord) {
  await db.writeAll((tx) => [countFailure(tx, emailKey(email), now), countFailure(tx, addressKey(address), now), auditStatement(tx, audit, new Date(now))]);
}

const deleteCounter = prepared((tx: Db) =>
  tx
    .delete(loginThrottle)
    .where(eq(loginThrottle.key, sql.placeholder("key")))
    .prepare(),
);

/** The e-mail's login failures cleared (the address keeps its own): a statement for a unit. */
export const clearLoginFailures = (tx: Db, email: string) => bound(deleteCounter(tx), { key: emailKey(email) });

const countRequestOn = windowCounter(resetThrottle, "requests", RESET_WINDOW_MS);

/** One more password-reset request on `key` in its hourly window; the new count, and when that window ends. */
export async function countResetRequest(tx: Db, key: string, now: number) {
  const [row] = await countRequestOn(tx, key, now);
  return { requests: row.requests, endsAt: row.windowStartedAt.getTime() + RESET_WINDOW_MS };
}

/** Ended reset windows go: a statement of the outbox sender's housekeeping unit. */
export const forgetEndedResetWindows = (tx: Db, now: number) => tx.delete(resetThrottle).where(lte(resetThrottle.windowStartedAt, new Date(now - RESET_WINDOW_MS)));

/**
 * A counter of requests per client address in fixed windows of `windowMs`, in reset_throttle under
 * `prefix` (so every worker shares it): each call counts one, as a unit of its own, and answers the
 * new count and when its window ends.
 */
export function addressCounter(prefix: string, windowMs: number) {
  const count = windowCounter(resetThrottle, "requests", windowMs);
  return async (db: Database, address: string, now: number) => {
    const [[row]] = await db.writeAll((tx) => [count(tx, `${prefix}:ip:${address}`, now)]);
    return { requests: row.requests, endsAt: row.windowStartedAt.getTime() + windowMs };
  };
}
