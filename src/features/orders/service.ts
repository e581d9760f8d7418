/**
 * The order workflow: creation, payment and reads, with the state machine in one place
 * (TRANSITIONS / move). Every status change is one conditional UPDATE on the expected
 * "from" status, so two callers can never both make the same transition:
 *
 *   (none) ──create──▶ PENDING ──claim──▶ PROCESSING ──succeed──▶ PAID
 *                         ▲  │               │ ▲└──────decline──▶ PAYMENT_FAILED (stock released)
 *                         └──┼──unclaim──────┘ └reclaim┘ (a claim older than STALE_CLAIM_MS)
 *                            └───────expire───────────────────▶ PAYMENT_FAILED (stock released)
 *
 * expire: with ORDER_PAYMENT_TIMEOUT, a PENDING order older than it (swept periodically, and
 * refused lazily when someone tries to pay it). ORDER_MAX_PENDING caps a user's PENDING orders,
 * checked in the unit that reserves the stock.
 *
 * PROCESSING is internal (clients see PENDING): the order is claimed before the gateway is
 * asked, so ten simultaneous payments charge once. A claim whose payer died (or whose result
 * could not be recorded) goes stale and may be taken again; the charge carries the
 * idempotency key order-<id>, so the gateway answers the first charge's result instead of
 * charging twice. Settling re-checks PROCESSING inside its transaction, so only one payer
 * records a result. Unclaim: the gateway could not be asked, nothing was charged.
 * Stock is reserved at creation with `stock = stock - q WHERE stock >= q`, so concurrent
 * orders never oversell.
 */
import { and, asc, count, eq, gte, inArray, lt, or, sql } from "drizzle-orm";
import type { SQLiteSelect } from "drizzle-orm/sqlite-core";
import type { Logger } from "pino";
import type { Database, Db, Reader } from "../../db/client";
import type { Statement } from "../../db/database";
import { bound, prepared } from "../../db/prepared";
import { orderItems, orders, outbox, products, users } from "../../db/schema";
import { AppError, integrityKind, Violations } from "../../errors";
import { limitOffset, pageIfAsked, withPlaceholderPage, type Page } from "../../paging";
import { isAdmin, type Caller } from "../auth/guard";
import { enqueueNotification, notificationSelection, notificationStatement, traced, writeAudit } from "../notifications/outbox";
import { fromCents } from "../products/money";
import type { CreateOrderRequest, Order, OrderListQuery, OrderStatus, PaymentRequest } from "./model";
import { createSimulatedGateway, luhnValid, type PaymentGateway } from "./payment-gateway";
import type { AppDeps } from "../../context";

export interface OrdersDeps {
  db: Database;
  logger: Logger;
  now: () => number;
  paymentGateway: PaymentGateway;
  /** ORDER_PAYMENT_TIMEOUT and ORDER_MAX_PENDING; undefined: off (the seed's behaviour). */
  orderPaymentTimeoutMs?: number;
  orderMaxPending?: number;
}

/** The workflow's dependencies from the app's (the routes', and main.ts's sweep: one clock, one configuration). */
export const ordersDeps = (app: Pick<AppDeps, "db" | "logging" | "config" | "paymentGateway"> & { now: () => number }): OrdersDeps => ({
  db: app.db,
  logger: app.logging.get("orders"),
  now: app.now,
  paymentGateway: app.paymentGateway ?? createSimulatedGateway(),
  orderPaymentTimeoutMs: app.config.orderPaymentTimeoutMs,
  orderMaxPending: app.config.orderMaxPending,
});

/** Orders created before this instant (ms) are expired; none when the timeout is off. */
const expiredBefore = (deps: Pick<OrdersDeps, "orderPaymentTimeoutMs">, at: Date) =>
  deps.orderPaymentTimeoutMs === undefined ? Number.MIN_SAFE_INTEGER : at.getTime() - deps.orderPaymentTimeoutMs;

/** Why an expired order failed: its audit row and notification say so. */
export const PAYMENT_TIMEOUT_REASON = "payment timeout";

type StoredStatus = "PENDING" | "PROCESSING" | "PAID" | "PAYMENT_FAILED";

/** How long a payer may hold an order before another payment may take it over. */
export const STALE_CLAIM_MS = 2 * 60_000;

const TRANSITIONS = {
  claim: { from: "PENDING", to: "PROCESSING" },
  reclaim: { from: "PROCESSING", to: "PROCESSING" },
  succeed: { from: "PROCESSING", to: "PAID" },
  decline: { from: "PROCESSING", to: "PAYMENT_FAILED" },
  unclaim: { from: "PROCESSING", to: "PENDING" },
  expire: { from: "PENDING", to: "PAYMENT_FAILED" },
} as const satisfies Record<string, { from: StoredStatus; to: StoredStatus }>;

type Moved = { userId: number; totalCents: number };

/** A move's statement, prepared per transition and whether it is limited to an owner. */
const moveStatement = prepared((tx: Db, shape: string) => {
  const [transition, owned] = shape.split("|") as [keyof typeof TRANSITIONS, string];
  const { from, to } = TRANSITIONS[transition];
  const payment = transition === "succeed" ? { paymentId: sql.placeholder("paymentId") as unknown as string, paidAt: sql.placeholder("at") as unknown as Date } : {};
  return tx
    .update(orders)
    .set({ status: to, updatedAt: sql.placeholder("at") as unknown as Date, ...payment })
    .where(
      and(
        eq(orders.id, sql.placeholder("id")),
        eq(orders.status, from),
        owned ? eq(orders.userId, sql.placeholder("ownerId")) : undefined,
        // In the column's stored form (ms): a placeholder in a comparison skips the column's encoder.
        transition === "reclaim" ? lt(orders.updatedAt, sql.placeholder("staleBefore")) : undefined,
        // An expired order is never claimed, only expired (the timeout off: MIN_SAFE_INTEGER, none is).
        transition === "claim" ? gte(orders.createdAt, sql.placeholder("expiredBefore")) : undefined,
        transition === "expire" ? lt(orders.createdAt, sql.placeholder("expiredBefore")) : undefined,
      ),
    )
    .returning({ userId: orders.userId, totalCents: orders.totalCents })
    .prepare();
});

/**
 * The one way an order's status changes; no row when the order was not in the "from" status
 * (or not the owner's, or for a reclaim, not stale). A statement, for a unit of work.
 */
function move(tx: Db, id: number, transition: keyof typeof TRANSITIONS, at: Date, options: { paymentId?: string; ownerId?: number; expiredBefore?: number } = {}) {
  const values = {
    id,
    at,
    paymentId: options.paymentId,
    ownerId: options.ownerId,
    staleBefore: at.getTime() - STALE_CLAIM_MS,
    expiredBefore: options.expiredBefore ?? Number.MIN_SAFE_INTEGER,
  };
  return bound(moveStatement(tx, `${transition}|${options.ownerId === undefined ? "" : "owned"}`), values) as unknown as Promise<Moved[]>;
}

/** A move as a unit of its own: the row moved, or undefined. */
async function moveNow(db: Database, ...args: Parameters<typeof move> extends [Db, ...infer Rest] ? Rest : never) {
  const [[row]] = (await db.writeAll((tx) => [move(tx, ...args) as unknown as Statement])) as [Moved[]];
  return row;
}

const shownStatus = (status: string): OrderStatus => (status === "PROCESSING" ? "PENDING" : (status as OrderStatus));

type OrderRow = Pick<typeof orders.$inferSelect, "id" | "userId" | "status" | "totalCents" | "createdAt" | "paymentId" | "paidAt">;
type ItemRow = Pick<typeof orderItems.$inferSelect, "productId" | "productName" | "quantity" | "unitPriceCents" | "totalPriceCents">;

function toOrder(row: OrderRow, items: ItemRow[]): Order {
  return {
    id: row.id,
    userId: row.userId,
    status: shownStatus(row.status),
    orderItems: items.map((item) => ({
      productId: item.productId,
      productName: item.productName,
      quantity: item.quantity,
      unitPrice: fromCents(item.unitPriceCents),
      totalPrice: fromCents(item.totalPriceCents),
    })),
    totalAmount: fromCents(row.totalCents),
    createdAt: row.createdAt.toISOString(),
    paymentId: row.paymentId ?? null,
    paidAt: row.paidAt ? row.paidAt.toISOString() : null,
  };
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

type OrderFilters = { id?: number; userId?: number; status?: string };

/** Orders matching `filters` that `caller` may see (their own, or any for an ADMIN), with their items; the total too when `counted`. */
async function selectOrders(db: Pick<Database, "readAll">, caller: Caller, filters: OrderFilters, page: Page | undefined, counted: boolean) {
  const own = isAdmin(caller) ? undefined : caller.id;
  const applied = Object.entries({ id: filters.id, own, userId: filters.userId, status: filters.status }).filter(([, value]) => value !== undefined);
  const shape = `${applied.map(([filter]) => filter).join(",")}|${page ? "paged" : ""}`;
  const values = { ...filters, callerId: own, ...(page ? limitOffset(page) : {}) };
  const [rows, items, totals] = (await db.readAll((r: Reader) => {
    const { rows, items, total } = orderReads(r, shape);
    return counted ? [bound(rows, values), bound(items, values), bound(total, values)] : [bound(rows, values), bound(items, values)];
  })) as [OrderRow[], (ItemRow & { orderId: number })[], { total: number }[]?];
  const list = rows.map((row) =>
    toOrder(
      row,
      items.filter((item) => item.orderId === row.id),
    ),
  );
  return { orders: list, total: totals?.[0].total ?? list.length };
}

/** Another user's order is "not found" to a USER, so ids reveal nothing. */
export async function findOrder(db: Pick<Database, "readAll">, caller: Caller, id: number): Promise<Order> {
  const {
    orders: [order],
  } = await selectOrders(db, caller, { id }, undefined, false);
  if (!order) throw new AppError("ORDER_NOT_FOUND", { id });
  return order;
}

/** `userId` and `status` narrow the list; a USER only ever sees their own (another's id gives an empty list). */
export function listOrders(db: Pick<Database, "readAll">, caller: Caller, query: OrderListQuery) {
  return selectOrders(db, caller, { userId: query.userId, status: query.status }, pageIfAsked(query), true);
}

/**
 * The order's lines priced from `found` (the products as read), or the refusal, in the
 * interface's order: any product missing, then not ACTIVE, then stock (what earlier lines of
 * this order leave).
 */
function priceLines(items: CreateOrderRequest["items"], found: (typeof products.$inferSelect)[]) {
  const byId = new Map(found.map((p) => [p.id, p]));
  for (const productId of new Set(items.map((item) => item.productId))) {
    const product = byId.get(productId);
    if (!product) throw new AppError("PRODUCT_NOT_FOUND", { id: productId });
    if (product.status !== "ACTIVE") throw new AppError("PRODUCT_NOT_AVAILABLE", { id: productId, status: product.status });
  }
  const left = new Map(found.map((p) => [p.id, p.stock]));
  return items.map((item) => {
    const product = byId.get(item.productId)!;
    const available = left.get(item.productId)!;
    if (available < item.quantity) throw new AppError("INSUFFICIENT_INVENTORY", { id: item.productId, requested: item.quantity, available });
    left.set(item.productId, available - item.quantity);
    return { ...item, productName: product.name, unitPriceCents: product.priceCents, totalPriceCents: product.priceCents * item.quantity };
  });
}

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
const emailOfUser = prepared((db: Reader) =>
  db
    .select({ email: users.email })
    .from(users)
    .where(eq(users.id, sql.placeholder("id")))
    .prepare(),
);
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
    sql.placeholder("recipient") as unknown as string,
    sql`json_object('orderId', ${newestOrderId}, 'userId', ${sql.placeholder("userId")}, 'totalAmount', ${sql.placeholder("totalAmount")})`,
    sql.placeholder("now") as unknown as Date,
  ).prepare(),
);
const newestOrder = prepared((tx: Db) =>
  tx
    .select({ id: sql<number>`max(${orders.id})` })
    .from(orders)
    .prepare(),
);

/** Reads between the read and the write that moved stock, status or a price: each costs a new read. */
const ORDER_ATTEMPTS = 5;

/**
 * One read unit (the products, the owner) and one list unit (every line reserved, the order, its
 * items and the ORDER_CREATED notification): with the guard, three round trips to a remote
 * primary. The reservations' CHECK makes concurrent orders never oversell; a refused unit
 * reads again, and then answers the refusal.
 */
export async function createOrder(deps: OrdersDeps, caller: Caller, input: CreateOrderRequest): Promise<Order> {
  const userId = input.userId ?? caller.id;
  if (userId !== caller.id && !isAdmin(caller)) throw new AppError("ACCESS_DENIED");
  const wanted = [...new Set(input.items.map((item) => item.productId))];
  for (let attempt = 1; ; attempt++) {
    const now = new Date(deps.now());
    const cap = { userId, maxPending: deps.orderMaxPending, expiredBefore: expiredBefore(deps, now) };
    const [found, [owner], pending] = (await deps.db.readAll((db) => [
      bound(productsByIds(db, String(wanted.length)), Object.fromEntries(wanted.map((id, i) => [`id${i}`, id]))),
      bound(emailOfUser(db), { id: userId }),
      ...(cap.maxPending === undefined ? [] : [bound(pendingOrders(db), cap)]),
    ])) as [(typeof products.$inferSelect)[], { email: string }[], { n: number }[]?];
    if (!owner) throw new AppError("USER_NOT_FOUND", { id: userId });
    if (cap.maxPending !== undefined && pending![0].n >= cap.maxPending) throw new AppError("TOO_MANY_PENDING_ORDERS", { max: cap.maxPending });
    const lines = priceLines(input.items, found);
    const totalCents = lines.reduce((sum, line) => sum + line.totalPriceCents, 0);
    if (!Number.isSafeInteger(totalCents)) throw new Violations("body", [{ path: "items", key: "field.order.total" }]);
    try {
      const results = await deps.db.writeAll(
        (tx) =>
          [
            ...lines.map((line) => bound(reserve(tx), line)),
            bound(insertOrder(tx, cap.maxPending === undefined ? "" : "capped"), { ...cap, totalCents, now }),
            ...lines.map((line) => bound(insertItem(tx), line)),
            bound(orderCreated(tx), traced({ recipient: owner.email, userId, totalAmount: fromCents(totalCents), now })),
            bound(newestOrder(tx), {}),
          ] as unknown as [Statement, ...Statement[]],
        // A later line's reservation can be refused after an earlier one reserved.
        { failsMidway: lines.length > 1 },
      );
      const [{ id }] = results[results.length - 1] as { id: number }[];
      // Everything the answer shows is in hand: no second read.
      return toOrder({ id, userId, status: "PENDING", totalCents, createdAt: now, paymentId: null, paidAt: null }, lines);
    } catch (error) {
      // A reservation's CHECK (stock, status or price moved since the read) or the cap's NOT NULL
      // (another order of the user came first). Read again.
      if (integrityKind(error) === "other" && attempt < ORDER_ATTEMPTS) continue;
      throw error;
    }
  }
}

const statusOf = prepared((tx: Db, owned: string) =>
  tx
    .select({ status: orders.status })
    .from(orders)
    .where(and(eq(orders.id, sql.placeholder("id")), owned ? eq(orders.userId, sql.placeholder("ownerId")) : undefined))
    .prepare(),
);
const ownerEmail = prepared((tx: Db) =>
  tx
    .select({ email: users.email })
    .from(users)
    .where(eq(users.id, sql`(select ${orders.userId} from ${orders} where ${orders.id} = ${sql.placeholder("id")})`))
    .prepare(),
);
/** PAYMENT_SUCCESS, only if the statement before (the settling UPDATE) changed a row. */
const paymentSucceeded = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(
          notificationSelection(
            "PAYMENT_SUCCESS",
            sql.placeholder("recipient") as unknown as string,
            sql`json_object('orderId', ${sql.placeholder("id")}, 'userId', ${sql.placeholder("userId")}, 'paymentId', ${sql.placeholder("paymentId")}, 'totalAmount', ${sql.placeholder("totalAmount")})`,
            sql.placeholder("at") as unknown as Date,
          ),
        )
        .from(orders)
        // changes(): rows of the statement before, the settling UPDATE.
        .where(and(eq(orders.id, sql.placeholder("id")), sql`changes() = 1`)),
    )
    .prepare(),
);
const orderRow = prepared((tx: Db) =>
  tx
    .select()
    .from(orders)
    .where(eq(orders.id, sql.placeholder("id")))
    .prepare(),
);
const orderItemRows = prepared((tx: Db) =>
  tx
    .select()
    .from(orderItems)
    .where(eq(orderItems.orderId, sql.placeholder("id")))
    .orderBy(asc(orderItems.id))
    .prepare(),
);

/** A declined order's line back in stock. */
const releaseStock = prepared((tx: Db) =>
  tx
    .update(products)
    .set({ stock: sql`${products.stock} + ${sql.placeholder("quantity")}` })
    .where(eq(products.id, sql.placeholder("productId")))
    .prepare(),
);

export async function payOrder(deps: OrdersDeps, caller: Caller, id: number, payment: PaymentRequest): Promise<Order> {
  if (!luhnValid(payment.cardNumber)) throw new Violations("body", [{ path: "cardNumber", key: "field.cardNumber.luhn" }]);
  const { db, logger, paymentGateway: gateway } = deps;
  const ownerId = isAdmin(caller) ? undefined : caller.id;
  const claimedAt = new Date(deps.now());
  // One list unit: claim the order (unless expired), or take over a stale claim (a claim just
  // made is never stale, so at most one of them moves it), and read what the rest of the payment needs.
  const [[claimedNow], [reclaimed], [current], [owner]] = (await db.writeAll(
    (tx) =>
      [
        move(tx, id, "claim", claimedAt, { ownerId, expiredBefore: expiredBefore(deps, claimedAt) }),
        move(tx, id, "reclaim", claimedAt, { ownerId }),
        bound(statusOf(tx, ownerId === undefined ? "" : "owned"), { id, ownerId }),
        bound(ownerEmail(tx), { id }),
      ] as unknown as [Statement, ...Statement[]],
  )) as [Moved[], Moved[], { status: string }[], { email: string }[]];
  const claimed = claimedNow ?? reclaimed;
  if (!claimed) {
    if (!current) throw new AppError("ORDER_NOT_FOUND", { id });
    // PENDING yet not claimed: it expired; it fails now rather than at the next sweep.
    if (current.status === "PENDING" && (await expireOrder(deps, id, claimedAt))) throw new AppError("INVALID_ORDER_STATUS", { id, status: "PAYMENT_FAILED" });
    throw new AppError("INVALID_ORDER_STATUS", { id, status: shownStatus(current.status) });
  }

  let result: Awaited<ReturnType<PaymentGateway["charge"]>>;
  try {
    result = await gateway.charge({ orderId: id, amountCents: claimed.totalCents, cardNumber: payment.cardNumber, idempotencyKey: `order-${id}` });
  } catch (error) {
    await moveNow(db, id, "unclaim", new Date(deps.now()));
    logger.warn({ err: error, orderId: id }, "payment gateway unreachable; order released");
    throw new AppError("PAYMENT_GATEWAY_UNAVAILABLE");
  }

  const at = new Date(deps.now());
  if (result.approved) {
    const { paymentId } = result;
    try {
      // One list unit: settle, notify only if this payer settled it, and read the answer back.
      const [settled, , [row], items] = (await db.writeAll(
        (tx) =>
          [
            move(tx, id, "succeed", at, { paymentId }),
            bound(
              paymentSucceeded(tx),
              traced({ id, recipient: owner?.email ?? null, userId: claimed.userId, paymentId, totalAmount: fromCents(claimed.totalCents), at: at.getTime() }),
            ),
            bound(orderRow(tx), { id }),
            bound(orderItemRows(tx), { id }),
          ] as unknown as [Statement, ...Statement[]],
      )) as [Moved[], unknown, (typeof orders.$inferSelect)[], (typeof orderItems.$inferSelect)[]];
      if (settled.length === 0) throw new AppError("INVALID_ORDER_STATUS", { id, status: shownStatus(row.status) });
      return toOrder(row, items);
    } catch (error) {
      // Charged but not recorded: the order stays PROCESSING until its claim goes stale; the next
      // payment then gets this same result from the gateway (same idempotency key) and records it.
      if (!(error instanceof AppError)) logger.error({ err: error, orderId: id, paymentId }, "payment charged but not recorded");
      throw error;
    }
  }

  await db.write(async (tx) => {
    if (await failPayment(tx, id, "decline", at)) return;
    // A payer whose stale claim was taken over finds the order settled already.
    const [now] = await statusOf(tx).all({ id });
    throw new AppError("INVALID_ORDER_STATUS", { id, status: shownStatus(now.status) });
  });
  throw new AppError("ORDER_PAYMENT_FAILED", { id, cause: result.reason });
}

/** An unpaid order fails, declined or expired: it moves to PAYMENT_FAILED and its lines go back in stock; the order moved, or undefined. */
async function failPayment(tx: Db, id: number, transition: "decline" | "expire", at: Date, expiredBefore?: number) {
  const [moved] = await move(tx, id, transition, at, { expiredBefore });
  if (!moved) return undefined;
  const lines = await orderItemRows(tx).all({ id });
  for (const line of lines) await releaseStock(tx).run(line);
  return moved;
}

/**
 * Expires the order if it is PENDING and older than ORDER_PAYMENT_TIMEOUT, as one unit: failed,
 * stock released, audited and notified (PAYMENT_FAILED, reason "payment timeout"). Whether it did.
 */
async function expireOrder(deps: OrdersDeps, id: number, at: Date) {
  if (deps.orderPaymentTimeoutMs === undefined) return false;
  return deps.db.write(async (tx) => {
    const moved = await failPayment(tx, id, "expire", at, expiredBefore(deps, at));
    if (!moved) return false;
    const details = { reason: PAYMENT_TIMEOUT_REASON };
    await writeAudit(tx, { action: "ORDER_PAYMENT_FAILED", actor: "system", subjectType: "Order", subjectId: id, details }, at);
    const [owner] = await emailOfUser(tx).all({ id: moved.userId });
    await enqueueNotification(tx, "PAYMENT_FAILED", owner?.email ?? null, { orderId: id, userId: moved.userId, totalAmount: fromCents(moved.totalCents), ...details }, at);
    return true;
  });
}

/** How many expired orders one sweep takes at most; the next pass takes the rest. */
const SWEEP_BATCH = 100;
const expiredOrders = prepared((db: Reader) =>
  db
    .select({ id: orders.id })
    .from(orders)
    .where(and(eq(orders.status, "PENDING"), lt(orders.createdAt, sql.placeholder("expiredBefore"))))
    .orderBy(asc(orders.createdAt))
    .limit(SWEEP_BATCH)
    .prepare(),
);

/** One pass of the payment-timeout sweep: every PENDING order past ORDER_PAYMENT_TIMEOUT expires. How many did. */
export async function expireOverdueOrders(deps: OrdersDeps): Promise<number> {
  if (deps.orderPaymentTimeoutMs === undefined) return 0;
  let expired = 0;
  for (;;) {
    const at = new Date(deps.now());
    const due = await expiredOrders(deps.db).all({ expiredBefore: expiredBefore(deps, at) });
    // One unit per order: a payment racing the sweep either claimed it first or finds it failed.
    for (const { id } of due) if (await expireOrder(deps, id, at)) expired++;
    if (due.length < SWEEP_BATCH) return expired;
  }
}

/** The sweep in the serving process, every `intervalMs` (a tenth of the timeout, from 1 s to a minute). */
export function startPaymentTimeoutSweep(deps: OrdersDeps, intervalMs = Math.min(60_000, Math.max(1000, (deps.orderPaymentTimeoutMs ?? 0) / 10))) {
  if (deps.orderPaymentTimeoutMs === undefined) return undefined;
  let running: Promise<unknown> | undefined;
  const pass = () => {
    if (running) return; // the last pass is still at it
    running = expireOverdueOrders(deps)
      .then(
        (expired) => {
          if (expired > 0) deps.logger.info({ expired }, "expired orders not paid within ORDER_PAYMENT_TIMEOUT");
        },
        (error) => deps.logger.warn({ err: error }, "payment-timeout sweep failed"),
      )
      .finally(() => {
        running = undefined;
      });
  };
  pass();
  const timer = setInterval(pass, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
