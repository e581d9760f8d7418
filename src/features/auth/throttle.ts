/**
 * Failed-login throttling (decisions.md): after `loginMaxFailures` failures for one e-mail
 * within 15 minutes, or `loginMaxFailuresPerIp` from one client address, further attempts get
 * 429 with Retry-After until that window passes, even with the right password. A successful
 * login clears the e-mail's count. Windows are fixed: they start at the first failure and
 * reset once 15 minutes have passed.
 *
 * Counters live in login_throttle so every worker process shares them. Only failures are
 * counted (counting attempts in flight would lock out a user whose clients log in in parallel).
 * So that parallel guesses cannot all pass the check before any failure is recorded, attempts
 * for one e-mail run one after another within a process: the limit is exact with one process,
 * and with N worker processes at most N - 1 guesses can slip past it. Attempts from one
 * address are not serialized (a proxy's clients would queue behind each other), so a burst
 * of C concurrent guesses can overrun the per-address limit by at most C - 1.
 */
import { and, eq, getTableColumns, gt, inArray, sql, type AnyColumn } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import type { Statement } from "../../db/database";
import { loginThrottle, resetThrottle } from "../../db/schema";
import { AppError } from "../../errors";
import { type AuditRecord, auditStatement } from "../notifications/outbox";

export const THROTTLE_WINDOW_MS = 15 * 60 * 1000;

export interface ThrottleDeps {
  db: Database;
  now: () => number;
  config: { loginMaxFailures: number; loginMaxFailuresPerIp: number };
}

const emailKey = (email: string) => `email:${email}`;
const addressKey = (address: string) => `ip:${address}`;

/** The tail of each e-mail's queue of attempts in this process. */
const queues = new Map<string, Promise<unknown>>();

/** Runs `attempt` after every earlier attempt for the same e-mail (in this process) has finished. */
export async function oneAtATime<T>(email: string, attempt: () => Promise<T>): Promise<T> {
  const previous = queues.get(email) ?? Promise.resolve();
  const run = previous.then(attempt);
  const tail = run.catch(() => undefined);
  queues.set(email, tail);
  try {
    return await run;
  } finally {
    if (queues.get(email) === tail) queues.delete(email);
  }
}

const currentThrottleRows = prepared((db: Reader) =>
  db
    .select()
    .from(loginThrottle)
    .where(and(inArray(loginThrottle.key, [sql.placeholder("emailKey"), sql.placeholder("addressKey")]), gt(loginThrottle.windowStartedAt, sql.placeholder("since"))))
    .prepare(),
);

/** The e-mail's and the address's throttle rows in their current windows: a (prepared) read for a read unit. */
export function throttleRows(deps: ThrottleDeps, db: Reader, email: string, address: string) {
  // `since` in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
  return bound(currentThrottleRows(db), { emailKey: emailKey(email), addressKey: addressKey(address), since: deps.now() - THROTTLE_WINDOW_MS });
}

/**
 * Throws 429 with Retry-After when the e-mail or the address has used up its failures;
 * otherwise tells whether the e-mail has failures in its current window (to clear on success).
 */
export function assertNotThrottled(deps: ThrottleDeps, email: string, rows: (typeof loginThrottle.$inferSelect)[]): { emailHasFailures: boolean } {
  const now = deps.now();
  const limitOf = (key: string) => (key.startsWith("email:") ? deps.config.loginMaxFailures : deps.config.loginMaxFailuresPerIp);
  const blockedUntil = Math.max(0, ...rows.filter((row) => row.failures >= limitOf(row.key)).map((row) => row.windowStartedAt.getTime() + THROTTLE_WINDOW_MS));
  refuseUntil(blockedUntil, now);
  return { emailHasFailures: rows.some((row) => row.key === emailKey(email)) };
}

/** 429 TOO_MANY_REQUESTS with Retry-After (whole seconds, at least one) while `blockedUntil` is ahead. */
export function refuseUntil(blockedUntil: number, now: number) {
  if (blockedUntil <= now) return;
  const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
  throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
}

/** A fixed-window counter table: login's failures and password reset's requests. */
type CounterTable = typeof loginThrottle | typeof resetThrottle;
type CountColumn<T extends CounterTable> = Exclude<keyof T["$inferSelect"], "key" | "windowStartedAt">;

/**
 * One more on `key` in its fixed window (a new window when the last one has ended), as one
 * prepared upsert answering the row: every throttle counts with it, so none builds SQL per call.
 */
export function windowCounter<T extends CounterTable>(table: T, count: CountColumn<T>, windowMs: number) {
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
  return (tx: Db, key: string, now: number) => bound(statement(tx), { key, at: new Date(now), now, since: now - windowMs }) as unknown as Promise<T["$inferSelect"][]>;
}

const countFailure = windowCounter(loginThrottle, "failures", THROTTLE_WINDOW_MS);

/**
 * One more failure for the e-mail and for the address, each in its own window, and its audit
 * row, in the one unit (a batch: no more round trips than the counters alone).
 */
export async function recordFailure(deps: ThrottleDeps, email: string, address: string, audit: AuditRecord) {
  const now = deps.now();
  await deps.db.writeAll(
    (tx) => [countFailure(tx, emailKey(email), now), countFailure(tx, addressKey(address), now), auditStatement(tx, audit, new Date(now))] as unknown as [Statement, Statement],
  );
}

const deleteCounter = prepared((tx: Db) =>
  tx
    .delete(loginThrottle)
    .where(eq(loginThrottle.key, sql.placeholder("key")))
    .prepare(),
);

/** A successful login clears the e-mail's count (the address keeps its own): a statement for its unit. */
export const clearFailures = (tx: Db, email: string) => bound(deleteCounter(tx), { key: emailKey(email) });

/**
 * A limit per client address on an open route (e-mail checks, registrations): every request
 * counts, in its own fixed window, in reset_throttle under the route's own key prefix (so
 * every worker shares it); one over `max` is refused with 429 and Retry-After until the window ends.
 */
export function addressLimit(prefix: string, windowMs: number) {
  const count = windowCounter(resetThrottle, "requests", windowMs);
  return async (deps: { db: Database; now: () => number }, address: string, max: number) => {
    const now = deps.now();
    const [[row]] = (await deps.db.writeAll((tx) => [count(tx, `${prefix}:ip:${address}`, now)] as unknown as [Statement])) as unknown as [(typeof resetThrottle.$inferSelect)[]];
    if (row.requests > max) refuseUntil(row.windowStartedAt.getTime() + windowMs, now);
  };
}

/** GET /api/auth/validate-email: EMAIL_CHECK_MAX_PER_IP a minute. */
export const countEmailCheck = addressLimit("email-check", 60 * 1000);
/** Registration attempts that passed validation (409s too): REGISTER_MAX_PER_IP in 10 minutes. */
export const countRegistration = addressLimit("register", 10 * 60 * 1000);
