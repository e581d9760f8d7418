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
