/**
 * When sessions were last seen, written at most once a minute per session and never by a
 * request: the guard notes a session whose lastSeenAt is a minute old, and the notes of a few
 * seconds go to the database together, one statement in one unit. The same flush prunes ended
 * sessions (older than 30 days) once an hour, on the primary every write goes to.
 */
import type { Database } from "../db/database";
import type { Logger } from "pino";
import { pruneSessionsRows, touchSessionsStatement } from "../store/sessions";

export const SEEN_EVERY_MS = 60_000;
const FLUSH_AFTER_MS = 2_000;
const PRUNE_EVERY_MS = 3_600_000;
export const PRUNE_AFTER_MS = 30 * 86_400_000;

export interface SessionActivity {
  /** The session was used at `at`; `lastSeenAt` is what the database holds. */
  seen(sessionId: string, lastSeenAt: number, at: number): void;
  /** Writes what is noted now (the timer does it a few seconds after the first note). */
  flush(): Promise<void>;
}

export function createSessionActivity(db: Database, now: () => number, idleMs: number, logger: Logger): SessionActivity {
  /** Noted and not yet written. */
  const pending = new Map<string, number>();
  /** Written or noted within the last minute, so a read that raced the write notes nothing again. */
  const recent = new Map<string, number>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let prunedAt = 0;

  async function flush() {
    timer = undefined;
    const at = now();
    for (const [id, seenAt] of recent) if (at - seenAt >= SEEN_EVERY_MS) recent.delete(id);
    const prune = at - prunedAt >= PRUNE_EVERY_MS;
    if (pending.size === 0 && !prune) return;
    const touches = Object.fromEntries(pending);
    pending.clear();
    try {
      await db.writeAll((tx) => ({
        touched: Object.keys(touches).length > 0 ? touchSessionsStatement(tx, touches) : undefined,
        pruned: prune ? pruneSessionsRows(tx, at - PRUNE_AFTER_MS, idleMs) : undefined,
      }));
      if (prune) prunedAt = at;
    } catch (error) {
      // A lost note costs a minute of lastSeenAt at most: the next request notes it again.
      for (const id of Object.keys(touches)) recent.delete(id);
      logger.warn({ err: error }, "session activity not written");
    }
  }

  return {
    seen(sessionId, lastSeenAt, at) {
      if (at - Math.max(lastSeenAt, recent.get(sessionId) ?? 0) < SEEN_EVERY_MS) return;
      recent.set(sessionId, at);
      pending.set(sessionId, at);
      timer ??= setTimeout(flush, FLUSH_AFTER_MS);
      timer.unref?.();
    },
    flush,
  };
}
