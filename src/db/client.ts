/** Opens the libSQL database named by the configuration: an embedded file, a server, or an embedded replica. */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { createClient, type Client } from "@libsql/client";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
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
  const client = createClient({ url, authToken, syncUrl, ...(local ? { timeout: BUSY_TIMEOUT_MS } : {}) } as Parameters<typeof createClient>[0]);
  if (local && !syncUrl) {
    // WAL lets readers run beside the writer and several worker processes share the file.
    await client.execute("PRAGMA journal_mode = WAL");
  }
  if (syncUrl) await client.sync();
  return { db: drizzle(client, { schema }), client, close: () => client.close() };
}
