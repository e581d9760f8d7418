CREATE TABLE `signing_keys` (
	`kid` text PRIMARY KEY NOT NULL,
	`alg` text NOT NULL,
	`public_jwk` text,
	`private_jwk` text,
	`created_at` integer NOT NULL,
	`signs_from` integer NOT NULL,
	`revoked_at` integer
);
