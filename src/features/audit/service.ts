/** Reading the audit trail (every feature writes it through store/audit.ts). */
import type { Database } from "../../db/database";
import { pageOf } from "../../paging";
import { readAudit } from "../../store/audit";
import type { AuditEntry, AuditQuery } from "./model";

/** Newest first, one page (default page 0 of 20). */
export async function listAudit(db: Pick<Database, "readAll">, query: AuditQuery): Promise<{ entries: AuditEntry[]; total: number }> {
  const { rows, total } = await readAudit(db, query.action, pageOf(query));
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
