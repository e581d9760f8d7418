/**
 * Bun macro: runs when the code is bundled (or transpiled by `bun run` / `bun test`) and
 * inlines drizzle/'s SQL into the program, so the compiled binary needs no migrations folder.
 */
import { readMigrationFiles } from "drizzle-orm/migrator";

export function readEmbeddedMigrations() {
  return readMigrationFiles({ migrationsFolder: `${import.meta.dir}/../../drizzle` });
}
