/**
 * The transactional outbox and the audit trail. Callers pass their transaction, so the
 * notification or audit row commits (or rolls back) with the change it describes; a
 * background sender (sender.ts) delivers the outbox later.
 */
import type { Db } from "../../db/client";
import { auditLog, outbox } from "../../db/schema";

export type NotificationKind = "WELCOME" | "USER_UPDATED" | "ORDER_CREATED" | "PAYMENT_SUCCESS";

/** A unit of work's handle (src/db/database.ts). */
type Writer = Pick<Db, "insert">;

export async function enqueueNotification(tx: Writer, kind: NotificationKind, recipient: string | null, payload: Record<string, unknown>, now = new Date()) {
  await tx.insert(outbox).values({ kind, recipient, payload, createdAt: now, nextAttemptAt: now });
}

export async function writeAudit(
  tx: Writer,
  entry: { action: string; actor: string; subjectType: string; subjectId: string | number; details?: Record<string, unknown> },
  now = new Date(),
) {
  await tx.insert(auditLog).values({ ...entry, subjectId: String(entry.subjectId), createdAt: now });
}
