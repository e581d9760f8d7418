/** Uploaded files' rows (files): the bytes live in the file store (storage/files.ts), named by the row's id. */
import { count, desc, eq, sql } from "drizzle-orm";
import type { Database, Reader } from "../db/database";
import { bound, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { files } from "../db/schema";
import { limitOffset, withPlaceholderPage, type Page } from "../paging";

export type FileRow = typeof files.$inferSelect;

/** A stored upload's row, as a unit of its own. */
export async function insertFileRow(db: Database, row: FileRow) {
  await db.writeAll((tx) => [tx.insert(files).values(row)]);
}

/** Whether stored bytes of this name have their row. */
export async function fileRowExists(db: Reader, name: string) {
  const [row] = await db.select({ id: files.id }).from(files).where(eq(files.id, name));
  return row !== undefined;
}

const fileById = prepared((db: Reader) =>
  db
    .select()
    .from(files)
    .where(eq(files.id, sql.placeholder("name")))
    .prepare(),
);

export async function fileRow(db: Reader, name: string): Promise<FileRow | undefined> {
  const [row] = await foundOrAgain(db, (source) => fileById(source).all({ name }));
  return row;
}

const filePage = prepared((db: Reader) => withPlaceholderPage(db.select().from(files).orderBy(desc(files.createdAt), sql`rowid desc`).$dynamic()).prepare());
const fileCount = prepared((db: Reader) => db.select({ total: count() }).from(files).prepare());

/** One page of every file's row, newest first (upload order breaks ties), and the total: one read unit (one round trip to a remote primary, and the page and its total agree). */
export async function readFiles(db: Pick<Database, "readAll">, page: Page): Promise<{ rows: FileRow[]; total: number }> {
  const [rows, [{ total }]] = await db.readAll((r) => [bound(filePage(r), limitOffset(page)), bound(fileCount(r), {})]);
  return { rows, total };
}
