/**
 * What operators see of backups: the health component `backup` (when scheduled) and the three
 * metrics. Both read the newest BACKUP_CREATED / BACKUP_FAILED audit entries, so every worker
 * process reports the same, whichever of them (or the CLI) took the backup.
 */
// prom-client's part, not its index (which loads the Pushgateway and node:http): see src/metrics.ts.
import Gauge from "prom-client/lib/gauge";
import type { Registry } from "prom-client";
import type { Config } from "../../config";
import type { Database } from "../../db/client";
import { lastRecord, type BackupRecord } from "./service";

export interface BackupHealth {
  status: "UP" | "DOWN";
  details: { schedule?: string; lastSuccess?: string; lastBackup?: string; lastFailure?: string; lastError?: string };
}

/** DOWN while the newest attempt failed; UP otherwise (also before the first scheduled run). */
export async function backupHealth(db: Database, config: Config): Promise<BackupHealth> {
  const [success, failure] = await Promise.all([lastRecord(db, "BACKUP_CREATED"), lastRecord(db, "BACKUP_FAILED")]);
  const failing = failure !== undefined && (success === undefined || failure.at > success.at);
  return {
    status: failing ? "DOWN" : "UP",
    details: {
      schedule: config.backupSchedule,
      lastSuccess: success?.at.toISOString(),
      lastBackup: success?.name,
      lastFailure: failure?.at.toISOString(),
      lastError: failure ? String(failure.details.error ?? "") : undefined,
    },
  };
}

/** A scrape reads the three gauges at once: they share one query (memoized for a second). */
const MEMO_MS = 1000;

export function registerBackupMetrics(registry: Registry, db: Database) {
  let memo: { at: number; value: Promise<BackupRecord | undefined> } | undefined;
  const last = () => {
    const now = performance.now();
    if (!memo || now - memo.at > MEMO_MS) {
      memo = { at: now, value: lastRecord(db, "BACKUP_CREATED") };
      memo.value.catch(() => (memo = undefined));
    }
    return memo.value;
  };
  const gauge = (name: string, help: string, read: (record: BackupRecord) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      // Every worker reads the same row.
      aggregator: "max",
      async collect() {
        const record = await last();
        if (record) this.set(read(record));
      },
    });
  gauge("usersvc_backup_last_success_timestamp_seconds", "When the last successful backup was taken (0: never)", (r) => r.at.getTime() / 1000);
  gauge("usersvc_backup_duration_seconds", "How long the last successful backup took", (r) => Number(r.details.durationMs ?? 0) / 1000);
  gauge("usersvc_backup_size_bytes", "Size of the last successful backup's archive", (r) => Number(r.details.size ?? 0));
}
