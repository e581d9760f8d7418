/** TypeBox shapes of the orders API. Amounts are decimals in JSON, integer cents inside. */
import { t, type Static } from "elysia";
import { MAX_PAGE, PatternString } from "../../validation";

/** What clients see; PROCESSING (claimed for payment) is internal and shown as PENDING. */
export const OrderStatus = t.Union([t.Literal("PENDING"), t.Literal("PAID"), t.Literal("PAYMENT_FAILED")]);
export type OrderStatus = Static<typeof OrderStatus>;

export const CreateOrderRequest = t.Object(
  {
    userId: t.Optional(t.Integer({ minimum: 1, description: "Whose order; defaults to the caller. Only an ADMIN may name another user." })),
    items: t.Array(t.Object({ productId: t.Integer({ minimum: 1 }), quantity: t.Integer({ minimum: 1, maximum: 1_000_000 }) }), { minItems: 1, maxItems: 100 }),
  },
  { title: "CreateOrderRequest" },
);
export type CreateOrderRequest = Static<typeof CreateOrderRequest>;

export const PaymentRequest = t.Object(
  {
    // An enum (not a literal), so a wrong method is reported as "must be one of CARD".
    method: t.UnionEnum(["CARD"]),
    cardNumber: PatternString({
      pattern: "^[0-9]{12,19}$",
      description: "12 to 19 digits passing the Luhn check; 4000000000000002 is always declined",
      messages: { pattern: "field.cardNumber.luhn" },
    }),
  },
  { title: "PaymentRequest" },
);
export type PaymentRequest = Static<typeof PaymentRequest>;

export const OrderItem = t.Object(
  { productId: t.Integer(), productName: t.String(), quantity: t.Integer(), unitPrice: t.Number(), totalPrice: t.Number() },
  { title: "OrderItem" },
);

export const Order = t.Object(
  {
    id: t.Integer(),
    userId: t.Integer(),
    status: OrderStatus,
    orderItems: t.Array(OrderItem),
    totalAmount: t.Number({ description: "Sum of the items' totals" }),
    createdAt: t.String({ format: "date-time" }),
    paymentId: t.Nullable(t.String()),
    paidAt: t.Nullable(t.String({ format: "date-time" })),
  },
  { title: "Order" },
);
export type Order = Static<typeof Order>;

export const OrderIdParams = t.Object({ id: t.Integer({ minimum: 1 }) });

export const OrderListQuery = t.Object({
  userId: t.Optional(t.Integer({ minimum: 1 })),
  status: t.Optional(t.UnionEnum(["PENDING", "PAID", "PAYMENT_FAILED"], { description: "Only orders in this status" })),
  page: t.Optional(t.Integer({ minimum: 0, maximum: MAX_PAGE })),
  size: t.Optional(t.Integer({ minimum: 1, maximum: 100 })),
});
export type OrderListQuery = Static<typeof OrderListQuery>;
