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
 * keeps house: it resolves password-reset requests (the request itself never looks the address
 * up, so known and unknown addresses cost it the same) and erases raw tokens whose mail was
 * sent, given up or skipped, or whose token expired.
 */
import { and, asc, eq, inArray, isNotNull, lte, or, sql, type SQL } from "drizzle-orm";
import type { Logger } from "pino";
import type { Database, Db } from "../../db/client";
import type { Statement } from "../../db/database";
import { bound, prepared } from "../../db/prepared";
import { isBusy } from "../../db/errors";
import type { SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import { outbox, users } from "../../db/schema";
import type { Metrics } from "../../metrics";
import type { Tracing } from "../../tracing";
import { forgetExpired } from "../account/service";
import { issueToken } from "../account/tokens";
import { GiveUp, type Channel, type Outcome, type Row } from "./channels";
import { TOKEN_KINDS } from "./templates";

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

/** The columns of one channel's state, and how to write them. */
const COLUMNS = {
  webhook: {
    status: outbox.webhookStatus,
    next: outbox.webhookNextAttemptAt,
    set: (v: { status?: string; attempts?: number | SQL; next?: Date; sentAt?: Date; lastError?: string | null }) => ({
      webhookStatus: v.status,
      webhookAttempts: v.attempts,
      webhookNextAttemptAt: v.next,
      webhookSentAt: v.sentAt,
      webhookLastError: v.lastError,
    }),
    attemptsOf: (row: Row) => row.webhookAttempts,
    attemptsColumn: outbox.webhookAttempts,
  },
  mail: {
    status: outbox.mailStatus,
    next: outbox.mailNextAttemptAt,
    set: (v: { status?: string; attempts?: number | SQL; next?: Date; sentAt?: Date; lastError?: string | null }) => ({
      mailStatus: v.status,
      mailAttempts: v.attempts,
      mailNextAttemptAt: v.next,
      mailSentAt: v.sentAt,
      mailLastError: v.lastError,
    }),
    attemptsOf: (row: Row) => row.mailAttempts,
    attemptsColumn: outbox.mailAttempts,
  },
} as const;

/** Drops the undefined keys drizzle would otherwise write as NULL. */
const defined = <T extends Record<string, unknown>>(values: T) => Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;

type ChannelName = keyof typeof COLUMNS;

/**
 * One statement picks a channel's due rows, longest due first, and leases them, so no other
 * sender takes them meanwhile; prepared once per channel. `now` compares in the stored form (ms); `leaseUntil`,
 * a column's value, is a Date.
 */
const claimDue = prepared((tx: Db, channel: string) => {
  const columns = COLUMNS[channel as ChannelName];
  const due = tx
    .select({ id: outbox.id })
    .from(outbox)
    .where(and(eq(columns.status, "pending"), lte(columns.next, sql.placeholder("now"))))
    // The due index's own order (status, due time, id): the first rows are read off it. By id
    // alone, every pass sorted the whole backlog (1 ms a pass at 10,000 due, creates outrunning the sender).
    .orderBy(asc(columns.next), asc(outbox.id))
    .limit(sql.placeholder("limit"));
  return tx
    .update(outbox)
    .set(defined(columns.set({ next: sql.placeholder("leaseUntil") as unknown as Date })))
    .where(inArray(outbox.id, due))
    .returning()
    .prepare();
});

/**
 * Marks a batch of delivered rows in one statement (their ids as a JSON array), prepared once
 * per channel and outcome: the sender writes once per batch, not once per notification.
 */
const markDelivered = prepared((tx: Db, shape: string) => {
  const [channel, outcome] = shape.split("|") as [ChannelName, Outcome];
  const columns = COLUMNS[channel];
  const set = columns.set({
    status: outcome,
    attempts: sql`${columns.attemptsColumn} + 1`,
    sentAt: outcome === "sent" ? (sql.placeholder("at") as unknown as Date) : undefined,
    lastError: null,
  });
  return tx
    .update(outbox)
    .set(defined(set))
    .where(sql`${outbox.id} in (select value from json_each(${sql.placeholder("ids")}))`)
    .prepare();
});

/** An error text for the row and the log, without the recipient's address (SMTP servers like to quote it). */
function errorText(error: unknown, row: Row) {
  const message = String((error as Error)?.message ?? error).slice(0, 500);
  return row.recipient ? message.replaceAll(row.recipient, "<recipient>") : message;
}

const tokensToErase = prepared((tx: Db) => {
  // Created before a placeholder's time, in the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
  const expired = (kind: keyof typeof TOKEN_KINDS) => and(eq(outbox.kind, kind), lte(outbox.createdAt, sql.placeholder(kind)));
  return tx
    .update(outbox)
    .set({ token: null })
    .where(and(isNotNull(outbox.token), or(inArray(outbox.mailStatus, ["sent", "failed", "skipped"]), expired("VERIFY_EMAIL"), expired("PASSWORD_RESET"))))
    .prepare();
});

/**
 * Raw tokens leave the database once their mail is settled or they have expired: a statement of
 * the housekeeping's unit. Only rows that still hold a token are looked at (outbox_token_idx).
 */
export const eraseTokens = (tx: Db, now: number) => bound(tokensToErase(tx), { VERIFY_EMAIL: now - TOKEN_KINDS.VERIFY_EMAIL, PASSWORD_RESET: now - TOKEN_KINDS.PASSWORD_RESET });

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

  /** Password-reset requests: a known address gets its token now, an unknown one is dropped on every channel. */
  async function resolveResets() {
    const waiting = await db.select({ id: outbox.id, recipient: outbox.recipient }).from(outbox).where(eq(outbox.webhookStatus, "resolving")).limit(batchSize);
    for (const row of waiting) {
      await db.write(async (tx) => {
        // Another instance's sender may have resolved it since the read: resolved (and sent) once.
        const [waits] = await tx
          .select({ id: outbox.id })
          .from(outbox)
          .where(and(eq(outbox.id, row.id), eq(outbox.webhookStatus, "resolving")));
        if (!waits) return;
        const [user] = row.recipient ? await tx.select({ id: users.id, active: users.active }).from(users).where(eq(users.email, row.recipient)) : [];
        if (!user?.active) {
          await tx.update(outbox).set({ webhookStatus: "skipped", mailStatus: "skipped" }).where(eq(outbox.id, row.id));
          return;
        }
        const token = await issueToken(tx, user.id, "PASSWORD_RESET", now());
        const at = new Date(now());
        await tx
          .update(outbox)
          .set({ payload: { userId: user.id }, token, webhookStatus: "pending", webhookNextAttemptAt: at, mailStatus: "pending", mailNextAttemptAt: at })
          .where(eq(outbox.id, row.id));
      });
    }
  }

  const updateRow = (id: number, values: SQLiteUpdateSetSource<typeof outbox>) => db.writeAll((tx) => [tx.update(outbox).set(values).where(eq(outbox.id, id))]);

  /** A failed attempt: retried later with backoff, or given up after maxAttempts. */
  async function settleFailure(channel: Channel, row: Row, outcome: PromiseRejectedResult) {
    const columns = COLUMNS[channel.name];
    const attempts = columns.attemptsOf(row) + 1;
    const lastError = errorText(outcome.reason, row);
    const log = { outboxId: row.id, kind: row.kind, channel: channel.name, attempts, error: lastError };
    if (outcome.reason instanceof GiveUp || attempts >= maxAttempts) {
      await updateRow(row.id, defined(columns.set({ status: "failed", attempts, lastError })));
      metrics?.notificationsFailed.inc({ channel: channel.name });
      logger.error(log, "notification delivery failed for good");
      return;
    }
    const delay = retryDelay(attempts, baseDelayMs, maxDelayMs);
    await updateRow(row.id, defined(columns.set({ attempts, lastError, next: new Date(now() + delay) })));
    logger.warn({ ...log, retryInMs: delay }, "notification delivery failed");
  }

  async function runChannel(channel: Channel) {
    const at = now();
    const [claimed] = (await db.writeAll((tx) => [bound(claimDue(tx, channel.name), { now: at, limit: batchSize, leaseUntil: new Date(at + leaseMs) })])) as unknown as [Row[]];
    const deliver = (row: Row) =>
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
    const marks = (Object.entries(delivered) as [Outcome, number[]][])
      .filter(([, ids]) => ids.length > 0)
      .map(
        ([outcome, ids]) =>
          (tx: Db) =>
            bound(markDelivered(tx, `${channel.name}|${outcome}`), { ids: JSON.stringify(ids), at: new Date(now()) }),
      );
    if (marks.length > 0) await db.writeAll((tx) => marks.map((mark) => mark(tx)) as unknown as [Statement, ...Statement[]]);
    return claimed.length;
  }

  /** Resolving reset requests, skipping mail without SMTP, erasing tokens: before and beside the channels. */
  async function housekeeping() {
    await resolveResets();
    await db.writeAll((tx) => {
      const tidy = [eraseTokens(tx, now()), ...forgetExpired(tx, now())] as const;
      // Without SMTP there is no e-mail: the mail channel has nothing to do.
      return hasMail ? tidy : ([tx.update(outbox).set({ mailStatus: "skipped" }).where(eq(outbox.mailStatus, "pending")), ...tidy] as const);
    });
    return 0;
  }

  // Each channel runs its own loop, so a slow webhook never slows the mail down (or the other way round).
  let stopped = false;
  const wakers = new Set<() => void>();
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
      if ((attempted < batchSize || backoffMs > 0) && !stopped) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            wakers.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, backoffMs || pollIntervalMs);
          wakers.add(wake);
        });
      }
    }
  };
  const loops = Promise.all([repeat(housekeeping), ...channels.map((channel) => repeat(() => runChannel(channel)))]);

  return {
    async stop() {
      stopped = true;
      for (const wake of [...wakers]) wake();
      await loops;
    },
  };
}
