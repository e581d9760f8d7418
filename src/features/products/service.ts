/**
 * The products business layer. Prices are integer cents; createdBy/updatedBy are the caller's
 * e-mail. Code uniqueness is decided by the unique index, so two concurrent creates of one
 * code give one product and DUPLICATE_PRODUCT_CODE for the other.
 */
import type { Database, Reader } from "../../db/database";
import { AppError, integrityKind } from "../../errors";
import { fromCents, toCents } from "../../money";
import { pageIfAsked } from "../../paging";
import { insertProduct, productRow, readProducts, replaceProductRow, type ProductColumns, type ProductRow } from "../../store/orders";
import type { Product, ProductBody, ProductListQuery, ProductStatus } from "./model";

export function toProduct(row: ProductRow): Product {
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

export async function listProducts(db: Pick<Database, "readAll">, query: ProductListQuery) {
  const { rows, total } = await readProducts(db, query.status, pageIfAsked(query));
  return { products: rows.map(toProduct), total };
}

export async function findProduct(db: Reader, id: number): Promise<Product> {
  const row = await productRow(db, id);
  if (!row) throw new AppError("PRODUCT_NOT_FOUND", { id });
  return toProduct(row);
}

/** The body's fields as columns; the schema's refinement has already vouched for the price. */
function columnsOf(input: ProductBody): ProductColumns {
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

export async function createProduct(db: Database, input: ProductBody, actor: string, now: Date): Promise<Product> {
  const values = columnsOf(input);
  try {
    return toProduct(await insertProduct(db, values, actor, now));
  } catch (error) {
    throw duplicateCode(error, values.code);
  }
}

/** PUT: replaces every field; createdAt/createdBy stay. */
export async function replaceProduct(db: Database, id: number, input: ProductBody, actor: string, now: Date): Promise<Product> {
  const values = columnsOf(input);
  try {
    const row = await replaceProductRow(db, id, values, actor, now);
    if (!row) throw new AppError("PRODUCT_NOT_FOUND", { id });
    return toProduct(row);
  } catch (error) {
    throw duplicateCode(error, values.code);
  }
}
