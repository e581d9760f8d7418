/**
 * Statements prepared once per drizzle handle and shape, then run with placeholders: a hot
 * path builds no SQL per request. A handle is the Database (reads: its reader connection),
 * a unit's `tx` (on the native driver the one writer: once per process; on libsql a
 * transaction: once per unit). Shapes must come from a bounded set (sort orders, which
 * criteria are present), never from values.
 */
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
