/**
 * The embedded default: Bun's own SQLite (bun:sqlite through drizzle-orm/bun-sqlite), used as
 * the engine wants it. One writer connection runs every unit of work, BEGIN IMMEDIATE … COMMIT,
 * units taking turns through an in-process mutex; one reader connection (query_only) serves
 * every read outside a unit, and under WAL it never waits for the writer.
 *
 * drizzle's transaction() is not used: for bun-sqlite it is synchronous (drizzle-orm#2275), so
 * COMMIT would run at the closure's first await and a later throw would roll nothing back.
 */
import { Database as Connection } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import type { Database, Db, Statement } from "./database";
import { readSurface } from "./reads";
import * as schema from "./schema";
import { isBusy } from "./errors";
import { createTurns, eachInOrder, retryWhileBusy, runUnit } from "./units";

/**
 * SQLite's own wait for a lock, spent blocking the event loop: kept short, since a unit that
 * finds the lock taken is retried as a whole after a pause that lets other requests run.
 */
const SQLITE_BUSY_TIMEOUT_MS = 20;
/**
 * A create appends ~15 pages to the WAL (bench/writes.ts counts them by table and index), so
 * SQLite's default checkpoint every 1,000 pages would run every ~65 creates, copying the same hot
 * pages back each time and fsyncing. Sequential creates in-process: 1,000 pages ~1,000/s,
 * 10,000 (~40 MB of WAL, kept for reuse) ~1,270/s, 40,000 no better (~800–1,200/s).
 */
export const WAL_AUTOCHECKPOINT_PAGES = 10_000;

/**
 * Set once per connection, when it opens. synchronous=NORMAL under WAL keeps every committed
 * unit across a crash of the process (the WAL is written before COMMIT returns); only a power
 * loss can lose the last commits, never corrupt the file; it saves an fsync per commit.
 */
const WRITER_PRAGMAS = [
  `busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`,
  "journal_mode = WAL",
  "synchronous = NORMAL",
  "foreign_keys = ON",
  `wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`,
];
const READER_PRAGMAS = [`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`, "query_only = ON"];

function connect(path: string, pragmas: string[]) {
  const connection = new Connection(path, { create: true });
  for (const pragma of pragmas) connection.run(`PRAGMA ${pragma}`);
  return connection;
}

/**
 * drizzle over a connection whose statements are bun:sqlite's cached ones (query(), keyed by
 * SQL text): a query drizzle builds per call is prepared once per shape, not per call, and
 * close() finalizes them all, so nothing keeps using a closed database.
 */
function handleOf(connection: Connection): Db {
  const client = { prepare: (text: string) => connection.query(text), exec: (text: string) => connection.run(text) };
  return drizzle({ client: client as unknown as Connection, schema }) as unknown as Db;
}

/** The writer's transaction control, prepared once; total_changes() tells whether a failed unit wrote anything. */
function transactionControl(connection: Connection) {
  const begin = connection.prepare("BEGIN IMMEDIATE");
  const commit = connection.prepare("COMMIT");
  const rollback = connection.prepare("ROLLBACK");
  const savepoint = connection.prepare("SAVEPOINT unit");
  const release = connection.prepare("RELEASE unit");
  const rollbackToSavepoint = connection.prepare("ROLLBACK TO unit");
  // Rows changed by every INSERT, UPDATE and DELETE this connection has completed; a failed statement adds none.
  const changes = connection.prepare<[number], []>("SELECT total_changes()");
  return {
    connection,
    /** One attempt: all of `work` committed, or (whatever it throws) nothing. */
    async attempt<T>(work: () => T | Promise<T>): Promise<T> {
      begin.run();
      try {
        const result = await work();
        commit.run();
        return result;
      } catch (error) {
        if (connection.inTransaction) rollback.run();
        throw error;
      }
    },
    savepoint: () => savepoint.run(),
    release: () => release.run(),
    rollbackToSavepoint() {
      rollbackToSavepoint.run();
      release.run();
    },
    totalChanges: () => changes.values()[0][0],
  };
}
type TransactionControl = ReturnType<typeof transactionControl>;

/**
 * Group commit for list units: those that arrive in the same tick or while the writer is busy
 * share one BEGIN IMMEDIATE … COMMIT. The pages every create touches (indexes, FTS segments,
 * outbox, audit) are then written to the WAL once per commit, not once per unit. Every caller
 * is answered after the shared COMMIT: nothing is acknowledged before it is durable.
 *
 * One unit's failure must undo only that unit, and cost the others nothing:
 * - A failing statement undoes itself, so a unit that had changed no row when it failed (SQLite's
 *   total_changes() did not move: its first statement failed, or the ones before it wrote
 *   nothing, as a department upsert that finds its department) leaves nothing behind.
 * - A unit declared `failsMidway` (a statement after one that wrote can fail as a matter of
 *   course) runs under its own SAVEPOINT, and a failure rolls back to it.
 * - Any other unit that fails after writing (undeclared, or a failure that ended the whole
 *   transaction) is the fallback: the transaction is rolled back and the group runs again
 *   without it (list units are plain statements, so they run the same twice).
 * Not a SAVEPOINT per unit: FTS5 flushes its pending index to disk at every savepoint, which
 * made each create write and merge its own FTS segment again (bench/writes.ts: ~35% fewer
 * creates per CPU-second with a department, each create savepointed).
 */
function groupCommit(control: TransactionControl, inTurn: ReturnType<typeof createTurns>, busyTimeoutMs: number) {
  let queue: Queued[] = [];
  const flush = () => {
    const group = queue;
    queue = [];
    return commitGroup(control, group, busyTimeoutMs);
  };
  return (statements: () => readonly Statement[], failsMidway: boolean) =>
    new Promise<unknown[]>((resolve, reject) => {
      queue.push({ statements, failsMidway, resolve, reject });
      // The first of a group takes a turn after this tick, so the units that arrive meanwhile join it.
      if (queue.length === 1) setImmediate(() => inTurn(flush));
    });
}

type Queued = {
  statements: () => readonly Statement[];
  failsMidway: boolean;
  resolve: (value: unknown[]) => void;
  reject: (reason: unknown) => void;
};
type Outcome = { ok: true; value: unknown[] } | { ok: false; error: unknown };

/** A unit that failed after writing part of itself, to be left out of its group's next run. */
class PartlyWritten {
  constructor(
    readonly unit: Queued,
    readonly error: unknown,
  ) {}
}

/** Commits `group`, leaving out every unit that fails after writing, and answers each unit. */
async function commitGroup(control: TransactionControl, queued: Queued[], busyTimeoutMs: number) {
  let group = queued;
  const partlyWritten: PartlyWritten[] = [];
  try {
    for (;;) {
      try {
        const outcomes = await retryWhileBusy(() => runGroup(control, group), busyTimeoutMs);
        for (const [i, outcome] of outcomes.entries()) {
          if (outcome.ok) group[i].resolve(outcome.value);
          else group[i].reject(outcome.error);
        }
        break;
      } catch (error) {
        if (!(error instanceof PartlyWritten)) throw error;
        partlyWritten.push(error);
        group = group.filter((unit) => unit !== error.unit);
        if (group.length === 0) break;
      }
    }
  } catch (error) {
    for (const unit of group) unit.reject(error);
  }
  for (const { unit, error } of partlyWritten) unit.reject(error);
}

/** Runs `group` in one transaction: each unit's results, or the error of a unit that left nothing behind. */
const runGroup = (control: TransactionControl, group: Queued[]) =>
  control.attempt(async () => {
    const outcomes: Outcome[] = [];
    for (const unit of group) outcomes.push(await runGrouped(control, unit));
    return outcomes;
  });

/** One unit inside its group's transaction; throws PartlyWritten when its failure left rows behind. */
async function runGrouped(control: TransactionControl, unit: Queued): Promise<Outcome> {
  const changesBefore = control.totalChanges();
  if (unit.failsMidway) control.savepoint();
  const results: unknown[] = [];
  try {
    for (const statement of unit.statements()) results.push(await statement);
    if (unit.failsMidway) control.release();
    return { ok: true, value: results };
  } catch (error) {
    if (isBusy(error)) throw error;
    if (!control.connection.inTransaction) throw new PartlyWritten(unit, error);
    if (unit.failsMidway) control.rollbackToSavepoint();
    else if (control.totalChanges() !== changesBefore) throw new PartlyWritten(unit, error);
    return { ok: false, error };
  }
}

export function openNative(path: string, busyTimeoutMs: number): Database {
  const writerConnection = connect(path, WRITER_PRAGMAS);
  // An in-memory database exists only on the connection that made it: one for both roles.
  const inMemory = path === "" || path === ":memory:";
  const readerConnection = inMemory ? writerConnection : connect(path, READER_PRAGMAS);
  const writer = handleOf(writerConnection);
  const reader = inMemory ? writer : handleOf(readerConnection);
  const control = transactionControl(writerConnection);
  const inTurn = createTurns();
  const unit = <T>(work: () => T | Promise<T>) => inTurn(() => retryWhileBusy(() => control.attempt(work), busyTimeoutMs));
  const grouped = groupCommit(control, inTurn, busyTimeoutMs);

  return {
    ...readSurface(reader),
    driver: "native",
    unguarded: writer,
    write: (work) => unit(() => work(writer)),
    writeAll: (build, options) => runUnit(writer, build, (statements) => grouped(statements, options?.failsMidway === true)),
    // Reads on the reader connection, one after another: each is a synchronous call anyway.
    readAll: (build) => runUnit(reader, build, eachInOrder),
    migrate: (statements) =>
      inTurn(async () => {
        // As drizzle-kit's migrators do: a table rebuild must not cascade or fail on references midway.
        writerConnection.run("PRAGMA foreign_keys = OFF");
        try {
          await retryWhileBusy(
            () =>
              control.attempt(() => {
                for (const statement of statements) writerConnection.run(statement);
              }),
            busyTimeoutMs,
          );
        } finally {
          writerConnection.run("PRAGMA foreign_keys = ON");
        }
      }),
    close() {
      if (readerConnection !== writerConnection) readerConnection.close();
      writerConnection.close();
    },
  };
}
