/**
 * Applies drizzle/ (embedded at build time) the way drizzle-kit's own migrators do, with the
 * same bookkeeping table, as one unit: a failed migration leaves nothing behind.
 */
import { sql } from "drizzle-orm";
import type { Database } from "./database";
import { readEmbeddedMigrations } from "./embedded-migrations" with { type: "macro" };

const MIGRATIONS = readEmbeddedMigrations();

export async function migrate(database: Database): Promise<number> {
  await database.migrate([`CREATE TABLE IF NOT EXISTS "__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`]);
  const [last] = await database.values<[number, string, number]>(sql`SELECT id, hash, created_at FROM "__drizzle_migrations" ORDER BY created_at DESC LIMIT 1`);
  const pending = MIGRATIONS.filter((m) => !last || Number(last[2]) < m.folderMillis);
  if (pending.length === 0) return 0;
  // The hash is hex and the time a number: nothing to escape.
  await database.migrate(
    pending.flatMap((m) => [...m.sql.filter((s) => s.trim() !== ""), `INSERT INTO "__drizzle_migrations" ("hash", "created_at") VALUES ('${m.hash}', ${m.folderMillis})`]),
  );
  return pending.length;
}
