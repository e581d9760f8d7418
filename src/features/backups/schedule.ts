/**
 * A serving process's part in backups: it holds a "serve:" lease (restore refuses while one is
 * live) and, in the primary process only, runs BACKUP_SCHEDULE (cron, UTC) with croner.
 */
import type { Cron } from "croner";
import { loadCron } from "../../config";
import { AppError } from "../../errors";
import { acquireLease, liveLeases, RESTORE_LEASE, SERVE_LEASE_PREFIX } from "../../store/leases";
import { backupSource, createBackup, pruneScheduled, type BackupDeps } from "./service";

export interface BackupDuties {
  stop(): Promise<void>;
}

export async function startBackupDuties(deps: BackupDeps, { primary }: { primary: boolean }): Promise<BackupDuties> {
  const { config, db, logger, now } = deps;
  if ((await liveLeases(db, RESTORE_LEASE, now())).length > 0) throw new Error("a restore of this data folder is in progress: start the server when it has finished");
  const lease = await acquireLease(db, SERVE_LEASE_PREFIX + crypto.randomUUID(), now, {
    onRenewError: (error) => logger.warn({ err: error }, "could not renew this server's lease on the data folder"),
  });
  let schedule: Cron | undefined;
  if (primary && config.backupSchedule) {
    if (!backupSource(config)) {
      logger.warn("BACKUP_SCHEDULE is ignored: the database is remote and backed up by its own server");
    } else {
      // protect: a run still going when the next one is due is not started twice.
      schedule = new (loadCron())(config.backupSchedule, { timezone: "Etc/UTC", protect: true }, async () => {
        try {
          await createBackup(deps, { trigger: "scheduled", actor: "system" });
          await pruneScheduled(deps);
        } catch (error) {
          if (error instanceof AppError && error.code === "BACKUP_IN_PROGRESS") logger.info("scheduled backup skipped: another backup is running");
          // Other failures are logged and recorded by createBackup.
        }
      });
      logger.info({ schedule: config.backupSchedule, next: schedule.nextRun()?.toISOString(), destination: config.backupDir }, "backups scheduled");
    }
  }
  return {
    async stop() {
      schedule?.stop();
      await lease?.release().catch(() => {});
    },
  };
}
