/** `usersvc backup` and `usersvc restore`: what each prints on stdout (logs go to the logger: stderr). */
import type { Logger } from "pino";
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import { restoreArchive, type RestoreOptions } from "./restore";
import { createBackup } from "./service";

/** Only the archive's path (or s3:// URL), so `archive=$(usersvc backup)` works. `now`: the CLI's clock (the system's). */
export async function backupCommand(config: Config, db: Database, logger: Logger, now: () => number, output?: string): Promise<string> {
  try {
    return (await createBackup({ config, db, logger, now }, { trigger: "manual", actor: "system", destination: output })).location;
  } catch (error) {
    // The API's refusals (in progress, a remote database) in the same words, as one line.
    throw error instanceof AppError ? new Error(error.messageIn("en")) : error;
  }
}

export async function restoreCommand(config: Config, archive: string, logger: Logger, now: () => number, options: RestoreOptions = {}): Promise<string> {
  const restored = await restoreArchive(config, archive, logger, now, options);
  const kept = restored.keptAs ? `; the replaced database is kept as ${restored.keptAs}` : "";
  const discarded = restored.discarded ? `; dropped ${restored.discarded}: TOTP must be enrolled again, and new signing keys are made at the next start` : "";
  return `restored ${restored.archive} (taken ${restored.createdAt}, ${restored.users} users, schema ${restored.migration})${kept}${discarded}`;
}
