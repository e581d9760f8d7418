/**
 * Applies drizzle/ (embedded at build time) the way drizzle-kit's own migrators do, with the
 * same bookkeeping table, as one unit: a failed migration leaves nothing behind.
 *
 * Several processes may migrate one database at once (edges starting together on one primary).
 * The unit is claimed on the journal it was computed from: its first statement writes that
 * journal's head (the last migration's created_at, 0 when empty) into __usersvc_migration_claims,
 * whose key lets only one unit per head commit. The others fail whole, read the journal again
 * and find nothing left to do. A primary over Hrana has no transaction across requests, so the
 * check has to live inside the one batch, as this key does.
 *
 * A database migrated by a newer build (journal entries this build does not know) is served as
 * it is when it is one migration ahead (migrations only expand: docs/data-layer.md), refused
 * with one line when it is further ahead.
 */
import { sql } from "drizzle-orm";
import type { Database, Reader } from "./database";
import { readEmbeddedMigrations } from "./embedded-migrations" with { type: "macro" };

const MIGRATIONS = readEmbeddedMigrations();
const NEWEST = MIGRATIONS[MIGRATIONS.length - 1]?.folderMillis ?? 0;
/** How many migrations a database may be ahead of this build and still be served. */
const AHEAD_SERVED = 1;

/** The journal's head and how many of its entries are newer than this build's newest migration. */
async function journalOf(reader: Pick<Reader, "values">): Promise<{ head: number; ahead: number }> {
  // A row of @libsql/client is indexed, not iterable.
  const [row] = await reader.values<[number | null, number]>(sql`SELECT max(created_at), count(*) FILTER (WHERE created_at > ${NEWEST}) FROM "__drizzle_migrations"`);
  return { head: Number(row[0] ?? 0), ahead: Number(row[1]) };
}

export async function migrate(database: Database): Promise<number> {
  await database.migrate([
    `CREATE TABLE IF NOT EXISTS "__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
    `CREATE TABLE IF NOT EXISTS "__usersvc_migration_claims" ("after" numeric PRIMARY KEY NOT NULL)`,
  ]);
  // A replica reads the journal at its primary: its copy may predate another edge's migration.
  const journal = database.primary ?? database;
  let lost = false;
  for (;;) {
    const { head, ahead } = await journalOf(journal);
    if (ahead > AHEAD_SERVED) throw new Error(`the database is ${ahead} migrations ahead of this build (at most ${AHEAD_SERVED} is served): run a newer build`);
    const pending = MIGRATIONS.filter((m) => head < m.folderMillis);
    if (pending.length === 0) {
      // An empty unit, for what it does on a replica: pulls into the copy what the winner migrated.
      if (lost) await database.migrate([]);
      return 0;
    }
    try {
      // The hash is hex and the times numbers: nothing to escape.
      await database.migrate([
        `INSERT INTO "__usersvc_migration_claims" ("after") VALUES (${head})`,
        ...pending.flatMap((m) => [...m.sql.filter((s) => s.trim() !== ""), `INSERT INTO "__drizzle_migrations" ("hash", "created_at") VALUES ('${m.hash}', ${m.folderMillis})`]),
      ]);
      return pending.length;
    } catch (error) {
      // Another process migrated from this head first: start again from the journal it left.
      // The head unmoved, the failure is the migration's own.
      if ((await journalOf(journal)).head === head) throw error;
      lost = true;
    }
  }
}
