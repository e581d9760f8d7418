/**
 * The audit trail (audit_log): every feature writes its rows here, inside the unit of work of
 * the change they describe (so the row commits or rolls back with it); the audit feature reads
 * them back, and backups keep their bookkeeping in them (store/backups.ts).
 */
import { count, desc, eq, type SQL, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../db/database";
import { bound, prepared } from "../db/prepared";
import { auditLog } from "../db/schema";
import { limitOffset, withPlaceholderPage, type Page } from "../paging";

export type AuditRow = typeof auditLog.$inferSelect;

export interface AuditRecord {
  action: string;
  actor: string;
  subjectType: string;
  subjectId: string | number;
  details?: Record<string, unknown>;
}

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

/** An audit row as a statement of a unit (`tx` the unit's); `now` from the app's clock, never defaulted. */
export const auditStatement = (tx: Db, entry: AuditRecord, now: Date) =>
  bound(insertAudit(tx), { ...entry, subjectId: String(entry.subjectId), details: entry.details ?? null, at: now });

/**
 * An audit row as a selection for INSERT … SELECT, so a list unit can write it only where a
 * condition holds (the statement before wrote what it describes); its values SQL (placeholders,
 * in the stored form: `at` in ms, `details` JSON text). Every column, in the table's order.
 */
export const auditSelection = (row: { action: SQL; actor: SQL; subjectType: string; subjectId: SQL; details: SQL; at: SQL }) => ({
  id: sql<null>`null`.as("id"),
  action: sql<string>`${row.action}`.as("action"),
  actor: sql<string>`${row.actor}`.as("actor"),
  subjectType: sql<string>`${row.subjectType}`.as("subject_type"),
  subjectId: sql<string>`${row.subjectId}`.as("subject_id"),
  details: sql<string>`${row.details}`.as("details"),
  createdAt: sql<number>`${row.at}`.as("created_at"),
});

export async function writeAudit(tx: Db, entry: AuditRecord, now: Date) {
  await auditStatement(tx, entry, now);
}

/** The page's and the total's statements, with or without an action to match. */
const byAction = (action: string) => (action ? eq(auditLog.action, sql.placeholder("action")) : undefined);
const auditPage = prepared((db: Reader, action: string) => withPlaceholderPage(db.select().from(auditLog).where(byAction(action)).orderBy(desc(auditLog.id)).$dynamic()).prepare());
const auditCount = prepared((db: Reader, action: string) => db.select({ total: count() }).from(auditLog).where(byAction(action)).prepare());

/** Newest first, one page, optionally of one action, with the total: one read unit (one round trip to a remote primary, and the page and its total agree). */
export async function readAudit(db: Pick<Database, "readAll">, action: string | undefined, page: Page): Promise<{ rows: AuditRow[]; total: number }> {
  const shape = action ? "action" : "";
  const values = { action, ...limitOffset(page) };
  const [rows, [{ total }]] = await db.readAll((r) => [bound(auditPage(r, shape), values), bound(auditCount(r, shape), values)]);
  return { rows, total };
}
