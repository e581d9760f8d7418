/**
 * @libsql/client behind the same API: remote URLs (libsql:, http(s):, ws(s):), embedded
 * replicas (DATABASE_SYNC_URL), and file: with DATABASE_DRIVER=libsql. A closure unit is an
 * interactive transaction (BEGIN IMMEDIATE on a file), a list unit one batch in write mode.
 */
import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import type { Database, DatabaseOptions, Db } from "./database";
import { tuneEmbeddedConnections } from "./embedded-tuning";
import { readSurface } from "./reads";
import * as schema from "./schema";
import { createTurns, retryWhileBusy } from "./units";

/** SQLite's own wait for a lock on a file: it blocks the event loop, so it stays short (see units.ts). */
const SQLITE_BUSY_TIMEOUT_MS = 20;

export async function openLibsql({ url, authToken, syncUrl }: DatabaseOptions, busyTimeoutMs: number): Promise<Database> {
  const local = url.startsWith("file:");
  if (local) tuneEmbeddedConnections();
  const client = createClient({ url, authToken, syncUrl, ...(local ? { timeout: SQLITE_BUSY_TIMEOUT_MS } : {}) } as Parameters<typeof createClient>[0]);
  // WAL lets readers run beside the writer and several worker processes share the file.
  if (local && !syncUrl) await client.execute("PRAGMA journal_mode = WAL");
  if (syncUrl) await client.sync();
  const db = drizzle(client, { schema });
  const handle = db as unknown as Db;
  // The embedded engine is synchronous: a second writer of this process would wait for the lock
  // in SQLite's busy handler ON the event loop, where the unit holding it can never finish.
  // So units of one process take turns on a file, as on the native driver.
  const inTurn = local ? createTurns() : <T>(work: () => Promise<T>) => work();
  // A statement that failed SQLITE_BUSY stays un-reset in the addon until it is garbage-collected,
  // and meanwhile its connection fails every later COMMIT with "SQL statements in progress";
  // collecting at once finalizes it. Only after a busy failure, only on a file.
  const afterBusy = local ? () => Bun.gc(true) : undefined;
  const unit = <T>(work: () => Promise<T>) => inTurn(() => retryWhileBusy(work, busyTimeoutMs, afterBusy));

  return {
    ...readSurface(handle),
    driver: "libsql",
    unguarded: handle,
    write: (work) => unit(() => db.transaction((tx) => work(tx as unknown as Db))),
    // drizzle types batch() per tuple of its own builders; ours are the same statements, typed for either driver.
    writeAll: (build) => unit(() => db.batch(build(handle) as never) as never),
    migrate: (statements) =>
      unit(async () => {
        // The client's migrate() runs the batch atomically with foreign keys off, as drizzle-kit's migrator does.
        await client.migrate(statements);
      }),
    close: () => client.close(),
  };
}
