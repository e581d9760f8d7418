/**
 * The outbox sender: a background loop that delivers pending outbox rows on each channel
 * (channels.ts) independently: each channel has its own status, attempts, backoff and last
 * error in the row, so a mail server's outage never holds back or repeats the webhook, and the
 * other way round. All state is in the table, so a restart picks up where the last process
 * stopped, and several processes can share one database: a batch of due rows is claimed by one
 * UPDATE (a lease) before it is sent. Delivery is at least once and unordered; receivers
 * de-duplicate by webhook-id / Idempotency-Key, mailboxes by Message-ID. After `maxAttempts`
 * a channel gives up: the row stays in the outbox as failed with its last error, counted in
 * notifications_failed_total. A failure never touches the change the row describes.
 *
 * Each channel runs its own loop (a webhook timing out never slows the mail), and a third loop
 * keeps house with the stores' duties: it resolves password-reset requests, erases raw tokens
 * whose mail was sent, given up or skipped, or whose token expired, and drops expired token
 * hashes, ended reset windows, old login lockouts, ended deviceTokens and devices unused for 90
 * days (store/account-tokens.ts, store/throttle.ts, store/devices.ts).
 */
import type { Logger } from "pino";
import type { Database } from "../../db/database";
import { isBusy } from "../../db/errors";
import type { Metrics } from "../../metrics";
import { eraseTokens, forgetExpiredTokens, resolvePasswordResets } from "../../store/account-tokens";
import { attemptsOn, claimDueRows, markDeliveredRows, recordAttempt, skipPendingMail, type Outcome, type OutboxRow } from "../../store/outbox";
import { forgetStaleDevices } from "../../store/devices";
import { forgetEndedResetWindows, forgetOldLockouts } from "../../store/throttle";
import type { Tracing } from "../../tracing";
import { GiveUp, type Channel } from "./channels";

export interface OutboxSenderOptions {
  db: Database;
  logger: Logger;
  channels: Channel[];
  /** notificationsFailed counts give-ups; outboxContention counts passes that met a busy database and backed off. */
  metrics?: Pick<Metrics, "notificationsFailed" | "outboxContention">;
  /** A span per delivery, continuing the trace that wrote the row. */
  tracing?: Tracing;
  /** Pause between passes when nothing is due. */
  pollIntervalMs?: number;
  batchSize?: number;
  /** First retry delay; doubles each failure up to maxDelayMs. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Attempts per channel before it gives up (about 40 minutes with the default delays). */
  maxAttempts?: number;
  /** How long a claimed row is hidden from other senders (longer than any attempt). */
  leaseMs?: number;
  now?: () => number;
}

export interface OutboxSender {
  /** Ends the loops after the attempts in flight. */
  stop(): Promise<void>;
}

export function retryDelay(attempts: number, baseDelayMs: number, maxDelayMs: number) {
  return Math.min(baseDelayMs * 2 ** Math.max(0, attempts - 1), maxDelayMs);
}

/** An error text for the row and the log, without the recipient's address (SMTP servers like to quote it). */
function errorText(error: unknown, row: OutboxRow) {
  const message = String((error as Error)?.message ?? error).slice(0, 500);
  return row.recipient ? message.replaceAll(row.recipient, "<recipient>") : message;
}

/**
 * Runs each pass in a loop of its own until stopped: again at once after a full batch (more may
 * be due), after the poll interval otherwise, and backing off while the database is busy.
 */
function runLoops(
  passes: (() => Promise<number>)[],
  {
    batchSize,
    pollIntervalMs,
    maxDelayMs,
    logger,
    metrics,
  }: { batchSize: number; pollIntervalMs: number; maxDelayMs: number; logger: Logger; metrics: OutboxSenderOptions["metrics"] },
): OutboxSender {
  let stopped = false;
  const wakers = new Set<() => void>();
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
    });
  const repeat = async (pass: () => Promise<number>) => {
    let backoffMs = 0;
    while (!stopped) {
      let attempted = 0;
      try {
        attempted = await pass();
        backoffMs = 0;
      } catch (error) {
        if (isBusy(error)) {
          // Another writer kept the lock: normal under load, and the rows wait in the table.
          // Back off (doubling, up to maxDelayMs) instead of competing with the requests.
          backoffMs = Math.min(backoffMs ? backoffMs * 2 : pollIntervalMs * 2, maxDelayMs);
          metrics?.outboxContention.inc();
          logger.debug({ retryInMs: backoffMs }, "outbox pass met a busy database; backing off");
        } else {
          // The driver's own message, not drizzle's wrapper: that one lists the query's parameters (addresses).
          const reason = (error as { cause?: unknown })?.cause ?? error;
          logger.error({ error: String((reason as Error)?.message ?? reason) }, "outbox pass failed");
        }
      }
      // A full batch means more may be due: go again at once (unless the database was busy).
      if ((attempted < batchSize || backoffMs > 0) && !stopped) await pause(backoffMs || pollIntervalMs);
    }
  };
  const loops = Promise.all(passes.map(repeat));
  return {
    async stop() {
      stopped = true;
      for (const wake of [...wakers]) wake();
      await loops;
    },
  };
}

export function startOutboxSender(options: OutboxSenderOptions): OutboxSender {
  const { db, logger, channels, metrics, tracing } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const batchSize = options.batchSize ?? 20;
  const baseDelayMs = options.baseDelayMs ?? 1000;
  const maxDelayMs = options.maxDelayMs ?? 5 * 60_000;
  const maxAttempts = options.maxAttempts ?? 15;
  const leaseMs = options.leaseMs ?? 60_000;
  const now = options.now ?? Date.now;
  const hasMail = channels.some((c) => c.name === "mail");

  /** A failed attempt: retried later with backoff, or given up after maxAttempts. */
  async function settleFailure(channel: Channel, row: OutboxRow, outcome: PromiseRejectedResult) {
    const attempts = attemptsOn(channel.name, row) + 1;
    const lastError = errorText(outcome.reason, row);
    const log = { outboxId: row.id, kind: row.kind, channel: channel.name, attempts, error: lastError };
    if (outcome.reason instanceof GiveUp || attempts >= maxAttempts) {
      await recordAttempt(db, channel.name, row.id, { attempts, lastError, failed: true });
      metrics?.notificationsFailed.inc({ channel: channel.name });
      logger.error(log, "notification delivery failed for good");
      return;
    }
    const delay = retryDelay(attempts, baseDelayMs, maxDelayMs);
    await recordAttempt(db, channel.name, row.id, { attempts, lastError, next: new Date(now() + delay) });
    logger.warn({ ...log, retryInMs: delay }, "notification delivery failed");
  }

  async function runChannel(channel: Channel) {
    const at = now();
    const claimed = await claimDueRows(db, channel.name, at, batchSize, new Date(at + leaseMs));
    const deliver = (row: OutboxRow) =>
      tracing
        ? tracing.delivery(`outbox ${channel.name}`, row.traceparent, { "usersvc.outbox.id": row.id, "usersvc.outbox.kind": row.kind }, (traceparent) =>
            channel.deliver({ ...row, traceparent: traceparent ?? null }),
          )
        : channel.deliver(row);
    const outcomes = await Promise.allSettled(claimed.map(deliver));
    const delivered: Record<Outcome, number[]> = { sent: [], skipped: [] };
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome.status === "fulfilled") delivered[outcome.value].push(claimed[i].id);
      else await settleFailure(channel, claimed[i], outcome);
    }
    await markDeliveredRows(db, channel.name, delivered, new Date(now()));
    return claimed.length;
  }

  /**
   * Resolving reset requests, skipping mail without SMTP, erasing tokens: before and beside the channels.
   * Each statement of it is prepared once: built by drizzle's query builder every second, an idle
   * server ran enough of the builder for the JIT to compile it (to FTL) within 30 s, ~4 MiB of RSS.
   */
  async function housekeeping() {
    await resolvePasswordResets(db, batchSize, now);
    await db.writeAll((tx) => ({
      // Without SMTP there is no e-mail: the mail channel has nothing to do.
      skipped: hasMail ? undefined : skipPendingMail(tx),
      erased: eraseTokens(tx, now()),
      expired: forgetExpiredTokens(tx, now()),
      ended: forgetEndedResetWindows(tx, now()),
      lockouts: forgetOldLockouts(tx, now()),
      devices: forgetStaleDevices(tx, now()),
    }));
    return 0;
  }

  // Each channel runs its own loop, so a slow webhook never slows the mail down (or the other way round).
  return runLoops([housekeeping, ...channels.map((channel) => () => runChannel(channel))], { batchSize, pollIntervalMs, maxDelayMs, logger, metrics });
}
