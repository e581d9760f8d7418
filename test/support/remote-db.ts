/**
 * The database a suite gets on a remote leg (test/legs.ts): a fresh Hrana test server of its
 * own, or the real server named by LIBSQL_TEST_URL with every table dropped first, so each
 * suite starts empty there too (suites run one after another: bun test runs files in sequence).
 */
import { createClient } from "@libsql/client";
import { leg } from "../legs";
import { startHranaServer, type HranaServer } from "./hrana";

export interface RemoteTestDatabase {
  url: string;
  authToken?: string;
  /** Our own test server (its round-trip counter); undefined against a real server. */
  hrana?: HranaServer;
  stop(): Promise<void>;
}

export async function openRemoteTestDatabase(): Promise<RemoteTestDatabase> {
  const real = process.env.LIBSQL_TEST_URL;
  if (real) {
    const authToken = process.env.LIBSQL_TEST_AUTH_TOKEN || undefined;
    await dropEverything(real, authToken);
    return { url: real, authToken, stop: async () => {} };
  }
  const hrana = await startHranaServer();
  return { url: leg === "remote-ws" ? hrana.wsUrl : hrana.url, hrana, stop: () => hrana.stop() };
}

/** Another client's write transaction that really holds the lock (a remote client sends BEGIN with its first statement). */
export async function holdRemoteWriteLock(url: string, authToken?: string) {
  const other = createClient({ url, authToken });
  const tx = await other.transaction("write");
  await tx.execute("SELECT 1");
  return {
    async release() {
      await tx.rollback();
      other.close();
    },
  };
}

async function dropEverything(url: string, authToken?: string) {
  const client = createClient({ url, authToken });
  try {
    const { rows } = await client.execute(
      "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'libsql\\_%' ESCAPE '\\'",
    );
    // Triggers and views first, then virtual (FTS) tables, which take their shadow tables along
    // (IF EXISTS skips those), then the rest.
    const rank = (r: { type: string; sql: string }) => (r.type === "trigger" ? 0 : r.type === "view" ? 1 : /^create virtual/i.test(r.sql) ? 2 : 3);
    const drops = rows
      .map((r) => ({ type: String(r.type), name: String(r.name), sql: String(r.sql ?? "") }))
      .sort((a, b) => rank(a) - rank(b))
      .map(({ type, name }) => `DROP ${type.toUpperCase()} IF EXISTS "${name.replaceAll('"', '""')}"`);
    // migrate() runs the batch with foreign keys off, so the order among tables does not matter.
    if (drops.length > 0) await client.migrate(drops);
  } finally {
    client.close();
  }
}
