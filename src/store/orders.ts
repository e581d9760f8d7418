/**
 * Products and orders (products, orders, order_items): the catalogue's rows, and every
 * statement of the order workflow, prepared once per handle and shape. The workflow's rules
 * (which status moves to which, who may see what) are the orders feature's; here an order's
 * status changes only by one conditional UPDATE on an expected "from" status.
 */
import { and, asc, count, eq, gte, inArray, lt, or, sql } from "drizzle-orm";
import type { SQLiteSelect } from "drizzle-orm/sqlite-core";
import type { Database, Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { foundOrAgain } from "../db/miss";
import { orderItems, orders, outbox, products, users } from "../db/schema";
import { limitOffset, withPlaceholderPage, type Page } from "../paging";
import { notificationSelection, notificationStatement, traced } from "./outbox";

export type ProductRow = typeof products.$inferSelect;
export type OrderRow = typeof orders.$inferSelect;
export type ItemRow = typeof orderItems.$inferSelect;

/** A list's statements per shape: whether a status narrows it, and whether it is paged. */
const byStatus = (status: string) => (status ? eq(products.status, sql.placeholder("status")) : undefined);
const productPage = prepared((db: Reader, shape: string) => {
  const [status, paged] = shape.split("|");
  const query = db.select().from(products).where(byStatus(status)).orderBy(asc(products.id)).$dynamic();
  return (paged ? withPlaceholderPage(query) : query).prepare();
});
const productCount = prepared((db: Reader, status: string) => db.select({ total: count() }).from(products).where(byStatus(status)).prepare());

/** Every product, or one page, optionally of one status, with the total: one read unit (one round trip to a remote primary, and the page and its total agree). */
export async function readProducts(db: Pick<Database, "readAll">, statusFilter: string | undefined, page: Page | undefined): Promise<{ rows: ProductRow[]; total: number }> {
  const status = statusFilter ? "status" : "";
  const values = { status: statusFilter, ...(page ? limitOffset(page) : {}) };
  const [rows, [{ total }]] = await db.readAll((r) => [bound(productPage(r, `${status}|${page ? "paged" : ""}`), values), bound(productCount(r, status), values)]);
  return { rows, total };
}

const productById = prepared((db: Reader) =>
  db
    .select()
    .from(products)
    .where(eq(products.id, sql.placeholder("id")))
    .prepare(),
);

export async function productRow(db: Reader, id: number): Promise<ProductRow | undefined> {
  const [row] = await foundOrAgain(db, (source) => productById(source).all({ id }));
  return row;
}

/** A product's own columns, as a create or a replace writes them. */
export interface ProductColumns {
  name: string;
  code: string;
  priceCents: number;
  description: string | null;
  status: string;
  stock: number;
}

/** The body's columns as placeholders: one prepared statement serves every create and every replace. */
const bodyPlaceholders: ProductColumns = {
  name: placeholder("name"),
  code: placeholder("code"),
  priceCents: placeholder("priceCents"),
  description: placeholder("description"),
  status: placeholder("status"),
  stock: placeholder("stock"),
};

const insertProductRow = prepared((tx: Db) =>
  tx
    .insert(products)
    .values({ ...bodyPlaceholders, createdAt: sql.placeholder("now"), updatedAt: sql.placeholder("now"), createdBy: sql.placeholder("actor"), updatedBy: sql.placeholder("actor") })
    .returning()
    .prepare(),
);

const updateProductRow = prepared((tx: Db) =>
  tx
    .update(products)
    .set({ ...bodyPlaceholders, updatedAt: placeholder<Date>("now"), updatedBy: placeholder<string>("actor") })
    .where(eq(products.id, sql.placeholder("id")))
    .returning()
    .prepare(),
);

/** A new product, as a unit of its own (the unique index on the code decides between two concurrent creates). */
export async function insertProduct(db: Database, columns: ProductColumns, actor: string, now: Date): Promise<ProductRow> {
  const [[row]] = await db.writeAll((tx) => [bound(insertProductRow(tx), { ...columns, now, actor })]);
  return row;
}

/** Every column replaced (createdAt/createdBy stay), as a unit of its own: the row, or undefined for a missing product. */
export async function replaceProductRow(db: Database, id: number, columns: ProductColumns, actor: string, now: Date): Promise<ProductRow | undefined> {
  const [[row]] = await db.writeAll((tx) => [bound(updateProductRow(tx), { ...columns, now, actor, id })]);
  return row;
}

/** One status change of an order: from the status it must be in, to the next. */
export interface StatusChange {
  from: string;
  to: string;
  /** The payment's id and time are recorded (a succeeded payment). */
  paid?: boolean;
  /** Only an order last changed before `staleBefore` moves (a stale claim taken over). */
  stale?: boolean;
  /** Only an order created at or after `expiredBefore` moves (a claim: an expired order is never claimed). */
  fresh?: boolean;
  /** Only an order created before `expiredBefore` moves (an expiry). */
  expired?: boolean;
}

/** A status change's statement, prepared per change and whether it is limited to an owner. */
const changeStatement = prepared((tx: Db, shape: string) => {
  const { from, to, paid, stale, fresh, expired, owned } = JSON.parse(shape) as StatusChange & { owned: boolean };
  const payment = paid ? { paymentId: placeholder<string>("paymentId"), paidAt: placeholder<Date>("at") } : {};
  return tx
    .update(orders)
    .set({ status: to, updatedAt: placeholder<Date>("at"), ...payment })
    .where(
      and(
        eq(orders.id, sql.placeholder("id")),
        eq(orders.status, from),
        owned ? eq(orders.userId, sql.placeholder("ownerId")) : undefined,
        // In the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
        stale ? lt(orders.updatedAt, sql.placeholder("staleBefore")) : undefined,
        // The timeout off: expiredBefore is MIN_SAFE_INTEGER, so every order is fresh and none expired.
        fresh ? gte(orders.createdAt, sql.placeholder("expiredBefore")) : undefined,
        expired ? lt(orders.createdAt, sql.placeholder("expiredBefore")) : undefined,
      ),
    )
    .returning({ userId: orders.userId, totalCents: orders.totalCents })
    .prepare();
});

/**
 * The one way an order's status changes, as a statement for a unit: the order's owner and total,
 * or no row when the order was not in the "from" status (or not the owner's, or not stale).
 */
export function changeStatus(tx: Db, id: number, change: StatusChange, values: { at: Date; paymentId?: string; ownerId?: number; staleBefore?: number; expiredBefore?: number }) {
  const flag = (name: "paid" | "stale" | "fresh" | "expired") => change[name] === true;
  const shape = JSON.stringify({
    from: change.from,
    to: change.to,
    paid: flag("paid"),
    stale: flag("stale"),
    fresh: flag("fresh"),
    expired: flag("expired"),
    owned: values.ownerId !== undefined,
  });
  return bound(changeStatement(tx, shape), { id, ...values });
}

/**
 * A read of orders (oldest first) with their items and their total, prepared per shape: which of
 * the filters apply (by id, the caller's own, by user, by status) and whether it is paged. The
 * items are those of the same orders, chosen in SQL, so one read unit answers it.
 */
const orderReads = prepared((db: Reader, shape: string) => {
  const [filters, paged] = shape.split("|");
  const has = (filter: string) => filters.split(",").includes(filter);
  const where = and(
    has("id") ? eq(orders.id, sql.placeholder("id")) : undefined,
    has("own") ? eq(orders.userId, sql.placeholder("callerId")) : undefined,
    has("userId") ? eq(orders.userId, sql.placeholder("userId")) : undefined,
    has("status") ? eq(orders.status, sql.placeholder("status")) : undefined,
  );
  const page = <T extends SQLiteSelect>(select: T) => (paged ? withPlaceholderPage(select) : select);
  const ids = page(db.select({ id: orders.id }).from(orders).where(where).orderBy(asc(orders.id)).$dynamic());
  return {
    rows: page(db.select().from(orders).where(where).orderBy(asc(orders.id)).$dynamic()).prepare(),
    items: db.select().from(orderItems).where(inArray(orderItems.orderId, ids)).orderBy(asc(orderItems.id)).prepare(),
    total: db.select({ total: count() }).from(orders).where(where).prepare(),
  };
});

export interface OrderFilters {
  id?: number;
  /** Only this owner's (a USER's own orders). */
  own?: number;
  userId?: number;
  status?: string;
}

/** Orders matching `filters` with their items, one page or all; the total too when `counted`. One read unit. */
export async function readOrders(db: Pick<Database, "readAll">, filters: OrderFilters, page: Page | undefined, counted: boolean) {
  const applied = Object.entries(filters).filter(([, value]) => value !== undefined);
  const shape = `${applied.map(([filter]) => filter).join(",")}|${page ? "paged" : ""}`;
  const { own, ...rest } = filters;
  const values = { ...rest, callerId: own, ...(page ? limitOffset(page) : {}) };
  const { rows, items, total } = await db.readAll((r) => {
    const statements = orderReads(r, shape);
    return { rows: bound(statements.rows, values), items: bound(statements.items, values), total: counted ? bound(statements.total, values) : undefined };
  });
  return { rows, items, total: total?.[0].total };
}

/** An order's statements, prepared once per handle (the products' read once per number of products). */
const productsByIds = prepared((db: Reader, count: string) =>
  db
    .select()
    .from(products)
    .where(
      inArray(
        products.id,
        Array.from({ length: Number(count) }, (_, i) => sql.placeholder(`id${i}`)),
      ),
    )
    .prepare(),
);
/** The products with these ids, as a statement of a read unit. */
export const productsWithIds = (db: Reader, ids: number[]) => bound(productsByIds(db, String(ids.length)), Object.fromEntries(ids.map((id, i) => [`id${i}`, id])));

/**
 * Reserves one line as priced: a product no longer ACTIVE at that price, or without the stock,
 * gets stock -1, which the products_stock_non_negative CHECK refuses, and the unit with it.
 */
const reserve = prepared((tx: Db) =>
  tx
    .update(products)
    .set({
      stock: sql`case when ${products.status} = 'ACTIVE' and ${products.priceCents} = ${sql.placeholder("unitPriceCents")} then ${products.stock} - ${sql.placeholder("quantity")} else -1 end`,
    })
    .where(eq(products.id, sql.placeholder("productId")))
    .prepare(),
);

/** The order a unit just inserted: units hold the write lock, so it is the newest. */
const newestOrderId = sql<number>`(select max(${orders.id}) from ${orders})`;

/** A user's orders waiting for payment (claimed ones too), expired ones not counted: what ORDER_MAX_PENDING caps. */
const pendingOf = () =>
  sql<number>`(select count(*) from ${orders} where ${and(
    eq(orders.userId, sql.placeholder("userId")),
    or(and(eq(orders.status, "PENDING"), gte(orders.createdAt, sql.placeholder("expiredBefore"))), eq(orders.status, "PROCESSING")),
  )})`;
const pendingOrders = prepared((db: Reader) =>
  db
    .select({ n: pendingOf() })
    .from(users)
    .where(eq(users.id, sql.placeholder("userId")))
    .prepare(),
);
/** How many of the user's orders wait for payment (those created before `expiredBefore` not counted), as a statement of a read unit. */
export const pendingOrderCount = (db: Reader, userId: number, expiredBefore: number) => bound(pendingOrders(db), { userId, expiredBefore });

/**
 * The order's row. With ORDER_MAX_PENDING ("capped"), a user already at the cap gets a NULL total,
 * which NOT NULL refuses, and the unit with it: the count and the insert are one step, so
 * concurrent orders never pass the cap together.
 */
const insertOrder = prepared((tx: Db, capped: string) =>
  tx
    .insert(orders)
    .values({
      userId: sql.placeholder("userId"),
      status: "PENDING",
      totalCents: capped ? sql`case when ${pendingOf()} < ${sql.placeholder("maxPending")} then ${sql.placeholder("totalCents")} end` : sql.placeholder("totalCents"),
      createdAt: sql.placeholder("now"),
      updatedAt: sql.placeholder("now"),
    })
    .prepare(),
);
const insertItem = prepared((tx: Db) =>
  tx
    .insert(orderItems)
    .values({
      orderId: newestOrderId,
      productId: sql.placeholder("productId"),
      productName: sql.placeholder("productName"),
      quantity: sql.placeholder("quantity"),
      unitPriceCents: sql.placeholder("unitPriceCents"),
      totalPriceCents: sql.placeholder("totalPriceCents"),
    })
    .prepare(),
);
const orderCreated = prepared((tx: Db) =>
  notificationStatement(
    tx,
    "ORDER_CREATED",
    placeholder<string>("recipient"),
    sql`json_object('orderId', ${newestOrderId}, 'userId', ${sql.placeholder("userId")}, 'totalAmount', ${sql.placeholder("totalAmount")})`,
    placeholder<Date>("now"),
  ).prepare(),
);
const newestOrder = prepared((tx: Db) =>
  tx
    .select({ id: sql<number>`max(${orders.id})` })
    .from(orders)
    .prepare(),
);

/** One priced line of a new order. */
export type PricedLine = {
  productId: number;
  productName: string;
  quantity: number;
  unitPriceCents: number;
  totalPriceCents: number;
};

/**
 * The statements of a new order for a list unit: every line reserved, the order, its items and the
 * ORDER_CREATED notification (to `recipient`, with the total as the answer shows it). With a `cap`,
 * the order is refused (a constraint failure) when the user already has `maxPending` waiting.
 */
export function newOrderRows(
  tx: Db,
  order: { userId: number; totalCents: number; lines: PricedLine[]; recipient: string; totalAmount: number; cap?: { maxPending: number; expiredBefore: number } },
  now: Date,
) {
  const { userId, totalCents, lines, recipient, totalAmount, cap } = order;
  return [
    ...lines.map((line) => bound(reserve(tx), line)),
    bound(insertOrder(tx, cap ? "capped" : ""), { ...cap, userId, totalCents, now }),
    ...lines.map((line) => bound(insertItem(tx), line)),
    bound(orderCreated(tx), traced({ recipient, userId, totalAmount, now })),
  ];
}

/** The id of the order a unit has just inserted, as its last statement. */
export const newOrderId = (tx: Db) => bound(newestOrder(tx), {});

const statusOf = prepared((tx: Reader, owned: string) =>
  tx
    .select({ status: orders.status })
    .from(orders)
    .where(and(eq(orders.id, sql.placeholder("id")), owned ? eq(orders.userId, sql.placeholder("ownerId")) : undefined))
    .prepare(),
);
/** The order's status (no row when missing, or not the owner's when `ownerId` is given), as a statement. */
export const orderStatus = (tx: Reader, id: number, ownerId?: number) => bound(statusOf(tx, ownerId === undefined ? "" : "owned"), { id, ownerId });

const ownerEmail = prepared((tx: Db) =>
  tx
    .select({ email: users.email })
    .from(users)
    .where(eq(users.id, sql`(select ${orders.userId} from ${orders} where ${orders.id} = ${sql.placeholder("id")})`))
    .prepare(),
);
/** The e-mail of the order's owner, as a statement. */
export const orderOwnerEmail = (tx: Db, id: number) => bound(ownerEmail(tx), { id });

/** PAYMENT_SUCCESS, only if the statement before (the settling UPDATE) changed a row. */
const paymentSucceeded = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(
          notificationSelection(
            "PAYMENT_SUCCESS",
            placeholder<string>("recipient"),
            sql`json_object('orderId', ${sql.placeholder("id")}, 'userId', ${sql.placeholder("userId")}, 'paymentId', ${sql.placeholder("paymentId")}, 'totalAmount', ${sql.placeholder("totalAmount")})`,
            placeholder<Date>("at"),
          ),
        )
        .from(orders)
        // changes(): rows of the statement before, the settling UPDATE.
        .where(and(eq(orders.id, sql.placeholder("id")), sql`changes() = 1`)),
    )
    .prepare(),
);
/** PAYMENT_SUCCESS for the order, as the statement right after the one that settled it (written only if that changed the order). */
export const paymentSuccessRow = (tx: Db, values: { id: number; recipient: string | null; userId: number; paymentId: string; totalAmount: number; at: number }) =>
  bound(paymentSucceeded(tx), traced(values));

const orderById = prepared((tx: Db) =>
  tx
    .select()
    .from(orders)
    .where(eq(orders.id, sql.placeholder("id")))
    .prepare(),
);
export const orderRow = (tx: Db, id: number) => bound(orderById(tx), { id });

const itemsOfOrder = prepared((tx: Db) =>
  tx
    .select()
    .from(orderItems)
    .where(eq(orderItems.orderId, sql.placeholder("id")))
    .orderBy(asc(orderItems.id))
    .prepare(),
);
export const orderItemRows = (tx: Db, id: number) => bound(itemsOfOrder(tx), { id });

/** A declined order's line back in stock. */
const releaseStock = prepared((tx: Db) =>
  tx
    .update(products)
    .set({ stock: sql`${products.stock} + ${sql.placeholder("quantity")}` })
    .where(eq(products.id, sql.placeholder("productId")))
    .prepare(),
);

/** A declined order's lines back in stock (in its unit). */
export async function releaseOrderStock(tx: Db, id: number) {
  const lines = await orderItemRows(tx, id);
  for (const line of lines) await releaseStock(tx).run(line);
}

/** How many expired orders one sweep's read takes at most; the next read takes the rest. */
export const OVERDUE_BATCH = 100;
const overdueOrders = prepared((db: Reader) =>
  db
    .select({ id: orders.id })
    .from(orders)
    .where(and(eq(orders.status, "PENDING"), lt(orders.createdAt, sql.placeholder("expiredBefore"))))
    .orderBy(asc(orders.createdAt))
    .limit(OVERDUE_BATCH)
    .prepare(),
);
/** Up to OVERDUE_BATCH PENDING orders created before `expiredBefore`, the oldest first. */
export const overdueOrderIds = (db: Reader, expiredBefore: number) => overdueOrders(db).all({ expiredBefore });
