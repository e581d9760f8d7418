/**
 * Failed-login throttling (decisions.md): after `maxPerEmail` failures for one e-mail within
 * 15 minutes, or `maxPerAddress` from one client address, further attempts get 429 with
 * Retry-After until that window passes, even with the right password.
 *
 * Counters live in login_throttle so every worker process shares them. Each attempt first
 * reserves its failure in one atomic upsert per key (capped at max + 1, so refused attempts
 * never stretch anything); a successful attempt then clears the e-mail's count and gives the
 * address back its reservation. Reserving before the password check means 32 parallel
 * guesses cannot all pass a check that only counts failures afterwards.
 *
 * Windows are fixed: they start at the first failure and reset once 15 minutes have passed.
 */
import { eq, sql } from "drizzle-orm";
import type { Db } from "../../db/client";
import { loginThrottle } from "../../db/schema";
import { AppError } from "../../errors";

export const THROTTLE_WINDOW_MS = 15 * 60 * 1000;

export interface ThrottleDeps {
  db: Db;
  now: () => number;
  config: { loginMaxFailures: number; loginMaxFailuresPerIp: number };
}

const emailKey = (email: string) => `email:${email}`;
const addressKey = (address: string) => `ip:${address}`;

function reserve(deps: ThrottleDeps, key: string, max: number) {
  const now = new Date(deps.now());
  const expired = sql`${loginThrottle.windowStartedAt} <= ${now.getTime() - THROTTLE_WINDOW_MS}`;
  return deps.db
    .insert(loginThrottle)
    .values({ key, failures: 1, windowStartedAt: now })
    .onConflictDoUpdate({
      target: loginThrottle.key,
      // Every expression sees the row as it was, so both CASEs test the old window.
      set: {
        failures: sql`case when ${expired} then 1 else min(${loginThrottle.failures} + 1, ${max + 1}) end`,
        windowStartedAt: sql`case when ${expired} then ${now.getTime()} else ${loginThrottle.windowStartedAt} end`,
      },
    })
    .returning({ failures: loginThrottle.failures, windowStartedAt: loginThrottle.windowStartedAt });
}

/**
 * Counts this attempt as a failure for the e-mail and the address, or throws 429 when either
 * was already at its limit. Call `succeeded` when the password turns out right.
 */
export async function reserveAttempt(deps: ThrottleDeps, email: string, address: string) {
  const { loginMaxFailures, loginMaxFailuresPerIp } = deps.config;
  const [[byEmail], [byAddress]] = await deps.db.batch([
    reserve(deps, emailKey(email), loginMaxFailures),
    reserve(deps, addressKey(address), loginMaxFailuresPerIp),
  ]);
  const blockedUntil = Math.max(
    byEmail.failures > loginMaxFailures ? byEmail.windowStartedAt.getTime() + THROTTLE_WINDOW_MS : 0,
    byAddress.failures > loginMaxFailuresPerIp ? byAddress.windowStartedAt.getTime() + THROTTLE_WINDOW_MS : 0,
  );
  if (blockedUntil > 0) {
    const seconds = Math.max(1, Math.ceil((blockedUntil - deps.now()) / 1000));
    throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
  }
}

/** The statements that undo a reservation for a right password; run them with the login's own writes. */
export function succeeded(deps: ThrottleDeps, email: string, address: string) {
  return [
    deps.db.delete(loginThrottle).where(eq(loginThrottle.key, emailKey(email))),
    deps.db
      .update(loginThrottle)
      .set({ failures: sql`max(${loginThrottle.failures} - 1, 0)` })
      .where(eq(loginThrottle.key, addressKey(address))),
  ] as const;
}
