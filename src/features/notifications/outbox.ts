/**
 * The transactional outbox and the audit trail. Callers pass their unit of work's `tx`, so the
 * notification or audit row commits (or rolls back) with the change it describes; a
 * background sender (sender.ts) delivers the outbox later.
 */
import { sql } from "drizzle-orm";
import type { Db } from "../../db/client";
import { prepared } from "../../db/prepared";
import { auditLog, outbox } from "../../db/schema";

export type NotificationKind = "WELCOME" | "USER_UPDATED" | "ORDER_CREATED" | "PAYMENT_SUCCESS";

const insertNotification = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .values({ kind: sql.placeholder("kind"), recipient: sql.placeholder("recipient"), payload: sql.placeholder("payload"), createdAt: sql.placeholder("at"), nextAttemptAt: sql.placeholder("at") })
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

export async function enqueueNotification(tx: Db, kind: NotificationKind, recipient: string | null, payload: Record<string, unknown>, now = new Date()) {
  await insertNotification(tx).run({ kind, recipient, payload, at: now });
}

export async function writeAudit(
  tx: Db,
  entry: { action: string; actor: string; subjectType: string; subjectId: string | number; details?: Record<string, unknown> },
  now = new Date(),
) {
  await insertAudit(tx).run({ ...entry, subjectId: String(entry.subjectId), details: entry.details ?? null, at: now });
}
