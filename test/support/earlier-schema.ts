/**
 * A database as an earlier release left it: every migration before the first whose SQL names
 * `marker` (a table or column it added), with drizzle's bookkeeping, then `rows` of that release.
 * Upgrade tests migrate it with the current code.
 */
import { join } from "node:path";
import { readMigrationFiles } from "drizzle-orm/migrator";
import type { Database } from "../../src/db/database";

export async function migrateToBefore(database: Database, marker: string, rows: string[]) {
  const all = readMigrationFiles({ migrationsFolder: join(import.meta.dir, "../../drizzle") });
  const before = all.slice(
    0,
    all.findIndex((m) => m.sql.some((statement) => statement.includes(marker))),
  );
  await database.migrate([
    'CREATE TABLE "__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)',
    ...before.flatMap((m) => [
      ...m.sql.filter((statement) => statement.trim() !== ""),
      `INSERT INTO "__drizzle_migrations" (hash, created_at) VALUES ('${m.hash}', ${m.folderMillis})`,
    ]),
    ...rows,
  ]);
  /** How many migrations the current code has left to apply. */
  return all.length - before.length;
}
