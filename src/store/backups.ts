/**
 * Backups' bookkeeping: backups keep no table of their own; what they did (created, failed,
 * deleted, restored) is in the audit trail as entries with subject type "backup", written with
 * store/audit.ts and read back here.
 */
import { and, desc, eq, sql } from "drizzle-orm";
import type { Reader } from "../db/database";
import { auditLog } from "../db/schema";

export interface BackupRecord {
  at: Date;
  name: string;
  details: Record<string, unknown>;
}

/** The partial index audit_log_backups_idx serves a query only with its condition spelled out, not bound. */
const BACKUP_ENTRIES = sql`${auditLog.subjectType} = 'backup'`;

/** The newest audit entry of `action` (BACKUP_CREATED or BACKUP_FAILED), through audit_log_action_idx. */
export async function lastRecord(db: Reader, action: "BACKUP_CREATED" | "BACKUP_FAILED"): Promise<BackupRecord | undefined> {
  const [row] = await db
    .select({ at: auditLog.createdAt, name: auditLog.subjectId, details: auditLog.details })
    .from(auditLog)
    .where(and(eq(auditLog.action, action), BACKUP_ENTRIES))
    .orderBy(desc(auditLog.id))
    .limit(1);
  return row && { at: row.at, name: row.name, details: (row.details ?? {}) as Record<string, unknown> };
}

/** The details of every BACKUP_RESTORED entry (when the restored backup was taken, when it was restored). */
export async function restoreRecords(db: Reader): Promise<{ backupCreatedAt?: string; restoredAt?: string }[]> {
  // Spelled out, not bound: so audit_log_backups_idx (a partial index on backup entries) serves it.
  const rows = await db.select({ details: auditLog.details }).from(auditLog).where(sql`${auditLog.action} = 'BACKUP_RESTORED' AND ${auditLog.subjectType} = 'backup'`);
  return rows.map(({ details }) => (details ?? {}) as { backupCreatedAt?: string; restoredAt?: string });
}

/** The health component `backup` (when BACKUP_SCHEDULE is set). */
export interface BackupHealth {
  status: "UP" | "DOWN";
  details: { schedule?: string; lastSuccess?: string; lastBackup?: string; lastFailure?: string; lastError?: string };
}

/** DOWN while the newest attempt failed; UP otherwise (also before the first scheduled run). */
export async function backupHealth(db: Reader, schedule: string | undefined): Promise<BackupHealth> {
  const [success, failure] = await Promise.all([lastRecord(db, "BACKUP_CREATED"), lastRecord(db, "BACKUP_FAILED")]);
  const failing = failure !== undefined && (success === undefined || failure.at > success.at);
  return {
    status: failing ? "DOWN" : "UP",
    details: {
      schedule,
      lastSuccess: success?.at.toISOString(),
      lastBackup: success?.name,
      lastFailure: failure?.at.toISOString(),
      lastError: failure ? String(failure.details.error ?? "") : undefined,
    },
  };
}
