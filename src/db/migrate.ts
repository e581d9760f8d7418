/**
 * Applies drizzle/ (embedded at build time) the way drizzle-kit's own libSQL migrator does,
 * with the same bookkeeping table, in one batch: a failed migration leaves nothing behind.
 */
import { sql } from "drizzle-orm";
import { readEmbeddedMigrations } from "./embedded-migrations" with { type: "macro" };
import type { Db } from "./client";

const MIGRATIONS = readEmbeddedMigrations();

export async function migrate(db: Db): Promise<number> {
  await db.run(sql`CREATE TABLE IF NOT EXISTS "__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
  const [last] = await db.values<[number, string, number]>(sql`SELECT id, hash, created_at FROM "__drizzle_migrations" ORDER BY created_at DESC LIMIT 1`);
  const pending = MIGRATIONS.filter((m) => !last || Number(last[2]) < m.folderMillis);
  if (pending.length === 0) return 0;
  const statements = pending.flatMap((m) => [
    ...m.sql.filter((s) => s.trim() !== "").map((s) => db.run(sql.raw(s))),
    db.run(sql`INSERT INTO "__drizzle_migrations" ("hash", "created_at") VALUES (${m.hash}, ${m.folderMillis})`),
  ]);
  // The libSQL session's migrate() runs the batch atomically with foreign keys off, as drizzle-kit's migrator does.
  await (db as unknown as { session: { migrate(s: unknown[]): Promise<void> } }).session.migrate(statements);
  return pending.length;
}
