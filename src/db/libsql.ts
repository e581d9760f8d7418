/**
 * @libsql/client behind the same API: remote URLs (libsql:, http(s):, ws(s):) and file: with
 * DATABASE_DRIVER=libsql (an embedded replica, DATABASE_SYNC_URL, is replica.ts, which writes
 * through this). A closure unit is an interactive transaction (BEGIN IMMEDIATE on a file), a
 * list unit one batch in write mode.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createClient, type Client, type InArgs, type InStatement, type ResultSet, type TransactionMode } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import type { Database, DatabaseOptions, Db } from "./database";
import { tuneEmbeddedConnections } from "./embedded-tuning";
import { isRefusedFrame } from "./errors";
import { readSurface } from "./reads";
import * as schema from "./schema";
import { createLimit, createTurns, retryWhileBusy, runUnit } from "./units";

/** SQLite's own wait for a lock on a file: it blocks the event loop, so it stays short (see units.ts). */
const SQLITE_BUSY_TIMEOUT_MS = 20;
/** Units of one process at a remote primary at once (openLibsql). */
const REMOTE_UNITS_AT_ONCE = 8;

/**
 * Statements built by drizzle, run as one client.batch in `mode` and answered as drizzle would:
 * what drizzle's own LibSQLSession.batch does, with the mode it does not pass.
 */
export async function batch(client: Client, statements: readonly unknown[], mode: TransactionMode) {
  const prepared = statements.map((statement) => (statement as { _prepare(): LibsqlPrepared })._prepare());
  const results = await client.batch(
    prepared.map((p) => {
      const { sql, params } = p.getQuery();
      return { sql, args: params as InArgs };
    }),
    mode,
  );
  return results.map((result, i) => prepared[i].mapResult(result, true));
}

interface LibsqlPrepared {
  getQuery(): { sql: string; params: unknown[] };
  mapResult(result: ResultSet, isFromBatch: boolean): unknown;
}

type Method = (...args: never[]) => unknown;

/** `target` with the methods `replace` hands a stand-in for (given the original, bound to it), every other member as it is. */
function withMethods<T extends object>(target: T, replace: (key: PropertyKey, original: Method) => Method | undefined): T {
  return new Proxy(target, {
    get(object, key) {
      const value = Reflect.get(object, key);
      if (typeof value !== "function") return value;
      const original = value.bind(object) as Method;
      return replace(key, original) ?? original;
    },
  });
}

/** The client and its transactions, telling `onRoundTrip` of every call that goes to the server. */
function counted(client: Client, onRoundTrip: () => void): Client {
  const sends = new Set<PropertyKey>(["execute", "batch", "migrate", "executeMultiple", "commit", "rollback"]);
  const observe = <T extends object>(target: T): T =>
    withMethods(target, (key, original) => {
      if (key === "transaction") return async (...args: never[]) => observe((await original(...args)) as object);
      if (!sends.has(key)) return undefined;
      return (...args: never[]) => {
        onRoundTrip();
        return original(...args);
      };
    });
  return observe(client);
}

/** A statement that can only read: drizzle's selects (a `with …` may insert, update or delete). */
const READ_ONLY = /^\s*select\b/i;

/**
 * The client, with a read that met a refused frame (isRefusedFrame) sent once more: the client
 * has dropped that connection, and the read goes out on a new one. Only reads: a SELECT run
 * outside a transaction, or a batch in read mode (READONLY at the server); a write's answer lost
 * this way may still have committed, so it fails as it is (503).
 */
function readsAgainAfterRefusedFrame(client: Client): Client {
  const again = async <T>(read: () => Promise<T>): Promise<T> => {
    try {
      return await read();
    } catch (error) {
      if (!isRefusedFrame(error)) throw error;
      return read();
    }
  };
  return withMethods(client, (key, original) => {
    const send = original as (...args: unknown[]) => Promise<unknown>;
    if (key === "execute")
      return (statement: InStatement, args?: InArgs) =>
        READ_ONLY.test(typeof statement === "string" ? statement : statement.sql) ? again(() => send(statement, args)) : send(statement, args);
    if (key === "batch") return (statements: InStatement[], mode?: TransactionMode) => (mode === "read" ? again(() => send(statements, mode)) : send(statements, mode));
    return undefined;
  });
}

/** When the unit of work a round trip belongs to must have answered (performance.now()): its arrival plus the busy timeout. */
const unitDeadline = new AsyncLocalStorage<number>();

/**
 * Bun's fetch with a deadline per round trip: @libsql/client's HTTP transport has no timeout of
 * its own, so a primary that takes the connection and never answers (stopped, hung, a black-holed
 * proxy) would hold the request forever. Aborted at `ms`, or at its unit's deadline when that comes
 * first (a unit that waited for its turn has that much less), the round trip fails with a
 * TimeoutError, which errors.ts counts as "unreachable" (503 with Retry-After, never retried).
 */
const fetchWithin =
  (ms: number) =>
  (request: Request): Promise<Response> => {
    const until = unitDeadline.getStore();
    const left = until === undefined ? ms : Math.max(1, Math.min(ms, until - performance.now()));
    return fetch(request, { signal: AbortSignal.timeout(left) });
  };

export async function openLibsql({ url, authToken, onRoundTrip }: DatabaseOptions, busyTimeoutMs: number): Promise<Database> {
  const local = url.startsWith("file:");
  if (local) tuneEmbeddedConnections();
  const created = createClient({
    url,
    authToken,
    ...(local ? { timeout: SQLITE_BUSY_TIMEOUT_MS } : { fetch: fetchWithin(busyTimeoutMs) }),
  } as Parameters<typeof createClient>[0]);
  const sent = onRoundTrip && !local ? counted(created, onRoundTrip) : created;
  const client = local ? sent : readsAgainAfterRefusedFrame(sent);
  // WAL lets readers run beside the writer and several worker processes share the file.
  if (local) await client.execute("PRAGMA journal_mode = WAL");
  const db = drizzle(client, { schema });
  const handle: Db = db;
  // The embedded engine is synchronous: a second writer of this process would wait for the lock
  // in SQLite's busy handler ON the event loop, where the unit holding it can never finish.
  // So units of one process take turns on a file, as on the native driver.
  // At a remote primary at most REMOTE_UNITS_AT_ONCE are sent at a time, and one whose turn comes
  // with less than a tenth of the busy timeout left answers 503 without being sent: the primary runs writes one at a time
  // whatever is sent, and sent all at once they wait in line there, where a client's deadline does
  // not take them out (a unit given up here still runs there later) and where sqld 0.24 can stall
  // for good: 20 sign-ups at once through three instances (test:multi) left every writer parked in
  // its connection manager behind a WAL checkpoint, and no write of any instance went through again.
  // A few at once still hide the round trip of one behind another's.
  const inTurn = local ? createTurns() : createLimit(REMOTE_UNITS_AT_ONCE, busyTimeoutMs);
  // A statement that failed SQLITE_BUSY stays un-reset in the addon until it is garbage-collected,
  // and meanwhile its connection fails every later COMMIT with "SQL statements in progress";
  // collecting at once finalizes it. Only after a busy failure, only on a file.
  const afterBusy = local ? () => Bun.gc(true) : undefined;
  const unit = <T>(work: () => Promise<T>) => {
    const until = performance.now() + busyTimeoutMs;
    return inTurn(() => unitDeadline.run(until, () => retryWhileBusy(work, busyTimeoutMs, afterBusy)));
  };

  return {
    ...readSurface(handle),
    driver: "libsql",
    unguarded: handle,
    write: (work) => unit(() => db.transaction((tx) => work(tx))),
    // drizzle's db.batch() passes no mode (a deferred transaction that takes the lock only at its
    // first write); a list unit is a write: one Hrana batch that begins with BEGIN IMMEDIATE.
    writeAll: (build) => unit(() => runUnit(handle, build, (statements) => batch(client, statements(), "write"))),
    readAll: (build) => runUnit(handle, build, (statements) => batch(client, statements(), "read")),
    migrate: (statements) =>
      unit(async () => {
        // The client's migrate() runs the batch atomically with foreign keys off, as drizzle-kit's migrator does.
        await client.migrate(statements);
      }),
    close: () => client.close(),
  };
}
