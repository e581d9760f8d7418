/** TypeBox shapes of the products API. Prices are decimals in JSON and integer cents inside. */
import { t, type Static } from "elysia";
import { MAX_PAGE, NotBlankString, type Violation } from "../../validation";
import { toCents } from "../../money";

export const ProductStatus = t.Union([t.Literal("ACTIVE"), t.Literal("INACTIVE"), t.Literal("DISCONTINUED")]);
export type ProductStatus = Static<typeof ProductStatus>;

/** Units on hand at most (a billion). */
export const MAX_STOCK = 1_000_000_000;

/** The most DECIMAL(10,2) holds. */
export const MAX_PRICE = 99_999_999.99;

/** A price the range allows but with a third fraction digit (or an exponent) is refused, never rounded. */
const priceDigits = (body: { price?: unknown }): Violation[] =>
  typeof body.price === "number" && body.price >= 0 && body.price <= MAX_PRICE && toCents(body.price) === undefined ? [{ path: "price", key: "field.price.digits" }] : [];

/** POST and PUT body (PUT replaces every field). Audit fields and id are the service's. */
export const ProductBody = t.Object(
  {
    name: NotBlankString({ maxLength: 200 }),
    code: NotBlankString({ maxLength: 64 }),
    price: t.Number({ minimum: 0, maximum: MAX_PRICE, description: "Decimal with at most 2 fraction digits, e.g. 19.99" }),
    description: t.Optional(t.String({ maxLength: 10_000 })),
    /** Defaults to ACTIVE. */
    status: t.Optional(ProductStatus),
    // Bounded so stock plus every quantity released back stays an exact integer: 2^63 or 1e308 were
    // stored as REAL, and 2^53 could not be read back (a 500).
    stock: t.Optional(t.Integer({ minimum: 0, maximum: MAX_STOCK, description: "Units on hand; defaults to 0" })),
  },
  { refine: priceDigits },
);
export type ProductBody = Static<typeof ProductBody>;

export const Product = t.Object(
  {
    id: t.Integer(),
    name: t.String(),
    code: t.String(),
    price: t.Number({ description: "Decimal, 2 fraction digits" }),
    description: t.Nullable(t.String()),
    status: ProductStatus,
    stock: t.Integer(),
    createdAt: t.String({ format: "date-time" }),
    updatedAt: t.String({ format: "date-time" }),
    createdBy: t.Nullable(t.String()),
    updatedBy: t.Nullable(t.String()),
  },
  { title: "Product" },
);
export type Product = Static<typeof Product>;

export const ProductIdParams = t.Object({ id: t.Integer({ minimum: 1 }) });

export const ProductListQuery = t.Object({
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100 })),
  status: t.Optional(ProductStatus),
});
export type ProductListQuery = Static<typeof ProductListQuery>;
