/** Feature folder orders/: orders and their payment workflow (/api/orders), with the payment gateway. */
/** /api/orders: thin HTTP over the order workflow; every caller sees and pays only their own orders unless ADMIN. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { CreateOrderRequest, Order, OrderIdParams, OrderListQuery, PaymentRequest } from "./model";
import { createOrder, findOrder, listOrders, ordersDeps, payOrder } from "./service";

const errors = errorResponses(400, 401, 403, 404, 409, 503);

export const ordersRoutes = (ctx: AppContext) => {
  const deps = ordersDeps(ctx);
  return new Elysia({ prefix: "/api/orders", tags: ["Orders"] })
    .use(ctx.auth)
    .post(
      "",
      async ({ body, caller, set }) => {
        const order = await createOrder(deps, caller, body);
        set.status = 201;
        return order;
      },
      {
        access: { allow: "authenticated", scope: "orders:write" },
        sample: (walk: Walk) => ({ path: "/api/orders", body: { userId: walk.registered.id, items: [{ productId: walk.productId, quantity: 1 }] }, status: 201 }),
        body: CreateOrderRequest,
        response: { 201: Order, ...errors },
        detail: {
          summary: "Place an order",
          description:
            "Reserves stock for every line in one transaction (400 INSUFFICIENT_INVENTORY reserves nothing). userId defaults to the caller; only an ADMIN may order for someone else.",
        },
      },
    )
    .get(
      "",
      async ({ query, caller, set }) => {
        const { orders, total } = await listOrders(ctx.db, caller, query);
        set.headers["x-total-count"] = String(total);
        return orders;
      },
      {
        access: { allow: "authenticated", scope: "orders:read" },
        sample: () => ({ path: "/api/orders", status: 200 }),
        query: OrderListQuery,
        response: { 200: t.Array(Order), ...errors },
        detail: {
          summary: "List orders",
          description: "A USER sees only their own orders; an ADMIN sees all, optionally of one userId. status narrows to one status. Total in X-Total-Count.",
          ...documentedHeaders({ 200: ["X-Total-Count"] }),
        },
      },
    )
    .get("/:id", ({ params, caller }) => findOrder(ctx.db, caller, params.id), {
      access: { allow: "authenticated", scope: "orders:read" },
      sample: (walk: Walk) => ({ path: `/api/orders/${walk.orderId}`, status: 200 }),
      params: OrderIdParams,
      response: { 200: Order, ...errors },
      detail: { summary: "Get an order", description: "Another user's order is 404 ORDER_NOT_FOUND to a USER." },
    })
    .post("/:id/pay", ({ params, body, caller }) => payOrder(deps, caller, params.id, body), {
      access: { allow: "authenticated", scope: "orders:write" },
      sample: (walk: Walk) => ({ path: `/api/orders/${walk.orderId}/pay`, body: { method: "CARD", cardNumber: "4111111111111111" }, status: 200 }),
      params: OrderIdParams,
      body: PaymentRequest,
      response: { 200: Order, ...errors },
      detail: {
        summary: "Pay a PENDING order by card",
        description:
          "Success: PAID with paymentId and paidAt. Decline (test card 4000000000000002): PAYMENT_FAILED, stock released, 400 ORDER_PAYMENT_FAILED. Not PENDING: 400 INVALID_ORDER_STATUS, unchanged.",
      },
    });
};
