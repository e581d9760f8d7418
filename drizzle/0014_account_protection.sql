CREATE TABLE `device_tokens` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`failures` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `device_tokens_user_idx` ON `device_tokens` (`user_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `device_tokens_expiry_idx` ON `device_tokens` (`expires_at`);--> statement-breakpoint
CREATE TABLE `known_devices` (
	`user_id` integer NOT NULL,
	`device` text NOT NULL,
	`network` text NOT NULL,
	`first_seen_at` integer NOT NULL,
	`last_used_at` integer NOT NULL,
	PRIMARY KEY(`user_id`, `device`, `network`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `known_devices_last_used_idx` ON `known_devices` (`last_used_at`);--> statement-breakpoint
CREATE TABLE `login_lockouts` (
	`email` text PRIMARY KEY NOT NULL,
	`locked_until` integer NOT NULL,
	`duration_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `login_lockouts_until_idx` ON `login_lockouts` (`locked_until`);