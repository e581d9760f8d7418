/** Reading the audit trail (written by the features through notifications/outbox.ts writeAudit). */
import { count, desc, eq } from "drizzle-orm";
import type { Reader } from "../../db/client";
import { auditLog } from "../../db/schema";
import { pageOf, withPage } from "../../paging";
import type { AuditEntry, AuditQuery } from "./model";

/** Newest first, one page (default page 0 of 20). */
export async function listAudit(db: Reader, query: AuditQuery): Promise<{ entries: AuditEntry[]; total: number }> {
  const where = query.action ? eq(auditLog.action, query.action) : undefined;
  const [rows, [{ total }]] = await Promise.all([
    withPage(db.select().from(auditLog).where(where).orderBy(desc(auditLog.id)).$dynamic(), pageOf(query)),
    db.select({ total: count() }).from(auditLog).where(where),
  ]);
  const entries = rows.map((row) => ({
    id: row.id,
    action: row.action,
    actor: row.actor,
    subjectType: row.subjectType,
    subjectId: row.subjectId,
    details: (row.details as Record<string, unknown> | null) ?? null,
    createdAt: row.createdAt.toISOString(),
  }));
  return { entries, total };
}
