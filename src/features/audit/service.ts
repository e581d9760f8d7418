/** Reading the audit trail (written by the features through notifications/outbox.ts writeAudit). */
import { count, desc, eq, sql } from "drizzle-orm";
import type { Database, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import { auditLog } from "../../db/schema";
import { limitOffset, pageOf, withPlaceholderPage } from "../../paging";
import type { AuditEntry, AuditQuery } from "./model";

/** The page's and the total's statements, with or without an action to match. */
const byAction = (action: string) => (action ? eq(auditLog.action, sql.placeholder("action")) : undefined);
const auditPage = prepared((db: Reader, action: string) => withPlaceholderPage(db.select().from(auditLog).where(byAction(action)).orderBy(desc(auditLog.id)).$dynamic()).prepare());
const auditCount = prepared((db: Reader, action: string) => db.select({ total: count() }).from(auditLog).where(byAction(action)).prepare());

/** Newest first, one page (default page 0 of 20). */
export async function listAudit(db: Pick<Database, "readAll">, query: AuditQuery): Promise<{ entries: AuditEntry[]; total: number }> {
  const action = query.action ? "action" : "";
  const values = { action: query.action, ...limitOffset(pageOf(query)) };
  // One read unit: one round trip to a remote primary, and the page and its total agree.
  const [rows, [{ total }]] = (await db.readAll((r: Reader) => [bound(auditPage(r, action), values), bound(auditCount(r, action), values)])) as [
    (typeof auditLog.$inferSelect)[],
    { total: number }[],
  ];
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
