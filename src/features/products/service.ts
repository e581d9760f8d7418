/**
 * The products business layer. Prices are integer cents; createdBy/updatedBy are the caller's
 * e-mail. Code uniqueness is decided by the unique index, so two concurrent creates of one
 * code give one product and DUPLICATE_PRODUCT_CODE for the other.
 */
import { asc, count, eq, sql } from "drizzle-orm";
import type { Database, Db, Reader } from "../../db/client";
import { bound, prepared } from "../../db/prepared";
import { products } from "../../db/schema";
import { AppError, integrityKind } from "../../errors";
import { limitOffset, pageIfAsked, withPlaceholderPage } from "../../paging";
import { fromCents, toCents } from "./money";
import type { Product, ProductBody, ProductListQuery, ProductStatus } from "./model";

type Row = typeof products.$inferSelect;

export function toProduct(row: Row): Product {
  return {
    id: row.id,
    name: row.name,
    code: row.code,
    price: fromCents(row.priceCents),
    description: row.description ?? null,
    status: row.status as ProductStatus,
    stock: row.stock,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    createdBy: row.createdBy ?? null,
    updatedBy: row.updatedBy ?? null,
  };
}

/** A list's statements per shape: whether a status narrows it, and whether it is paged. */
const byStatus = (status: string) => (status ? eq(products.status, sql.placeholder("status")) : undefined);
const productPage = prepared((db: Reader, shape: string) => {
  const [status, paged] = shape.split("|");
  const query = db.select().from(products).where(byStatus(status)).orderBy(asc(products.id)).$dynamic();
  return (paged ? withPlaceholderPage(query) : query).prepare();
});
const productCount = prepared((db: Reader, status: string) => db.select({ total: count() }).from(products).where(byStatus(status)).prepare());

export async function listProducts(db: Pick<Database, "readAll">, query: ProductListQuery) {
  const page = pageIfAsked(query);
  const status = query.status ? "status" : "";
  const values = { status: query.status, ...(page ? limitOffset(page) : {}) };
  // One read unit: one round trip to a remote primary, and the page and its total agree.
  const [rows, [{ total }]] = (await db.readAll((r: Reader) => [bound(productPage(r, `${status}|${page ? "paged" : ""}`), values), bound(productCount(r, status), values)])) as [
    Row[],
    { total: number }[],
  ];
  return { products: rows.map(toProduct), total };
}

const productById = prepared((db: Reader) =>
  db
    .select()
    .from(products)
    .where(eq(products.id, sql.placeholder("id")))
    .prepare(),
);

export async function findProduct(db: Reader, id: number): Promise<Product> {
  const [row] = await productById(db).all({ id });
  if (!row) throw new AppError("PRODUCT_NOT_FOUND", { id });
  return toProduct(row);
}

/** The body's fields as columns; the schema's refinement has already vouched for the price. */
function columnsOf(input: ProductBody) {
  return {
    name: input.name.trim(),
    code: input.code.trim(),
    priceCents: toCents(input.price)!,
    description: input.description ?? null,
    status: input.status ?? "ACTIVE",
    stock: input.stock ?? 0,
  };
}

const duplicateCode = (error: unknown, code: string) => (integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_PRODUCT_CODE", { code }) : error);

/** The body's columns as placeholders: one prepared statement serves every create and every replace. */
const bodyPlaceholders = {
  name: sql.placeholder("name"),
  code: sql.placeholder("code"),
  priceCents: sql.placeholder("priceCents"),
  description: sql.placeholder("description"),
  status: sql.placeholder("status"),
  stock: sql.placeholder("stock"),
} as unknown as ReturnType<typeof columnsOf>;

const insertProduct = prepared((tx: Db) =>
  tx
    .insert(products)
    .values({ ...bodyPlaceholders, createdAt: sql.placeholder("now"), updatedAt: sql.placeholder("now"), createdBy: sql.placeholder("actor"), updatedBy: sql.placeholder("actor") })
    .returning()
    .prepare(),
);

const updateProduct = prepared((tx: Db) =>
  tx
    .update(products)
    .set({ ...bodyPlaceholders, updatedAt: sql.placeholder("now") as unknown as Date, updatedBy: sql.placeholder("actor") as unknown as string })
    .where(eq(products.id, sql.placeholder("id")))
    .returning()
    .prepare(),
);

export async function createProduct(db: Database, input: ProductBody, actor: string, now = new Date()): Promise<Product> {
  const values = columnsOf(input);
  try {
    const [[row]] = (await db.writeAll((tx) => [bound(insertProduct(tx), { ...values, now, actor })])) as [Row[]];
    return toProduct(row);
  } catch (error) {
    throw duplicateCode(error, values.code);
  }
}

/** PUT: replaces every field; createdAt/createdBy stay. */
export async function replaceProduct(db: Database, id: number, input: ProductBody, actor: string, now = new Date()): Promise<Product> {
  const values = columnsOf(input);
  try {
    const [[row]] = (await db.writeAll((tx) => [bound(updateProduct(tx), { ...values, now, actor, id })])) as [Row[]];
    if (!row) throw new AppError("PRODUCT_NOT_FOUND", { id });
    return toProduct(row);
  } catch (error) {
    throw duplicateCode(error, values.code);
  }
}
