/** Opens the libSQL database named by the configuration: an embedded file, a server, or an embedded replica. */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { createClient, type Client, type InStatement, type ResultSet, type Transaction, type TransactionMode } from "@libsql/client";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import { tuneEmbeddedConnections } from "./embedded-tuning";
import * as schema from "./schema";

export type Db = LibSQLDatabase<typeof schema>;

export interface Database {
  db: Db;
  client: Client;
  close(): void;
}

export interface DatabaseOptions {
  url: string;
  authToken?: string;
  syncUrl?: string;
}

/** How long a writer waits for another process's lock before giving up (ms). */
const BUSY_TIMEOUT_MS = 5000;

export async function openDatabase({ url, authToken, syncUrl }: DatabaseOptions): Promise<Database> {
  const local = url.startsWith("file:");
  if (local) {
    const path = url.slice("file:".length).split("?")[0];
    if (path && path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  }
  if (local) tuneEmbeddedConnections();
  const client = createClient({ url, authToken, syncUrl, ...(local ? { timeout: BUSY_TIMEOUT_MS } : {}) } as Parameters<typeof createClient>[0]);
  if (local && !syncUrl) {
    // WAL lets readers run beside the writer and several worker processes share the file.
    await client.execute("PRAGMA journal_mode = WAL");
  }
  if (syncUrl) await client.sync();
  if (local) gateWrites(client);
  return { db: drizzle(client, { schema }), client, close: () => client.close() };
}

const READ_ONLY = /^\s*(select|explain)\b/i;
const isRead = (stmt: InStatement) => READ_ONLY.test(typeof stmt === "string" ? stmt : stmt.sql);

/**
 * The embedded driver is synchronous: a second writer in this process waits for the lock in
 * SQLite's busy handler ON the event loop, so the transaction holding the lock can never
 * finish — every concurrent write stalled BUSY_TIMEOUT_MS and then failed SQLITE_BUSY.
 * Writers of one process therefore take turns here (SQLite admits one writer anyway);
 * other processes sharing the file still wait through the busy timeout. Reads are never gated.
 */
function gateWrites(client: Client) {
  let tail: Promise<void> = Promise.resolve();
  const turn = async () => {
    const previous = tail;
    let release!: () => void;
    tail = new Promise((resolve) => (release = resolve));
    await previous;
    return release;
  };
  const always = (..._args: any[]) => true;
  const gated = <A extends unknown[], R>(call: (...args: A) => Promise<R>, needsTurn: (...args: A) => boolean) =>
    async (...args: A): Promise<R> => {
      if (!needsTurn(...args)) return call(...args);
      const release = await turn();
      try {
        return await call(...args);
      } catch (error) {
        throw finalizeAfterBusy(error);
      } finally {
        release();
      }
    };
  const execute = client.execute.bind(client) as (stmt: InStatement) => Promise<ResultSet>;
  client.execute = gated(execute, (stmt: InStatement) => !isRead(stmt)) as Client["execute"];
  client.batch = gated(client.batch.bind(client), (stmts: InStatement[], mode?: TransactionMode) => mode !== "read" && !stmts.every(isRead)) as Client["batch"];
  client.migrate = gated(client.migrate.bind(client), always);
  client.executeMultiple = gated(client.executeMultiple.bind(client), always);
  const begin = client.transaction.bind(client);
  // A transaction keeps its turn until it commits, rolls back or is closed.
  client.transaction = (async (mode?: TransactionMode) => {
    if (mode === "read") return begin(mode);
    const release = await turn();
    let tx: Transaction;
    try {
      tx = await begin(mode);
    } catch (error) {
      release();
      throw finalizeAfterBusy(error);
    }
    for (const end of ["commit", "rollback"] as const) {
      const original = tx[end].bind(tx);
      tx[end] = async () => {
        try {
          return await original();
        } finally {
          release();
        }
      };
    }
    const close = tx.close.bind(tx);
    tx.close = () => {
      close();
      release();
    };
    return tx;
  }) as Client["transaction"];
}

/**
 * A statement that failed SQLITE_BUSY (another process held the lock past the busy timeout)
 * is left un-reset by the driver until it is garbage-collected, and meanwhile its pooled
 * connection fails every later COMMIT with "SQL statements in progress" (probe: one BUSY, then
 * every create 503 until a GC). Collecting at once finalizes it; this runs only after a busy wait.
 */
function finalizeAfterBusy(error: unknown) {
  if ((error as { code?: string } | undefined)?.code === "SQLITE_BUSY") Bun.gc(true);
  return error;
}
