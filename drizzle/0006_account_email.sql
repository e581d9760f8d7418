CREATE TABLE `account_tokens` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`user_id` integer NOT NULL,
	`purpose` text NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `account_tokens_user_purpose_unique` ON `account_tokens` (`user_id`,`purpose`);--> statement-breakpoint
CREATE TABLE `reset_throttle` (
	`key` text PRIMARY KEY NOT NULL,
	`requests` integer NOT NULL,
	`window_started_at` integer NOT NULL
);
--> statement-breakpoint
DROP INDEX `outbox_pending_idx`;--> statement-breakpoint
ALTER TABLE `outbox` ADD `token` text;--> statement-breakpoint
ALTER TABLE `outbox` ADD `webhook_status` text DEFAULT 'pending' NOT NULL;--> statement-breakpoint
ALTER TABLE `outbox` ADD `mail_status` text DEFAULT 'pending' NOT NULL;--> statement-breakpoint
ALTER TABLE `outbox` ADD `mail_attempts` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `outbox` ADD `mail_next_attempt_at` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `outbox` ADD `mail_sent_at` integer;--> statement-breakpoint
ALTER TABLE `outbox` ADD `mail_last_error` text;--> statement-breakpoint
CREATE INDEX `outbox_webhook_due_idx` ON `outbox` (`webhook_status`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `outbox_mail_due_idx` ON `outbox` (`mail_status`,`mail_next_attempt_at`);--> statement-breakpoint
ALTER TABLE `users` ADD `email_verified` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `language` text DEFAULT 'en' NOT NULL;