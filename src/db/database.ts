/**
 * The data layer every service uses, whichever driver runs underneath:
 *
 * - `native` (the default for `file:` URLs): Bun's own SQLite through drizzle-orm/bun-sqlite,
 *   one writer connection and one reader connection (see native.ts).
 * - `libsql`: @libsql/client, for `libsql:`, `http(s):`, `ws(s):` URLs and `file:` with
 *   DATABASE_DRIVER=libsql (see libsql.ts), and embedded replicas, DATABASE_SYNC_URL (replica.ts).
 *
 * Reads: the Database itself is the read surface (`db.select(…)`), on the reader connection,
 * outside any unit of work: it sees only committed data, never an open unit's writes.
 *
 * Writes: only inside a unit of work, one of two shapes:
 *
 *   await db.write(async (tx) => { … })                      // a closure, when statements need earlier answers
 *   const [a, b] = await db.writeAll((tx) => [tx.insert(…), …])  // a list, when they don't: a tuple of answers
 *   const { user } = await db.writeAll((tx) => ({ role: …, user: … }))  // or named: answers by name
 *
 * A unit commits as a whole or not at all. `tx` reads see the unit's own writes. On the native
 * driver a unit is BEGIN IMMEDIATE … COMMIT on the writer connection, units of one process
 * taking turns through an async mutex; on libsql a closure is an interactive transaction and
 * a list is one batch in write mode (one Hrana round trip to a remote primary).
 *
 * Inside a closure await only database calls: hash passwords, call the payment gateway and
 * send anything before or after it, since every await inside holds every writer of the process.
 *
 * When another process holds the write lock (SQLITE_BUSY, "database is locked"), the whole
 * unit runs again after a jittered pause, until DATABASE_BUSY_TIMEOUT_MS; past it the unit
 * throws a DatabaseBusyError (503 with Retry-After), with nothing half-written.
 *
 * Constraint failures and busy errors of every driver are classified in one table: errors.ts.
 * Hot paths prepare their statements once per handle and shape: prepared.ts.
 *
 * On an embedded replica a miss is never final: foundOrAgain (the guard's caller read, the stores'
 * reads by id, token or key) reads again at `primary` what the local copy did not find (db/miss.ts).
 */
import type { RunnableQuery } from "drizzle-orm/runnable-query";
import type { BaseSQLiteDatabase } from "drizzle-orm/sqlite-core";
import type * as schema from "./schema";

/** A drizzle handle of either driver: a unit's `tx`, or a driver's own connection. */
export type Db = BaseSQLiteDatabase<"sync" | "async", unknown, typeof schema>;

/** What reads need: the Database (the reader connection) and a unit's `tx` both are one. */
export type Reader = Pick<Db, "select" | "selectDistinct" | "$count" | "$with" | "with" | "all" | "get" | "values">;

/** One statement of a list unit: a drizzle query built on the unit's `tx` (or a bound prepared one), not yet run; `R` is its answer. */
export type Statement<R = unknown> = RunnableQuery<R, "sqlite"> & PromiseLike<R>;

/**
 * The statements of a list unit, run in the order written: a list, answered as a tuple (one
 * answer per statement), or named entries, answered under the same names. A named entry is a
 * statement, a list of them (answered as a list), or undefined (nothing runs; answered undefined).
 */
export type Unit = readonly Statement[] | { readonly [name: string]: Statement | readonly Statement[] | undefined };

type Answers<L extends readonly Statement[]> = { -readonly [I in keyof L]: L[I]["_"]["result"] };
type Answer<E> = E extends readonly Statement[] ? Answers<E> : E extends Statement ? E["_"]["result"] : undefined;
/** What a unit answers: each statement's result, in the unit's own shape. */
export type UnitAnswers<U extends Unit> = U extends readonly Statement[] ? Answers<U> : { -readonly [K in keyof U]: Answer<U[K]> };

/**
 * `failsMidway`: a statement after one that wrote can fail as a matter of course (an order's
 * second line finds no stock). The native driver, which commits concurrent list units together,
 * then gives the unit its own SAVEPOINT, so its failure costs the units beside it nothing.
 * Not needed when the statement that can fail comes first, or the ones before it change no row
 * when it fails; an undeclared unit that fails midway still undoes only itself, but its group
 * runs again (native.ts). On libsql every list unit is its own batch anyway.
 */
export interface WriteAllOptions {
  failsMidway?: boolean;
  /**
   * Nothing reads what the unit writes but the unit itself (its answers): a counter judged on the
   * row its upsert answers. An embedded replica then answers without pulling it into its copy (two
   * requests fewer); the next pull brings it.
   */
  unread?: boolean;
}

export type DatabaseDriver = "native" | "libsql";

export interface Database extends Reader {
  readonly driver: DatabaseDriver;
  /** A unit of work as a closure: committed when the promise resolves, rolled back when it rejects. */
  write<T>(work: (tx: Db) => Promise<T>): Promise<T>;
  /** A unit of work as independent statements (a Unit), run in order; answers each statement's result in the unit's shape. */
  writeAll<const U extends Unit>(build: (tx: Db) => U, options?: WriteAllOptions): Promise<UnitAnswers<U>>;
  /**
   * Independent reads as one unit, outside any unit of work: one round trip to a remote primary
   * (a read batch, one consistent snapshot), plain reads on the reader connection otherwise.
   */
  readAll<const U extends Unit>(build: (db: Reader) => U): Promise<UnitAnswers<U>>;
  /**
   * An embedded replica's primary, read over its own Hrana connection (a round trip, with the
   * same deadline as a unit's): where a read that missed on the copy is read again, since the copy
   * may not hold yet what another edge has just written (foundOrAgain). Undefined elsewhere.
   */
  readonly primary?: Pick<Database, "readAll" | keyof Reader>;
  /** An embedded replica's distance from its primary (undefined elsewhere). */
  readonly freshness?: Freshness;
  /**
   * An embedded replica pulls from its primary now (undefined elsewhere): `frameNo` is the primary's
   * replication frame the copy has reached (a backup's manifest records it).
   */
  readonly pull?: () => Promise<{ frameNo?: number }>;
  /** Applies SQL migrations as one unit with foreign keys off (what drizzle-kit's migrators do). */
  migrate(statements: string[]): Promise<void>;
  /**
   * The writer's own drizzle handle, outside any unit and its turn-taking: for test fixtures and
   * one-off tools only, never while units may run.
   */
  readonly unguarded: Db;
  close(): void;
}

/**
 * How current an embedded replica's copy is known to be. The client pulls in the background every
 * DATABASE_SYNC_INTERVAL, and tells nobody how that went; so the replica asks its primary itself,
 * `select 1` over its own Hrana connection at the same interval (an async round trip with a
 * deadline, off the request path), and counts a unit's pull too. Staleness is the time since the
 * last of those reached the primary.
 */
export interface Freshness {
  /** Milliseconds since this edge last reached its primary. */
  stalenessMs(): number;
  /** Whether the last probe (or unit) reached the primary. */
  primaryUp(): boolean;
  /** Staleness past DATABASE_MAX_STALENESS: every authenticated request answers 503, readiness DOWN. */
  tooStale(): boolean;
}

export interface DatabaseOptions {
  url: string;
  authToken?: string;
  syncUrl?: string;
  /** An embedded replica pulls from its primary this often in the background (and after each write). */
  syncIntervalMs?: number;
  /** An embedded replica that has not reached its primary for this long is too stale to authenticate anyone (Freshness). */
  maxStalenessMs?: number;
  /** `file:` only: native (bun:sqlite, the default) or libsql (@libsql/client). */
  driver?: DatabaseDriver;
  /** How long a unit keeps retrying while another process holds the write lock (ms). */
  busyTimeoutMs?: number;
  /** Told of each request to a remote primary, in the caller's async context (tracing counts them per unit). */
  onRoundTrip?: () => void;
}
