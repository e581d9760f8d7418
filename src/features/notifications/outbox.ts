/**
 * The transactional outbox and the audit trail. Callers pass their unit of work's `tx`, so the
 * notification or audit row commits (or rolls back) with the change it describes; a
 * background sender (sender.ts) delivers the outbox later, on each channel independently.
 */
import { getTableColumns, is, Placeholder, sql, SQL } from "drizzle-orm";
import type { Db } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import { auditLog, outbox } from "../../db/schema";
import { currentTraceparent } from "../../tracing";

export type NotificationKind =
  | "WELCOME"
  | "VERIFY_EMAIL"
  | "PASSWORD_RESET"
  | "PASSWORD_CHANGED"
  | "EMAIL_CHANGED"
  | "USER_UPDATED"
  | "ORDER_CREATED"
  | "PAYMENT_SUCCESS"
  | "PAYMENT_FAILED";

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

const insertAudit = prepared((tx: Db) =>
  tx
    .insert(auditLog)
    .values({
      action: sql.placeholder("action"),
      actor: sql.placeholder("actor"),
      subjectType: sql.placeholder("subjectType"),
      subjectId: sql.placeholder("subjectId"),
      details: sql.placeholder("details"),
      createdAt: sql.placeholder("at"),
    })
    .prepare(),
);

export interface EnqueueOptions {
  /** The raw verify/reset token the mail's link carries (never part of the payload). */
  token?: string;
  /** The sender looks the recipient's address up before anything is sent (password reset requests). */
  resolve?: boolean;
}

export async function enqueueNotification(
  tx: Db,
  kind: NotificationKind,
  recipient: string | null,
  payload: Record<string, unknown>,
  now = new Date(),
  options: EnqueueOptions = {},
) {
  await insertNotification(tx).run(notificationValues(kind, recipient, payload, now, options));
}

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
  now = new Date(),
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
export function notificationSelection(kind: NotificationKind, recipient: string | null, payload: SQL, now = new Date()) {
  const row: Record<string, unknown> = newRow(kind, recipient, payload, now, {});
  const fields = Object.entries(getTableColumns(outbox)).map(([key, column]) => {
    const value = row[key];
    // A placeholder's value is given in the column's stored form (a prepared statement's caller's part).
    const expression = value === undefined || value === null ? sql`null` : is(value, SQL) || is(value, Placeholder) ? sql`${value}` : sql`${column.mapToDriverValue(value)}`;
    return [key, expression.as(column.name)];
  });
  return Object.fromEntries(fields) as Record<keyof typeof outbox.$inferSelect, SQL.Aliased>;
}

export interface AuditRecord {
  action: string;
  actor: string;
  subjectType: string;
  subjectId: string | number;
  details?: Record<string, unknown>;
}

const auditValues = (entry: AuditRecord, now: Date) => ({ ...entry, subjectId: String(entry.subjectId), details: entry.details ?? null, at: now });

export async function writeAudit(tx: Db, entry: AuditRecord, now = new Date()) {
  await insertAudit(tx).run(auditValues(entry, now));
}

/** The same row as a (prepared) statement of a list unit: it commits with the change it describes, in the same batch. */
export const auditStatement = (tx: Db, entry: AuditRecord, now = new Date()) => bound(insertAudit(tx), auditValues(entry, now));
