/**
 * One pager for every list: `page` counts from 0, `size` rows per page. Lists like GET
 * /api/users answer every row unless page or size is given; others (audit, the user search)
 * always answer one page.
 */
import { sql } from "drizzle-orm";
import type { SQLiteSelect } from "drizzle-orm/sqlite-core";

export interface Page {
  page: number;
  size: number;
}

export const DEFAULT_PAGE_SIZE = 20;

/** The page a list query names, defaults filled in. */
export const pageOf = (query: { page?: number; size?: number }, defaultSize = DEFAULT_PAGE_SIZE): Page => ({
  page: query.page ?? 0,
  size: query.size ?? defaultSize,
});

/** A page when page or size was given, else undefined: every row. */
export const pageIfAsked = (query: { page?: number; size?: number }): Page | undefined => (query.page === undefined && query.size === undefined ? undefined : pageOf(query));

/** LIMIT and OFFSET of a page: the values of a prepared statement's "limit" and "offset" placeholders. */
export const limitOffset = (page: Page) => ({ limit: page.size, offset: page.page * page.size });

/** The select limited to the page (drizzle's dynamic mode: pass `select.$dynamic()`), or as it is without one. */
export function withPage<T extends SQLiteSelect>(select: T, page: Page | undefined): T {
  // page × size stays an exact integer: MAX_PAGE (src/validation.ts) bounds page for size ≤ 100.
  if (!page) return select;
  const { limit, offset } = limitOffset(page);
  return select.limit(limit).offset(offset) as T;
}

/** A prepared statement's page: LIMIT and OFFSET as its "limit" and "offset" placeholders, whose values limitOffset gives. */
export function withPlaceholderPage<T extends SQLiteSelect>(select: T): T {
  return select.limit(sql.placeholder("limit")).offset(sql.placeholder("offset")) as T;
}
