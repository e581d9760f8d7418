-- Nobody is locked out by REQUIRE_EMAIL_VERIFICATION: the accounts that exist before e-mail
-- verification start verified.
UPDATE `users` SET `email_verified` = 1;
--> statement-breakpoint
-- Notifications written before the mail channel existed are not mailed now (they may be days
-- old); their webhook state carries over: delivered ones are sent, the rest stay pending.
UPDATE `outbox` SET `mail_status` = 'skipped', `webhook_status` = CASE WHEN `delivered_at` IS NULL THEN 'pending' ELSE 'sent' END;
