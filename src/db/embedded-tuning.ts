/**
 * What every connection of the embedded (file:) database gets, however and whenever the
 * @libsql/client pool opens it (the pool opens connections lazily, one per concurrent
 * borrower, and has no per-connection hook):
 *
 * - PRAGMA synchronous = NORMAL, before the connection's first statement. Under WAL this
 *   keeps every committed transaction across a crash of the process (the WAL is written
 *   before COMMIT returns); only a power loss or kernel crash can lose the last commits,
 *   never corrupt the file. It saves an fsync per commit: the difference between hundreds
 *   and thousands of creates a second. It is per connection, hence this hook: a connection
 *   without it would silently fsync again. (A PRAGMA cannot run inside a transaction, and a
 *   connection's first statement never is.)
 * - PRAGMA wal_autocheckpoint (see WAL_AUTOCHECKPOINT_PAGES).
 * - A statement cache: the client prepares every statement anew and asks its columns twice
 *   per call, which the CPU profile of GET /api/users/{id} showed as ~30% of the request
 *   (libsql_js prepare_sync and columns). Statements are kept per connection by SQL text,
 *   their column lists once per statement. The client runs each statement to completion
 *   before it returns (all()/run()), so a cached statement is never in use twice at once;
 *   one that throws is dropped from the cache.
 *
 * Both are installed on the libsql Database prototype, which @libsql/client's sqlite3
 * client constructs for file: URLs; remote (libsql:, http:) clients never touch it.
 */
import Database from "libsql";

const MAX_STATEMENTS_PER_CONNECTION = 500;
/**
 * A create writes ~42 pages to the WAL (users and its five indexes, the FTS5 trigram index,
 * user_roles, outbox, audit, sqlite_sequence: strace counted the pwrites), so the default
 * checkpoint every 1,000 pages ran every ~24 creates, copying the same hot index pages back
 * each time and fsyncing. At 10,000 pages (~40 MB of WAL at 4 KiB pages, kept for reuse) a
 * checkpoint copies each hot page once per ~240 creates: sequential createUser went from
 * ~650/s to ~950/s on this machine. Per connection too, hence here.
 */
const WAL_AUTOCHECKPOINT_PAGES = 10_000;
const INSTALLED = Symbol.for("usersvc.embeddedTuning");

type Statement = { columns(): unknown[] };
type Connection = { prepare(sql: string): Statement; exec(sql: string): void; close(): void; readonly inTransaction: boolean };

export function tuneEmbeddedConnections() {
  const proto = Database.prototype as unknown as Connection & { [INSTALLED]?: true };
  if (proto[INSTALLED]) return;
  proto[INSTALLED] = true;
  const prepare = proto.prepare;
  const exec = proto.exec;
  const caches = new WeakMap<object, Map<string, Statement>>();
  const columns = new WeakMap<Statement, unknown[]>();
  const owner = new WeakMap<Statement, { connection: Connection; cache: Map<string, Statement>; sql: string }>();
  let columnsPatched = false;

  /** The Statement class is not exported: patched through its first instance. */
  const patchStatements = (statementProto: Statement & Record<string, any>) => {
    const original = statementProto.columns;
    statementProto.columns = function (this: Statement) {
      let list = columns.get(this);
      if (!list) columns.set(this, (list = original.call(this)));
      return list;
    };
    // The client sets safeIntegers(true) and raw(true) on every call, and raw(true) throws for
    // a statement without result columns (every INSERT, BEGIN, COMMIT): an N-API call, and
    // an exception per write statement. Both answers are fixed for a prepared statement.
    const settled = new WeakMap<Statement, { raw?: boolean; notReader?: unknown; safeIntegers?: boolean }>();
    const modes = (statement: Statement) => {
      let mode = settled.get(statement);
      if (!mode) settled.set(statement, (mode = {}));
      return mode;
    };
    const setRaw = statementProto.raw;
    statementProto.raw = function (this: Statement, toggle?: boolean) {
      const wanted = toggle ?? true;
      const mode = modes(this);
      if (mode.raw === wanted) return this;
      if (wanted && mode.notReader !== undefined) throw mode.notReader;
      try {
        setRaw.call(this, wanted);
      } catch (error) {
        if (wanted) mode.notReader = error;
        throw error;
      }
      mode.raw = wanted;
      return this;
    };
    const setSafeIntegers = statementProto.safeIntegers;
    statementProto.safeIntegers = function (this: Statement, toggle?: boolean) {
      const wanted = toggle ?? true;
      const mode = modes(this);
      if (mode.safeIntegers !== wanted) {
        setSafeIntegers.call(this, wanted);
        mode.safeIntegers = wanted;
      }
      return this;
    };
    // A statement that failed (SQLITE_BUSY above all) may stay un-reset until it is garbage-
    // collected, holding its connection "in progress" (see finalizeAfterBusy in client.ts):
    // it leaves the cache at once, so the collection can finalize it and the SQL is prepared afresh.
    for (const method of ["run", "get", "all", "iterate"]) {
      const run = statementProto[method];
      statementProto[method] = function (this: Statement, ...args: unknown[]) {
        try {
          return run.apply(this, args);
        } catch (error) {
          const entry = owner.get(this);
          if (entry && (error as { code?: string }).code === "SQLITE_BUSY" && !entry.connection.inTransaction) {
            // Outside a transaction (BEGIN IMMEDIATE, an autocommit write) the connection is
            // simply closed: the pool drops closed connections on release, and with it the
            // un-reset statement that would make its next COMMIT fail "statements in progress".
            entry.connection.close();
          } else if (entry && entry.cache.get(entry.sql) === this) entry.cache.delete(entry.sql);
          throw error;
        }
      };
    }
  };

  const cacheOf = (connection: Connection) => {
    let cache = caches.get(connection);
    if (!cache) {
      exec.call(connection, "PRAGMA synchronous = NORMAL");
      exec.call(connection, `PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
      cache = new Map();
      caches.set(connection, cache);
    }
    return cache;
  };

  proto.exec = function (this: Connection, sql: string) {
    cacheOf(this);
    return exec.call(this, sql);
  };
  proto.prepare = function (this: Connection, sql: string) {
    const cache = cacheOf(this);
    let statement = cache.get(sql);
    if (statement) return statement;
    statement = prepare.call(this, sql);
    if (!columnsPatched) {
      columnsPatched = true;
      patchStatements(Object.getPrototypeOf(statement));
    }
    owner.set(statement, { connection: this, cache, sql });
    // Drop the oldest when full: only unusual, generated SQL (long IN lists) gets here.
    if (cache.size >= MAX_STATEMENTS_PER_CONNECTION) cache.delete(cache.keys().next().value!);
    cache.set(sql, statement);
    return statement;
  };
}
