/**
 * What operators see of backups: the three metrics (the health component `backup` is
 * store/backups.ts backupHealth). Both read the newest BACKUP_CREATED / BACKUP_FAILED audit
 * entries, so every worker process reports the same, whichever of them (or the CLI) took the backup.
 */
// prom-client's part, not its index (which loads the Pushgateway and node:http): see src/metrics.ts.
import Gauge from "prom-client/lib/gauge";
import type { Registry } from "prom-client";
import type { Database } from "../../db/database";
import { lastRecord, type BackupRecord } from "../../store/backups";

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
