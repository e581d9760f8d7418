-- The trigram index without its per-row size table (columnsize=0): sizes only feed bm25
-- ranking, which search never uses (matches come in id order), and every users write paid a
-- page of the WAL for them. The triggers of 0002 keep it in step as before.
DROP TABLE `users_name_fts`;
--> statement-breakpoint
CREATE VIRTUAL TABLE `users_name_fts` USING fts5(`name`, content='users', content_rowid='id', tokenize='trigram', columnsize=0);
--> statement-breakpoint
INSERT INTO `users_name_fts`(`users_name_fts`) VALUES ('rebuild');
