ALTER TABLE `oauth_clients` ADD `id_token_signed_response_alg` text DEFAULT 'RS256' NOT NULL;--> statement-breakpoint
ALTER TABLE `signing_keys` ADD `ring` text;