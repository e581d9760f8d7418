/**
 * What every connection of a file: database opened through @libsql/client (DATABASE_DRIVER=
 * libsql) gets, however and whenever the client's pool opens it: the pool opens connections
 * lazily, one per concurrent borrower, and offers no per-connection hook, so the libsql
 * Database prototype's first statement on each connection sets them:
 *
 * - PRAGMA synchronous = NORMAL: per connection, and without it every commit fsyncs again
 *   (the difference between hundreds and thousands of creates a second); see native.ts.
 * - PRAGMA wal_autocheckpoint, the same measured policy as the native driver.
 *
 * The statement cache and the raw/safeIntegers patches that once lived here went with the
 * native driver: speed on a file is bun:sqlite's job now, the libsql leg only has to be right.
 * Remote (libsql:, http:) clients never construct this class.
 */
import Database from "libsql";
import { WAL_AUTOCHECKPOINT_PAGES } from "./native";

const INSTALLED = Symbol.for("usersvc.embeddedTuning");

type Connection = { prepare(sql: string): unknown; exec(sql: string): void };

export function tuneEmbeddedConnections() {
  const proto = Database.prototype as unknown as Connection & { [INSTALLED]?: true };
  if (proto[INSTALLED]) return;
  proto[INSTALLED] = true;
  const { prepare, exec } = proto;
  const tuned = new WeakSet<object>();
  const tune = (connection: Connection) => {
    if (tuned.has(connection)) return;
    tuned.add(connection);
    // A PRAGMA cannot run inside a transaction, and a connection's first statement never is.
    try {
      exec.call(connection, "PRAGMA synchronous = NORMAL");
      exec.call(connection, `PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
    } catch (error) {
      // An embedded replica's connection (replica.ts) refuses PRAGMAs that set: its client keeps
      // the file's settings itself. Any other refusal is a real failure.
      if ((error as Error).message !== "Sqlite3UnsupportedStatement") throw error;
    }
  };
  proto.exec = function (this: Connection, sql: string) {
    tune(this);
    return exec.call(this, sql);
  };
  proto.prepare = function (this: Connection, sql: string) {
    tune(this);
    return prepare.call(this, sql);
  };
}
