import type { Db, Reader } from "./database";

/** The read methods of a drizzle handle, bound to it: what a Database exposes for reads. */
export const readSurface = (db: Db): Reader => ({
  select: db.select.bind(db),
  selectDistinct: db.selectDistinct.bind(db),
  $count: db.$count.bind(db),
  $with: db.$with.bind(db),
  with: db.with.bind(db),
  all: db.all.bind(db),
  get: db.get.bind(db),
  values: db.values.bind(db),
});

/**
 * Where each column of a select stands in a row read with `.values()`, by name: drizzle lists a
 * select's fields in its object's key order, so a column added or moved anywhere moves its
 * readers with it. Hot reads map raw values (skipping drizzle's per-field mapping) through these.
 */
export function positionsOf<T extends object>(columns: T): { readonly [K in keyof T]: number } {
  return Object.freeze(Object.fromEntries(Object.keys(columns).map((name, at) => [name, at]))) as { readonly [K in keyof T]: number };
}
