/**
 * The order workflow: creation, payment and reads, with the state machine in one place
 * (TRANSITIONS / move). Every status change is one conditional UPDATE on the expected
 * "from" status, so two callers can never both make the same transition:
 *
 *   (none) ──create──▶ PENDING ──claim──▶ PROCESSING ──succeed──▶ PAID
 *                         ▲                  │ ▲└──────decline──▶ PAYMENT_FAILED (stock released)
 *                         └─────unclaim──────┘ └reclaim┘ (a claim older than STALE_CLAIM_MS)
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
import { and, asc, count, eq, inArray, lt, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { Logger } from "pino";
import type { Database, Db, Reader } from "../../db/client";
import { prepared } from "../../db/prepared";
import { orderItems, orders, products, users } from "../../db/schema";
import { AppError, Violations } from "../../errors";
import { pageIfAsked, withPage, type Page } from "../../paging";
import { isAdmin, type Caller } from "../auth/guard";
import { enqueueNotification } from "../notifications/outbox";
import { fromCents } from "../products/money";
import type { CreateOrderRequest, Order, OrderListQuery, OrderStatus, PaymentRequest } from "./model";
import { luhnValid, type PaymentGateway } from "./payment-gateway";

export interface OrdersDeps {
  db: Database;
  logger: Logger;
  now: () => number;
  paymentGateway: PaymentGateway;
}


type StoredStatus = "PENDING" | "PROCESSING" | "PAID" | "PAYMENT_FAILED";

/** How long a payer may hold an order before another payment may take it over. */
export const STALE_CLAIM_MS = 2 * 60_000;

const TRANSITIONS = {
  claim: { from: "PENDING", to: "PROCESSING" },
  reclaim: { from: "PROCESSING", to: "PROCESSING" },
  succeed: { from: "PROCESSING", to: "PAID" },
  decline: { from: "PROCESSING", to: "PAYMENT_FAILED" },
  unclaim: { from: "PROCESSING", to: "PENDING" },
} as const satisfies Record<string, { from: StoredStatus; to: StoredStatus }>;

/** A move's values, or placeholders for them in a prepared move. */
interface MoveValues {
  id: number | Placeholder;
  at: Date | Placeholder;
  ownerId?: number;
  payment?: { paymentId: string | Placeholder; paidAt: Date | Placeholder };
}

/**
 * The one way an order's status changes; no row when the order was not in the "from" status
 * (or not the owner's, or for a reclaim, not stale). A statement, for a unit of work.
 */
function move(tx: Db, transition: keyof typeof TRANSITIONS, { id, at, ownerId, payment }: MoveValues) {
  const { from, to } = TRANSITIONS[transition];
  return tx
    .update(orders)
    .set({ status: to, updatedAt: at as Date, ...(payment as { paymentId: string; paidAt: Date } | undefined) })
    .where(
      and(
        eq(orders.id, id as number),
        eq(orders.status, from),
        ownerId === undefined ? undefined : eq(orders.userId, ownerId),
        transition === "reclaim" ? lt(orders.updatedAt, new Date((at as Date).getTime() - STALE_CLAIM_MS)) : undefined,
      ),
    )
    .returning({ userId: orders.userId, totalCents: orders.totalCents });
}

/** A move as a unit of its own: the row moved, or undefined. */
async function moveNow(db: Database, transition: keyof typeof TRANSITIONS, values: MoveValues & { id: number; at: Date }) {
  const [[row]] = await db.writeAll((tx) => [move(tx, transition, values)]);
  return row;
}

/** Settling a claim, prepared: the success records the payment. */
const settleStatement = prepared((tx: Db, transition: string) =>
  move(tx, transition as "succeed" | "decline", {
    id: sql.placeholder("id"),
    at: sql.placeholder("at"),
    payment: transition === "succeed" ? { paymentId: sql.placeholder("paymentId"), paidAt: sql.placeholder("at") } : undefined,
  }).prepare(),
);
const statusOf = prepared((tx: Db) => tx.select({ status: orders.status }).from(orders).where(eq(orders.id, sql.placeholder("id"))).prepare());
const itemsOf = prepared((tx: Db) => tx.select({ productId: orderItems.productId, quantity: orderItems.quantity }).from(orderItems).where(eq(orderItems.orderId, sql.placeholder("id"))).prepare());
const restock = prepared((tx: Db) =>
  tx.update(products).set({ stock: sql`${products.stock} + ${sql.placeholder("quantity")}` }).where(eq(products.id, sql.placeholder("productId"))).prepare(),
);

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

/** Orders matching `where`, with their items, oldest first. */
async function selectOrders(db: Reader, where: SQL | undefined, page?: Page): Promise<Order[]> {
  const rows = await withPage(db.select().from(orders).where(where).orderBy(asc(orders.id)).$dynamic(), page);
  if (rows.length === 0) return [];
  const items = await db
    .select()
    .from(orderItems)
    .where(inArray(orderItems.orderId, rows.map((r) => r.id)))
    .orderBy(asc(orderItems.id));
  return rows.map((row) => toOrder(row, items.filter((item) => item.orderId === row.id)));
}

/** What the caller may see: their own orders, or any for an ADMIN. */
const visibleTo = (caller: Caller) => (isAdmin(caller) ? undefined : eq(orders.userId, caller.id));

/** Another user's order is "not found" to a USER, so ids reveal nothing. */
export async function findOrder(db: Reader, caller: Caller, id: number): Promise<Order> {
  const [order] = await selectOrders(db, and(eq(orders.id, id), visibleTo(caller)));
  if (!order) throw new AppError("ORDER_NOT_FOUND", { id });
  return order;
}

/** `userId` and `status` narrow the list; a USER only ever sees their own (another's id gives an empty list). */
export async function listOrders(db: Reader, caller: Caller, query: OrderListQuery) {
  const where = and(
    visibleTo(caller),
    query.userId === undefined ? undefined : eq(orders.userId, query.userId),
    query.status === undefined ? undefined : eq(orders.status, query.status),
  );
  const [list, [{ total }]] = await Promise.all([
    selectOrders(db, where, pageIfAsked(query)),
    db.select({ total: count() }).from(orders).where(where),
  ]);
  return { orders: list, total };
}

/**
 * Reserves one line: the UPDATE is both the check (ACTIVE, enough stock left) and the write,
 * and hands back what the line records. Undefined when it cannot: refusal() says why.
 */
const reserveStatement = prepared((tx: Db) =>
  tx
    .update(products)
    .set({ stock: sql`${products.stock} - ${sql.placeholder("quantity")}` })
    .where(and(eq(products.id, sql.placeholder("productId")), eq(products.status, "ACTIVE"), sql`${products.stock} >= ${sql.placeholder("quantity")}`))
    .returning({ name: products.name, priceCents: products.priceCents })
    .prepare(),
);

async function reserve(tx: Db, productId: number, quantity: number) {
  const [taken] = await reserveStatement(tx).all({ productId, quantity });
  return taken;
}

const emailOfUser = prepared((db: Reader) => db.select({ email: users.email }).from(users).where(eq(users.id, sql.placeholder("id"))).prepare());
const insertOrder = prepared((tx: Db) =>
  tx
    .insert(orders)
    .values({ userId: sql.placeholder("userId"), status: "PENDING", totalCents: sql.placeholder("totalCents"), createdAt: sql.placeholder("now"), updatedAt: sql.placeholder("now") })
    .returning({ id: orders.id })
    .prepare(),
);
const insertItem = prepared((tx: Db) =>
  tx
    .insert(orderItems)
    .values({
      orderId: sql.placeholder("orderId"),
      productId: sql.placeholder("productId"),
      productName: sql.placeholder("productName"),
      quantity: sql.placeholder("quantity"),
      unitPriceCents: sql.placeholder("unitPriceCents"),
      totalPriceCents: sql.placeholder("totalPriceCents"),
    })
    .prepare(),
);

/** Why a line could not be reserved, in the interface's order: any product missing, then not ACTIVE, then stock. */
async function refusal(tx: Db, items: CreateOrderRequest["items"], failed: { productId: number; quantity: number }) {
  const wanted = [...new Set(items.map((item) => item.productId))];
  const found = new Map((await tx.select().from(products).where(inArray(products.id, wanted))).map((p) => [p.id, p]));
  for (const productId of wanted) {
    const product = found.get(productId);
    if (!product) return new AppError("PRODUCT_NOT_FOUND", { id: productId });
    if (product.status !== "ACTIVE") return new AppError("PRODUCT_NOT_AVAILABLE", { id: productId, status: product.status });
  }
  // What earlier lines of this order left (they are rolled back with it).
  const available = found.get(failed.productId)!.stock;
  return new AppError("INSUFFICIENT_INVENTORY", { id: failed.productId, requested: failed.quantity, available });
}

/** All lines reserved, the order, its items and the ORDER_CREATED notification: one transaction, or nothing. */
export async function createOrder(deps: OrdersDeps, caller: Caller, input: CreateOrderRequest): Promise<Order> {
  const userId = input.userId ?? caller.id;
  if (userId !== caller.id && !isAdmin(caller)) throw new AppError("ACCESS_DENIED");
  const now = new Date(deps.now());
  return deps.db.write(async (tx) => {
    let recipient = caller.email;
    if (userId !== caller.id) {
      const [owner] = await emailOfUser(tx).all({ id: userId });
      if (!owner) throw new AppError("USER_NOT_FOUND", { id: userId });
      recipient = owner.email;
    }
    const lines = [];
    for (const item of input.items) {
      const product = await reserve(tx, item.productId, item.quantity);
      if (!product) throw await refusal(tx, input.items, item);
      lines.push({ ...item, productName: product.name, unitPriceCents: product.priceCents, totalPriceCents: product.priceCents * item.quantity });
    }
    const totalCents = lines.reduce((sum, line) => sum + line.totalPriceCents, 0);
    if (!Number.isSafeInteger(totalCents)) throw new Violations("body", [{ path: "items", key: "field.order.total" }]);
    const [order] = await insertOrder(tx).all({ userId, totalCents, now });
    for (const line of lines) await insertItem(tx).run({ ...line, orderId: order.id });
    await enqueueNotification(tx, "ORDER_CREATED", recipient, { orderId: order.id, userId, totalAmount: fromCents(totalCents) }, now);
    // Everything the answer shows is in hand: no second read.
    return toOrder({ id: order.id, userId, status: "PENDING", totalCents, createdAt: now, paymentId: null, paidAt: null }, lines);
  });
}

export async function payOrder(deps: OrdersDeps, caller: Caller, id: number, payment: PaymentRequest): Promise<Order> {
  if (!luhnValid(payment.cardNumber)) throw new Violations("body", [{ path: "cardNumber", key: "field.cardNumber.luhn" }]);
  const { db, logger, paymentGateway: gateway } = deps;
  const ownerId = isAdmin(caller) ? undefined : caller.id;
  const claimedAt = new Date(deps.now());
  const claimed = (await moveNow(db, "claim", { id, at: claimedAt, ownerId })) ?? (await moveNow(db, "reclaim", { id, at: claimedAt, ownerId }));
  if (!claimed) {
    const order = await findOrder(db, caller, id);
    throw new AppError("INVALID_ORDER_STATUS", { id, status: order.status });
  }

  let result: Awaited<ReturnType<PaymentGateway["charge"]>>;
  try {
    result = await gateway.charge({ orderId: id, amountCents: claimed.totalCents, cardNumber: payment.cardNumber, idempotencyKey: `order-${id}` });
  } catch (error) {
    await moveNow(db, "unclaim", { id, at: new Date(deps.now()) });
    logger.warn({ err: error, orderId: id }, "payment gateway unreachable; order released");
    throw new AppError("PAYMENT_GATEWAY_UNAVAILABLE");
  }

  const at = new Date(deps.now());
  /** Settles the claim; a payer whose stale claim was taken over finds the order settled already. */
  const settle = async (tx: Db, transition: "succeed" | "decline", paymentId?: string) => {
    if ((await settleStatement(tx, transition).all({ id, at, paymentId })).length > 0) return;
    const [current] = await statusOf(tx).all({ id });
    throw new AppError("INVALID_ORDER_STATUS", { id, status: shownStatus(current.status) });
  };
  if (result.approved) {
    const { paymentId } = result;
    try {
      await db.write(async (tx) => {
        await settle(tx, "succeed", paymentId);
        const [owner] = await emailOfUser(tx).all({ id: claimed.userId });
        await enqueueNotification(tx, "PAYMENT_SUCCESS", owner?.email ?? null, { orderId: id, userId: claimed.userId, paymentId, totalAmount: fromCents(claimed.totalCents) }, at);
      });
    } catch (error) {
      // Charged but not recorded: the order stays PROCESSING until its claim goes stale; the next
      // payment then gets this same result from the gateway (same idempotency key) and records it.
      if (!(error instanceof AppError)) logger.error({ err: error, orderId: id, paymentId }, "payment charged but not recorded");
      throw error;
    }
    return findOrder(db, caller, id);
  }

  await db.write(async (tx) => {
    await settle(tx, "decline");
    for (const line of await itemsOf(tx).all({ id })) await restock(tx).run(line);
  });
  throw new AppError("ORDER_PAYMENT_FAILED", { id, cause: result.reason });
}
