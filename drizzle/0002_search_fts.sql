-- Case-insensitive substring search on users.name served by an index: an FTS5 trigram table
-- over the name (external content: it stores only the index, the text stays in users).
-- The triggers keep it in step inside the same transaction as every users write.
-- Trigrams need at least 3 characters: shorter search terms fall back to LIKE (see search/service.ts).
CREATE VIRTUAL TABLE `users_name_fts` USING fts5(`name`, content='users', content_rowid='id', tokenize='trigram');
--> statement-breakpoint
INSERT INTO `users_name_fts`(`users_name_fts`) VALUES ('rebuild');
--> statement-breakpoint
CREATE TRIGGER `users_name_fts_insert` AFTER INSERT ON `users` BEGIN
  INSERT INTO `users_name_fts`(`rowid`, `name`) VALUES (new.`id`, new.`name`);
END;
--> statement-breakpoint
CREATE TRIGGER `users_name_fts_delete` AFTER DELETE ON `users` BEGIN
  INSERT INTO `users_name_fts`(`users_name_fts`, `rowid`, `name`) VALUES ('delete', old.`id`, old.`name`);
END;
--> statement-breakpoint
CREATE TRIGGER `users_name_fts_update` AFTER UPDATE OF `name` ON `users` BEGIN
  INSERT INTO `users_name_fts`(`users_name_fts`, `rowid`, `name`) VALUES ('delete', old.`id`, old.`name`);
  INSERT INTO `users_name_fts`(`rowid`, `name`) VALUES (new.`id`, new.`name`);
END;
