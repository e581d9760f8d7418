/**
 * The transactional outbox (outbox): callers pass their unit of work's `tx`, so the notification
 * row commits (or rolls back) with the change it describes; the notifications feature's sender
 * delivers it later, on each channel independently, with the statements below.
 */
import { and, asc, count, desc, eq, getTableColumns, inArray, is, lte, or, Placeholder, sql, SQL } from "drizzle-orm";
import type { SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import type { Database, Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { outbox } from "../db/schema";
import { withPage, type Page } from "../paging";
import { currentTraceparent } from "../tracing";

export type NotificationKind =
  | "WELCOME"
  | "VERIFY_EMAIL"
  | "PASSWORD_RESET"
  | "PASSWORD_CHANGED"
  | "EMAIL_CHANGED"
  | "USER_UPDATED"
  | "ORDER_CREATED"
  | "PAYMENT_SUCCESS"
  | "PAYMENT_FAILED"
  | "LOGIN_LOCKED"
  | "NEW_SIGN_IN"
  | "API_KEY_CREATED"
  | "MFA_ENABLED"
  | "MFA_DISABLED"
  | "PASSKEY_ADDED"
  | "RECOVERY_CODE_USED"
  | "IDENTITY_LINKED"
  | "MFA_ENROL_CODE";

const insertNotification = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .values({
      kind: sql.placeholder("kind"),
      recipient: sql.placeholder("recipient"),
      payload: sql.placeholder("payload"),
      token: sql.placeholder("token"),
      createdAt: sql.placeholder("at"),
      webhookStatus: sql.placeholder("status"),
      webhookNextAttemptAt: sql.placeholder("at"),
      mailStatus: sql.placeholder("status"),
      mailNextAttemptAt: sql.placeholder("at"),
      traceparent: sql.placeholder("traceparent"),
    })
    .prepare(),
);

export interface EnqueueOptions {
  /** The raw verify/reset token the mail's link carries, or the code it gives (never part of the payload). */
  token?: string;
  /** The sender looks the recipient's address up before anything is sent (password reset requests). */
  resolve?: boolean;
}

export async function enqueueNotification(tx: Db, kind: NotificationKind, recipient: string | null, payload: Record<string, unknown>, now: Date, options: EnqueueOptions = {}) {
  await insertNotification(tx).run(notificationValues(kind, recipient, payload, now, options));
}

/** The same, as a statement of a list unit. */
export const enqueuedNotification = (tx: Db, kind: NotificationKind, recipient: string | null, payload: Record<string, unknown>, now: Date) =>
  bound(insertNotification(tx), notificationValues(kind, recipient, payload, now, {}));

/** One outbox row's values: every channel starts pending (or resolving) and due at once. */
const notificationValues = <P>(kind: NotificationKind, recipient: string | null, payload: P, at: Date, options: EnqueueOptions) => ({
  kind,
  recipient,
  payload,
  token: options.token ?? null,
  status: options.resolve ? "resolving" : "pending",
  at,
  traceparent: currentTraceparent(),
});

/**
 * The values of a prepared statement that writes an outbox row (notificationStatement,
 * notificationSelection): its own placeholders' and the trace context of the unit it runs in,
 * given each time it is bound (a prepared statement must not keep the first caller's).
 */
export const traced = <V extends Record<string, unknown>>(values: V) => ({ ...values, traceparent: currentTraceparent() });

/** The outbox row's columns with their values when a notification is enqueued (id, sent and error columns NULL); its trace context a placeholder (`traced`). */
function newRow(kind: NotificationKind, recipient: string | null, payload: Record<string, unknown> | SQL, now: Date, options: EnqueueOptions) {
  const { status, at, ...row } = notificationValues(kind, recipient, payload, now, options);
  return {
    ...row,
    traceparent: sql.placeholder("traceparent"),
    createdAt: at,
    webhookStatus: status,
    webhookAttempts: 0,
    webhookNextAttemptAt: at,
    mailStatus: status,
    mailAttempts: 0,
    mailNextAttemptAt: at,
  };
}

/**
 * The same row as a statement of a list unit, where the payload may be SQL (e.g. a json_object
 * of the id a statement before has just inserted): one round trip to a remote primary.
 */
export function notificationStatement(
  tx: Pick<Db, "insert">,
  kind: NotificationKind,
  recipient: string | null,
  payload: Record<string, unknown> | SQL,
  now: Date,
  options: EnqueueOptions = {},
) {
  const row = newRow(kind, recipient, payload, now, options);
  // Cast: the payload column is typed per notification kind; this row carries any of them.
  return tx.insert(outbox).values({ ...row, payload: row.payload as never });
}

/**
 * The same row as a selection for INSERT … SELECT, so a list unit can enqueue it only where a
 * condition holds (e.g. the statement before settled the order): every column of the table, in
 * its order, as drizzle's insert-select wants.
 */
export function notificationSelection(kind: NotificationKind, recipient: string | null, payload: SQL, now: Date) {
  const row: Record<string, unknown> = newRow(kind, recipient, payload, now, {});
  const fields = Object.entries(getTableColumns(outbox)).map(([key, column]) => {
    const value = row[key];
    // A placeholder's value is given in the column's stored form (a prepared statement's caller's part).
    const expression = value === undefined || value === null ? sql`null` : is(value, SQL) || is(value, Placeholder) ? sql`${value}` : sql`${column.mapToDriverValue(value)}`;
    return [key, expression.as(column.name)];
  });
  return Object.fromEntries(fields) as Record<keyof typeof outbox.$inferSelect, SQL.Aliased>;
}

export type OutboxRow = typeof outbox.$inferSelect;
export type ChannelName = "webhook" | "mail";
/** How a delivered row ends on a channel. */
export type Outcome = "sent" | "skipped";

/** The columns of one channel's state, and how to write them. */
const COLUMNS = {
  webhook: {
    status: outbox.webhookStatus,
    next: outbox.webhookNextAttemptAt,
    set: (v: ChannelState) => ({
      webhookStatus: v.status,
      webhookAttempts: v.attempts,
      webhookNextAttemptAt: v.next,
      webhookSentAt: v.sentAt,
      webhookLastError: v.lastError,
    }),
    attemptsOf: (row: OutboxRow) => row.webhookAttempts,
    attemptsColumn: outbox.webhookAttempts,
  },
  mail: {
    status: outbox.mailStatus,
    next: outbox.mailNextAttemptAt,
    set: (v: ChannelState) => ({
      mailStatus: v.status,
      mailAttempts: v.attempts,
      mailNextAttemptAt: v.next,
      mailSentAt: v.sentAt,
      mailLastError: v.lastError,
    }),
    attemptsOf: (row: OutboxRow) => row.mailAttempts,
    attemptsColumn: outbox.mailAttempts,
  },
} as const satisfies Record<ChannelName, unknown>;

type ChannelState = { status?: string; attempts?: number | SQL; next?: Date; sentAt?: Date; lastError?: string | null };

/** Drops the undefined keys drizzle would otherwise write as NULL. */
const defined = <T extends Record<string, unknown>>(values: T) => Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;

/** The attempts a row has used on a channel so far. */
export const attemptsOn = (channel: ChannelName, row: OutboxRow) => COLUMNS[channel].attemptsOf(row);

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
    .set(defined(columns.set({ next: placeholder<Date>("leaseUntil") })))
    .where(inArray(outbox.id, due))
    .returning()
    .prepare();
});

/** Leases up to `limit` rows due on the channel at `now` until `leaseUntil`, as a unit of its own: the rows claimed. */
export async function claimDueRows(db: Database, channel: ChannelName, now: number, limit: number, leaseUntil: Date): Promise<OutboxRow[]> {
  const [claimed] = await db.writeAll((tx) => [bound(claimDue(tx, channel), { now, limit, leaseUntil })]);
  return claimed;
}

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
    sentAt: outcome === "sent" ? placeholder<Date>("at") : undefined,
    lastError: null,
  });
  return tx
    .update(outbox)
    .set(defined(set))
    .where(sql`${outbox.id} in (select value from json_each(${sql.placeholder("ids")}))`)
    .prepare();
});

/** Records the delivered rows of a channel by outcome, as one unit (nothing when none was delivered). */
export async function markDeliveredRows(db: Database, channel: ChannelName, delivered: Record<Outcome, number[]>, at: Date) {
  const outcomes = (Object.entries(delivered) as [Outcome, number[]][]).filter(([, ids]) => ids.length > 0);
  if (outcomes.length === 0) return;
  await db.writeAll((tx) => outcomes.map(([outcome, ids]) => bound(markDelivered(tx, `${channel}|${outcome}`), { ids: JSON.stringify(ids), at })));
}

/** A failed attempt on a channel: its attempts and last error, and either when it is tried again or that it failed for good. */
export async function recordAttempt(db: Database, channel: ChannelName, id: number, state: { attempts: number; lastError: string; next?: Date; failed?: true }) {
  const values: SQLiteUpdateSetSource<typeof outbox> = defined(
    COLUMNS[channel].set(
      state.failed ? { status: "failed", attempts: state.attempts, lastError: state.lastError } : { attempts: state.attempts, lastError: state.lastError, next: state.next },
    ),
  );
  await db.writeAll((tx) => [tx.update(outbox).set(values).where(eq(outbox.id, id))]);
}

const pendingMailSkipped = prepared((tx: Db) => tx.update(outbox).set({ mailStatus: "skipped" }).where(eq(outbox.mailStatus, "pending")).prepare());

/** Without SMTP there is no e-mail: every pending mail is skipped (a statement of the housekeeping's unit). */
export const skipPendingMail = (tx: Db) => bound(pendingMailSkipped(tx), {});

const resolving = prepared((db: Reader) =>
  db.select({ id: outbox.id, recipient: outbox.recipient }).from(outbox).where(eq(outbox.webhookStatus, "resolving")).limit(sql.placeholder("limit")).prepare(),
);

/** Password-reset requests that wait for their address to be looked up (the oldest first, by id). */
export const resolvingRows = async (db: Reader, limit: number) => await resolving(db).all({ limit });

/** Whether a reset request still waits to be resolved (read inside the unit that resolves it). */
export const stillResolving = async (tx: Db, id: number) =>
  (
    await tx
      .select({ id: outbox.id })
      .from(outbox)
      .where(and(eq(outbox.id, id), eq(outbox.webhookStatus, "resolving")))
  ).length > 0;

/** A waiting reset request for an unknown or inactive address: dropped on every channel. */
export const dropRequest = (tx: Db, id: number) => tx.update(outbox).set({ webhookStatus: "skipped", mailStatus: "skipped" }).where(eq(outbox.id, id));

/** A waiting reset request for a known address: its token and user, and due on every channel now. */
export const releaseRequest = (tx: Db, id: number, userId: number, token: string, at: Date) =>
  tx.update(outbox).set({ payload: { userId }, token, webhookStatus: "pending", webhookNextAttemptAt: at, mailStatus: "pending", mailNextAttemptAt: at }).where(eq(outbox.id, id));

/** The outbox newest first, one page, optionally only rows with a status on either channel or of one kind; with the total. */
export async function readOutbox(db: Reader, filters: { status?: string; kind?: string }, page: Page): Promise<{ rows: OutboxRow[]; total: number }> {
  const where = and(
    filters.status ? or(eq(outbox.webhookStatus, filters.status), eq(outbox.mailStatus, filters.status)) : undefined,
    filters.kind ? eq(outbox.kind, filters.kind) : undefined,
  );
  const [rows, [{ total }]] = await Promise.all([
    withPage(db.select().from(outbox).where(where).orderBy(desc(outbox.id)).$dynamic(), page),
    db.select({ total: count() }).from(outbox).where(where),
  ]);
  return { rows, total };
}
