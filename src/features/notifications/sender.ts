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
 *
 * An idle server's sender sleeps: a loop passes again (at most once per poll interval, at once
 * after a full batch) only when a unit of this process has committed since its last pass
 * (db.onCommit; the sender's own claims and housekeeping are quiet units, which wake nobody) or
 * a row of its channel is due (a retry's backoff ends, another sender's lease runs out). Otherwise it
 * sleeps up to `idleIntervalMs` (a minute): rows written by another instance that died before
 * sending them, and the time-based housekeeping (expired tokens, old lockouts, unused devices),
 * are picked up by that pass. A server that passes every second builds drizzle SQL every second,
 * and the JIT compiles that code to its top tier (~6 MiB of idle RSS within 30 s, README).
 */
import type { Logger } from "pino";
import type { Database } from "../../db/database";
import { isBusy } from "../../db/errors";
import type { Metrics } from "../../metrics";
import { eraseTokens, forgetExpiredTokens, resolvePasswordResets } from "../../store/account-tokens";
import { attemptsOn, claimDueRows, markDeliveredRows, nextDueAt, recordAttempt, skipPendingMail, type Outcome, type OutboxRow } from "../../store/outbox";
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
  /** The longest sleep while nothing is committed and nothing due (rows of an instance that died, time-based housekeeping). */
  idleIntervalMs?: number;
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

/** One loop's work: a pass (answering how many rows it attempted), and when its next row is due (ms), if any. */
interface Loop {
  pass(): Promise<number>;
  nextDue?(): Promise<number | undefined>;
}

/** The driver's own message, not drizzle's wrapper: that one lists the query's parameters (addresses). */
const reasonOf = (error: unknown) => {
  const reason = (error as { cause?: unknown })?.cause ?? error;
  return String((reason as Error)?.message ?? reason);
};

/**
 * Runs each loop until stopped: again at once after a full batch (more may be due), after the
 * poll interval otherwise, and backing off while the database is busy. After the poll interval a
 * loop whose pass saw no commit since it began sleeps until a commit, its next due row or the idle interval.
 */
function runLoops(
  db: Database,
  loops: Loop[],
  {
    batchSize,
    pollIntervalMs,
    idleIntervalMs,
    maxDelayMs,
    logger,
    metrics,
    now,
  }: {
    batchSize: number;
    pollIntervalMs: number;
    idleIntervalMs: number;
    maxDelayMs: number;
    logger: Logger;
    metrics: OutboxSenderOptions["metrics"];
    now: () => number;
  },
): OutboxSender {
  let stopped = false;
  /** Units committed (and announced) since the sender started: a loop compares it with the count its pass began at. */
  let commits = 0;
  const wakers = new Set<() => void>();
  const idle = new Set<() => void>();
  const pause = (ms: number, sleepers = wakers) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        idle.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
      sleepers.add(wake);
    });
  // Per commit: a counter, and the idle loops woken (none while the loops are busy).
  const unsubscribe = db.onCommit(() => {
    commits++;
    if (idle.size > 0) for (const wake of [...idle]) wake();
  });
  /** After a pass that began at `seen` commits: sleeps while nothing is committed or due, at most the idle interval. */
  const rest = async (loop: Loop, seen: number) => {
    let due: number | undefined;
    try {
      due = await loop.nextDue?.();
    } catch (error) {
      logger.error({ error: reasonOf(error) }, "outbox due time not read");
      return;
    }
    const sleepMs = due === undefined ? idleIntervalMs : Math.min(idleIntervalMs, due - now());
    if (commits === seen && sleepMs > 0 && !stopped) await pause(sleepMs, idle);
  };
  const repeat = async (loop: Loop) => {
    let backoffMs = 0;
    while (!stopped) {
      const seen = commits;
      let attempted = 0;
      try {
        attempted = await loop.pass();
        backoffMs = 0;
      } catch (error) {
        if (isBusy(error)) {
          // Another writer kept the lock: normal under load, and the rows wait in the table.
          // Back off (doubling, up to maxDelayMs) instead of competing with the requests.
          backoffMs = Math.min(backoffMs ? backoffMs * 2 : pollIntervalMs * 2, maxDelayMs);
          metrics?.outboxContention.inc();
          logger.debug({ retryInMs: backoffMs }, "outbox pass met a busy database; backing off");
        } else logger.error({ error: reasonOf(error) }, "outbox pass failed");
      }
      // A full batch means more may be due: go again at once (unless the database was busy).
      if (stopped || (attempted >= batchSize && backoffMs === 0)) continue;
      await pause(backoffMs || pollIntervalMs);
      if (backoffMs === 0 && commits === seen && !stopped) await rest(loop, seen);
    }
  };
  const running = Promise.all(loops.map(repeat));
  return {
    async stop() {
      stopped = true;
      unsubscribe();
      for (const wake of [...wakers]) wake();
      await running;
    },
  };
}

export function startOutboxSender(options: OutboxSenderOptions): OutboxSender {
  const { db, logger, channels, metrics, tracing } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const idleIntervalMs = options.idleIntervalMs ?? 60_000;
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
    if (claimed.length === 0) return 0;
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

  /** Resolving reset requests, skipping mail without SMTP, erasing tokens: before and beside the channels. */
  async function housekeeping() {
    await resolvePasswordResets(db, batchSize, now);
    await db.writeAll(
      (tx) => ({
        // Without SMTP there is no e-mail: the mail channel has nothing to do.
        skipped: hasMail ? undefined : skipPendingMail(tx),
        erased: eraseTokens(tx, now()),
        expired: forgetExpiredTokens(tx, now()),
        ended: forgetEndedResetWindows(tx, now()),
        lockouts: forgetOldLockouts(tx, now()),
        devices: forgetStaleDevices(tx, now()),
      }),
      // Nothing it does makes a row due, so it wakes no loop (resolving a request, above, does).
      { quiet: true },
    );
    return 0;
  }

  // Each channel runs its own loop, so a slow webhook never slows the mail down (or the other way round).
  const channelLoops = channels.map((channel): Loop => ({ pass: () => runChannel(channel), nextDue: () => nextDueAt(db, channel.name) }));
  return runLoops(db, [{ pass: housekeeping }, ...channelLoops], { batchSize, pollIntervalMs, idleIntervalMs, maxDelayMs, logger, metrics, now });
}
