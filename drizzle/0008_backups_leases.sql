CREATE TABLE `leases` (
	`name` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_log_backups_idx` ON `audit_log` (`action`) WHERE "audit_log"."subject_type" = 'backup';