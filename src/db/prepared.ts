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
    if (!shapes) byHandle.set(db, (shapes = new Map()));
    let statement = shapes.get(shape);
    if (!statement) shapes.set(shape, (statement = build(db, shape)));
    return statement;
  };
}
