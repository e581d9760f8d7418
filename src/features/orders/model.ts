/** TypeBox shapes of the orders API. Amounts are decimals in JSON, integer cents inside. */
import { t, type Static } from "elysia";
import { defineErrors } from "../../errors";
import { defineMessages } from "../../i18n";
import { MAX_PAGE } from "../../validation";

defineErrors({
  ORDER_NOT_FOUND: { status: 404, message: "error.orderNotFound" },
  PRODUCT_NOT_AVAILABLE: { status: 400, message: "error.productNotAvailable" },
  INSUFFICIENT_INVENTORY: { status: 400, message: "error.insufficientInventory" },
  INVALID_ORDER_STATUS: { status: 400, message: "error.invalidOrderStatus" },
  ORDER_PAYMENT_FAILED: { status: 400, message: "error.orderPaymentFailed" },
  PAYMENT_GATEWAY_UNAVAILABLE: { status: 503, message: "error.paymentGatewayUnavailable" },
});

defineMessages({
  "error.orderNotFound": { en: (p) => `Order not found, ID: ${p.id}`, "zh-TW": (p) => `找不到訂單，ID: ${p.id}` },
  "error.productNotAvailable": {
    en: (p) => `Product ${p.id} cannot be ordered (status ${p.status})`,
    "zh-TW": (p) => `商品 ${p.id} 無法訂購（狀態 ${p.status}）`,
  },
  "error.insufficientInventory": {
    en: (p) => `Insufficient inventory for product ${p.id}: requested ${p.requested}, available ${p.available}`,
    "zh-TW": (p) => `商品 ${p.id} 庫存不足：需要 ${p.requested}，剩餘 ${p.available}`,
  },
  "error.invalidOrderStatus": {
    en: (p) => `Order ${p.id} cannot be paid in status ${p.status}`,
    "zh-TW": (p) => `訂單 ${p.id} 狀態為 ${p.status}，無法付款`,
  },
  "error.orderPaymentFailed": { en: (p) => `Payment for order ${p.id} failed: ${p.cause}`, "zh-TW": (p) => `訂單 ${p.id} 付款失敗：${p.cause}` },
  "error.paymentGatewayUnavailable": {
    en: "The payment gateway could not be reached; nothing was charged, try again later",
    "zh-TW": "無法連線至付款服務，未扣款，請稍後再試",
  },
  "field.order.total": { en: "make an order total too large to compute exactly", "zh-TW": "訂單總額過大" },
  "field.cardNumber.luhn": { en: "is not a valid card number", "zh-TW": "信用卡號碼不正確" },
});

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
    cardNumber: t.String({ pattern: "^[0-9]{12,19}$", description: "12 to 19 digits passing the Luhn check; 4000000000000002 is always declined", messages: { pattern: "field.cardNumber.luhn" } } as never),
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
