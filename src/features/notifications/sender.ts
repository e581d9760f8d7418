/**
 * The outbox sender: a background loop that delivers pending outbox rows to NOTIFY_WEBHOOK_URL
 * (a JSON POST with a timeout), or logs them (logger "outbox") when no URL is set. All its
 * state is in the table (attempts, next_attempt_at, delivered_at), so a restart picks up where
 * the last process stopped, and several processes can share one database: a batch of due rows
 * is claimed by one UPDATE (a lease) before it is sent, and the batch is sent concurrently.
 * Delivery is at least once and unordered; receivers de-duplicate by the Idempotency-Key
 * header. A failure never touches the change it describes.
 */
import { and, asc, eq, inArray, isNull, lte, sql } from "drizzle-orm";
import type { Logger } from "pino";
import type { Database } from "../../db/client";
import { outbox } from "../../db/schema";

export interface OutboxSenderOptions {
  db: Database;
  logger: Logger;
  webhookUrl?: string;
  /** Pause between passes when nothing is due. */
  pollIntervalMs?: number;
  /** Per delivery attempt. */
  timeoutMs?: number;
  batchSize?: number;
  /** First retry delay; doubles each failure up to maxDelayMs. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** How long a claimed row is hidden from other senders (longer than any attempt). */
  leaseMs?: number;
  now?: () => number;
}

export interface OutboxSender {
  /** One pass over the due rows; returns how many it attempted. */
  runOnce(): Promise<number>;
  /** Ends the loop after the attempt in flight. */
  stop(): Promise<void>;
}

type Row = typeof outbox.$inferSelect;

export function retryDelay(attempts: number, baseDelayMs: number, maxDelayMs: number) {
  return Math.min(baseDelayMs * 2 ** Math.max(0, attempts - 1), maxDelayMs);
}

export function startOutboxSender(options: OutboxSenderOptions): OutboxSender {
  const { db, logger, webhookUrl } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const timeoutMs = options.timeoutMs ?? 5000;
  const batchSize = options.batchSize ?? 20;
  const baseDelayMs = options.baseDelayMs ?? 1000;
  const maxDelayMs = options.maxDelayMs ?? 5 * 60_000;
  const leaseMs = options.leaseMs ?? Math.max(timeoutMs * 2, 30_000);
  const now = options.now ?? Date.now;

  async function deliver(row: Row) {
    const notification = { id: row.id, kind: row.kind, recipient: row.recipient, payload: row.payload, createdAt: row.createdAt.toISOString() };
    if (!webhookUrl) {
      logger.info({ notification }, "notification");
      return;
    }
    const response = await fetch(webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": `outbox-${row.id}` },
      body: JSON.stringify(notification),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`webhook answered ${response.status}`);
  }

  async function failed(row: Row, error: unknown) {
    const attempts = row.attempts + 1;
    const delay = retryDelay(attempts, baseDelayMs, maxDelayMs);
    const lastError = String((error as Error)?.message ?? error).slice(0, 500);
    await db.writeAll((tx) => [tx.update(outbox).set({ attempts, lastError, nextAttemptAt: new Date(now() + delay) }).where(eq(outbox.id, row.id))]);
    logger.warn({ outboxId: row.id, kind: row.kind, attempts, retryInMs: delay, error: lastError }, "notification delivery failed");
  }

  async function runOnce() {
    // One statement picks the due rows and leases them, so no other sender takes them meanwhile.
    const [claimed] = await db.writeAll((tx) => {
      const due = tx
        .select({ id: outbox.id })
        .from(outbox)
        .where(and(isNull(outbox.deliveredAt), lte(outbox.nextAttemptAt, new Date(now()))))
        .orderBy(asc(outbox.id))
        .limit(batchSize);
      return [tx.update(outbox).set({ nextAttemptAt: new Date(now() + leaseMs) }).where(inArray(outbox.id, due)).returning()];
    });
    const outcomes = await Promise.allSettled(claimed.map(deliver));
    const delivered = claimed.filter((_, i) => outcomes[i].status === "fulfilled").map((row) => row.id);
    if (delivered.length > 0) {
      await db.writeAll((tx) => [
        tx
          .update(outbox)
          .set({ deliveredAt: new Date(now()), attempts: sql`${outbox.attempts} + 1`, lastError: null })
          .where(inArray(outbox.id, delivered)),
      ]);
    }
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome.status === "rejected") await failed(claimed[i], outcome.reason);
    }
    return claimed.length;
  }

  let stopped = false;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    while (!stopped) {
      let attempted = 0;
      try {
        attempted = await runOnce();
      } catch (error) {
        logger.error({ err: error }, "outbox pass failed");
      }
      // A full batch means more may be due: go again at once.
      if (attempted < batchSize && !stopped) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollIntervalMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  })();

  return {
    runOnce,
    async stop() {
      stopped = true;
      wake?.();
      await loop;
    },
  };
}
