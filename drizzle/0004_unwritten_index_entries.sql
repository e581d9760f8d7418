DROP INDEX `audit_log_created_idx`;--> statement-breakpoint
DROP INDEX `users_department_idx`;--> statement-breakpoint
DROP INDEX `users_active_age_idx`;--> statement-breakpoint
CREATE INDEX `users_department_idx` ON `users` (`department_id`) WHERE "users"."department_id" is not null;--> statement-breakpoint
CREATE INDEX `users_active_age_idx` ON `users` (`active`,`age`) WHERE "users"."age" is not null;