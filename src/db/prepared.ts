/**
 * Statements prepared once per drizzle handle and shape, then run with placeholders: a hot
 * path builds no SQL per request. A handle is the Database (reads: its reader connection),
 * a unit's `tx` (on the native driver the one writer: once per process; on libsql a
 * transaction: once per unit). Shapes must come from a bounded set (sort orders, which
 * criteria are present), never from values.
 */
import { fillPlaceholders, sql } from "drizzle-orm";
import type { Statement } from "./database";
export function prepared<H extends object, P>(build: (db: H, shape: string) => P): (db: H, shape?: string) => P {
  const byHandle = new WeakMap<H, Map<string, P>>();
  return (db, shape = "") => {
    let shapes = byHandle.get(db);
    if (!shapes) {
      shapes = new Map();
      byHandle.set(db, shapes);
    }
    let statement = shapes.get(shape);
    if (!statement) {
      statement = build(db, shape);
      shapes.set(shape, statement);
    }
    return statement;
  };
}

/**
 * A placeholder where drizzle's types want a column's value (a `set` or `values` of a prepared
 * statement): drizzle fills the value in, through the column's encoder, when the statement runs.
 */
export const placeholder = <T>(name: string) => sql.placeholder(name) as T;

/** What `bound` needs of a drizzle prepared query (either driver's). */
interface PreparedQuery {
  execute(values?: Record<string, unknown>): unknown;
  getQuery(): { sql: string; params: unknown[] };
  mapResult(result: unknown, isFromBatch?: boolean): unknown;
}

/**
 * A prepared statement with its values, as one statement of a list unit (db.writeAll /
 * db.readAll), so one code path serves both drivers: the native driver awaits it, which runs
 * the prepared statement (no SQL built per call); libsql's batch takes its SQL and the filled-in
 * values through `_prepare()`, as it does from a query builder, into the unit's one round trip.
 */
export function bound<P extends PreparedQuery>(statement: P, values: Record<string, unknown>): Statement<Awaited<ReturnType<P["execute"]>>> {
  return {
    // biome-ignore lint/suspicious/noThenProperty: a Statement is awaited like drizzle's own query builders, which are thenables too
    then: (resolve: (value: unknown) => unknown, reject: (reason: unknown) => unknown) => Promise.resolve(statement.execute(values)).then(resolve, reject),
    _prepare: () => ({
      getQuery: () => {
        const { sql, params } = statement.getQuery();
        return { sql, params: fillPlaceholders(params, values) };
      },
      mapResult: (result: unknown, isFromBatch?: boolean) => statement.mapResult(result, isFromBatch),
    }),
  } as unknown as Statement<Awaited<ReturnType<P["execute"]>>>;
}
