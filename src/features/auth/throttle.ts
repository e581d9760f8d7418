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
import { and, eq, gt, inArray, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import { loginThrottle } from "../../db/schema";
import { AppError } from "../../errors";

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
  if (blockedUntil > now) {
    const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
    throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
  }
  return { emailHasFailures: rows.some((row) => row.key === emailKey(email)) };
}

function countFailure(deps: ThrottleDeps, tx: Db, key: string) {
  const now = deps.now();
  const expired = sql`${loginThrottle.windowStartedAt} <= ${now - THROTTLE_WINDOW_MS}`;
  return tx
    .insert(loginThrottle)
    .values({ key, failures: 1, windowStartedAt: new Date(now) })
    .onConflictDoUpdate({
      target: loginThrottle.key,
      // Every expression sees the row as it was, so both CASEs test the old window.
      set: {
        failures: sql`case when ${expired} then 1 else ${loginThrottle.failures} + 1 end`,
        windowStartedAt: sql`case when ${expired} then ${now} else ${loginThrottle.windowStartedAt} end`,
      },
    });
}

/** One more failure for the e-mail and for the address, each in its own window. */
export async function recordFailure(deps: ThrottleDeps, email: string, address: string) {
  await deps.db.writeAll((tx) => [countFailure(deps, tx, emailKey(email)), countFailure(deps, tx, addressKey(address))]);
}

/** A successful login clears the e-mail's count (the address keeps its own): a statement for its unit. */
export const clearFailures = (tx: Pick<Db, "delete">, email: string) => tx.delete(loginThrottle).where(eq(loginThrottle.key, emailKey(email)));
