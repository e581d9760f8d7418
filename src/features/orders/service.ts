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
import type { Logger } from "pino";
import type { AppDeps } from "../../context";
import type { Database, Db } from "../../db/database";
import { foundOrAgain, type ReadSource, readForAttempt } from "../../db/miss";
import { AppError, integrityKind, Violations } from "../../errors";
import { fromCents } from "../../money";
import { pageIfAsked, type Page } from "../../paging";
import { isAdmin, type Caller } from "../../security/caller";
import { writeAudit } from "../../store/audit";
import {
  changeStatus,
  newOrderId,
  newOrderRows,
  OVERDUE_BATCH,
  orderItemRows,
  orderOwnerEmail,
  orderRow,
  orderStatus,
  overdueOrderIds,
  paymentSuccessRow,
  pendingOrderCount,
  productsWithIds,
  readOrders,
  releaseOrderStock,
  type ItemRow,
  type OrderRow,
  type PricedLine,
  type ProductRow,
} from "../../store/orders";
import { enqueueNotification } from "../../store/outbox";
import { emailOfUser } from "../../store/users";
import type { CreateOrderRequest, Order, OrderListQuery, OrderStatus, PaymentRequest } from "./model";
import type { PaymentGateway } from "../../payment-gateway";
import { createSimulatedGateway, luhnValid } from "./payment-gateway";

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

/**
 * The one way an order's status changes, as a statement for a unit: the order's owner and total,
 * or no row when the order was not in the "from" status (or not the owner's, or for a reclaim, not stale).
 */
function move(tx: Db, id: number, transition: keyof typeof TRANSITIONS, at: Date, options: { paymentId?: string; ownerId?: number; expiredBefore?: number } = {}) {
  // An expired order is never claimed, only expired.
  const change = { ...TRANSITIONS[transition], paid: transition === "succeed", stale: transition === "reclaim", fresh: transition === "claim", expired: transition === "expire" };
  return changeStatus(tx, id, change, {
    at,
    paymentId: options.paymentId,
    ownerId: options.ownerId,
    staleBefore: at.getTime() - STALE_CLAIM_MS,
    expiredBefore: options.expiredBefore ?? Number.MIN_SAFE_INTEGER,
  });
}

/** A move as a unit of its own: the row moved, or undefined. */
async function moveNow(db: Database, ...args: Parameters<typeof move> extends [Db, ...infer Rest] ? Rest : never) {
  const [[row]] = await db.writeAll((tx) => [move(tx, ...args)]);
  return row;
}

const shownStatus = (status: string): OrderStatus => (status === "PROCESSING" ? "PENDING" : (status as OrderStatus));

type Shown = Pick<OrderRow, "id" | "userId" | "status" | "totalCents" | "createdAt" | "paymentId" | "paidAt">;
type ShownItem = Pick<ItemRow, "productId" | "productName" | "quantity" | "unitPriceCents" | "totalPriceCents">;

function toOrder(row: Shown, items: ShownItem[]): Order {
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

type OrderFilters = { id?: number; userId?: number; status?: string };

/** Orders matching `filters` that `caller` may see (their own, or any for an ADMIN), with their items; the total too when `counted`. */
async function selectOrders(db: Pick<Database, "readAll">, caller: Caller, filters: OrderFilters, page: Page | undefined, counted: boolean) {
  const own = isAdmin(caller) ? undefined : caller.id;
  const { rows, items, total } = await readOrders(db, { id: filters.id, own, userId: filters.userId, status: filters.status }, page, counted);
  const list = rows.map((row) =>
    toOrder(
      row,
      items.filter((item) => item.orderId === row.id),
    ),
  );
  return { orders: list, total: total ?? list.length };
}

/** Another user's order is "not found" to a USER, so ids reveal nothing. */
export async function findOrder(db: Pick<Database, "readAll">, caller: Caller, id: number): Promise<Order> {
  // Made at another edge a moment ago: read again at the primary (db/miss.ts).
  const {
    orders: [order],
  } = await foundOrAgain(
    db,
    (source) => selectOrders(source, caller, { id }, undefined, false),
    (found) => found.orders.length === 0,
  );
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
function priceLines(items: CreateOrderRequest["items"], found: ProductRow[]): PricedLine[] | AppError {
  const byId = new Map(found.map((p) => [p.id, p]));
  for (const productId of new Set(items.map((item) => item.productId))) {
    const product = byId.get(productId);
    if (!product) return new AppError("PRODUCT_NOT_FOUND", { id: productId });
    if (product.status !== "ACTIVE") return new AppError("PRODUCT_NOT_AVAILABLE", { id: productId, status: product.status });
  }
  const left = new Map(found.map((p) => [p.id, p.stock]));
  const lines: PricedLine[] = [];
  for (const item of items) {
    const product = byId.get(item.productId)!;
    const available = left.get(item.productId)!;
    if (available < item.quantity) return new AppError("INSUFFICIENT_INVENTORY", { id: item.productId, requested: item.quantity, available });
    left.set(item.productId, available - item.quantity);
    lines.push({ ...item, productName: product.name, unitPriceCents: product.priceCents, totalPriceCents: product.priceCents * item.quantity });
  }
  return lines;
}

/** Reads between the read and the write that moved stock, status or a price: each costs a new read. */
const ORDER_ATTEMPTS = 5;

/**
 * One read unit (the products, the owner) and one list unit (every line reserved, the order, its
 * items and the ORDER_CREATED notification): with the guard, three round trips to a remote
 * primary. The reservations' CHECK makes concurrent orders never oversell; a refused unit
 * reads again, and then answers the refusal.
 *
 * On an embedded replica the copy may lag either way (stock taken, or restocked, at another
 * edge): a refusal read on the copy is read again at the primary before it is answered, and a
 * unit refused since the read reads again at the primary.
 */
export async function createOrder(deps: OrdersDeps, caller: Caller, input: CreateOrderRequest): Promise<Order> {
  const userId = input.userId ?? caller.id;
  if (userId !== caller.id && !isAdmin(caller)) throw new AppError("ACCESS_DENIED");
  const wanted = [...new Set(input.items.map((item) => item.productId))];
  for (let attempt = 1; ; attempt++) {
    const now = new Date(deps.now());
    const cap = deps.orderMaxPending === undefined ? undefined : { maxPending: deps.orderMaxPending, expiredBefore: expiredBefore(deps, now) };
    /** The buyer and the priced lines as `source` holds them, or the refusal. */
    const judge = async (source: ReadSource) => {
      const {
        found,
        owner: [owner],
        pending,
      } = await source.readAll((db) => ({
        found: productsWithIds(db, wanted),
        owner: emailOfUser(db, userId),
        pending: cap ? pendingOrderCount(db, userId, cap.expiredBefore) : undefined,
      }));
      if (!owner) return new AppError("USER_NOT_FOUND", { id: userId });
      if (cap && pending![0].n >= cap.maxPending) return new AppError("TOO_MANY_PENDING_ORDERS", { max: cap.maxPending });
      const lines = priceLines(input.items, found);
      return lines instanceof AppError ? lines : { owner, lines };
    };
    const judged = await readForAttempt(deps.db, attempt, judge, (answer) => answer instanceof AppError);
    if (judged instanceof AppError) throw judged;
    const { owner, lines } = judged;
    const totalCents = lines.reduce((sum, line) => sum + line.totalPriceCents, 0);
    if (!Number.isSafeInteger(totalCents)) throw new Violations("body", [{ path: "items", key: "field.order.total" }]);
    try {
      const {
        order: [{ id }],
      } = await deps.db.writeAll(
        (tx) => ({
          created: newOrderRows(tx, { userId, totalCents, lines, recipient: owner.email, totalAmount: fromCents(totalCents), cap }, now),
          order: newOrderId(tx),
        }),
        // A later line's reservation can be refused after an earlier one reserved.
        { failsMidway: lines.length > 1 },
      );
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

export async function payOrder(deps: OrdersDeps, caller: Caller, id: number, payment: PaymentRequest): Promise<Order> {
  if (!luhnValid(payment.cardNumber)) throw new Violations("body", [{ path: "cardNumber", key: "field.cardNumber.luhn" }]);
  const { db, logger, paymentGateway: gateway } = deps;
  const ownerId = isAdmin(caller) ? undefined : caller.id;
  const claimedAt = new Date(deps.now());
  // One list unit: claim the order (unless expired), or take over a stale claim (a claim just
  // made is never stale, so at most one of them moves it), and read what the rest of the payment needs.
  const [[claimedNow], [reclaimed], [current], [owner]] = await db.writeAll((tx) => [
    move(tx, id, "claim", claimedAt, { ownerId, expiredBefore: expiredBefore(deps, claimedAt) }),
    move(tx, id, "reclaim", claimedAt, { ownerId }),
    orderStatus(tx, id, ownerId),
    orderOwnerEmail(tx, id),
  ]);
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
      const {
        settled,
        order: [row],
        items,
      } = await db.writeAll((tx) => ({
        settled: move(tx, id, "succeed", at, { paymentId }),
        notified: paymentSuccessRow(tx, { id, recipient: owner?.email ?? null, userId: claimed.userId, paymentId, totalAmount: fromCents(claimed.totalCents), at: at.getTime() }),
        order: orderRow(tx, id),
        items: orderItemRows(tx, id),
      }));
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
    const [now] = await orderStatus(tx, id);
    throw new AppError("INVALID_ORDER_STATUS", { id, status: shownStatus(now.status) });
  });
  throw new AppError("ORDER_PAYMENT_FAILED", { id, cause: result.reason });
}

/** An unpaid order fails, declined or expired: it moves to PAYMENT_FAILED and its lines go back in stock; the order moved, or undefined. */
async function failPayment(tx: Db, id: number, transition: "decline" | "expire", at: Date, expiredBefore?: number) {
  const [moved] = await move(tx, id, transition, at, { expiredBefore });
  if (!moved) return undefined;
  await releaseOrderStock(tx, id);
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
    const [owner] = await emailOfUser(tx, moved.userId);
    await enqueueNotification(tx, "PAYMENT_FAILED", owner?.email ?? null, { orderId: id, userId: moved.userId, totalAmount: fromCents(moved.totalCents), ...details }, at);
    return true;
  });
}

/** One pass of the payment-timeout sweep: every PENDING order past ORDER_PAYMENT_TIMEOUT expires. How many did. */
export async function expireOverdueOrders(deps: OrdersDeps): Promise<number> {
  if (deps.orderPaymentTimeoutMs === undefined) return 0;
  let expired = 0;
  for (;;) {
    const at = new Date(deps.now());
    const due = await overdueOrderIds(deps.db, expiredBefore(deps, at));
    // One unit per order: a payment racing the sweep either claimed it first or finds it failed.
    for (const { id } of due) if (await expireOrder(deps, id, at)) expired++;
    if (due.length < OVERDUE_BATCH) return expired;
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
