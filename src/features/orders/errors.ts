/** The orders feature's error codes and texts (English, and zh-TW). */
import { defineErrors, defineTexts } from "../../i18n";

const ordersErrors = defineErrors({
  ORDER_NOT_FOUND: { status: 404, en: (p) => `Order not found, ID: ${p.id}`, "zh-TW": (p) => `找不到訂單，ID: ${p.id}` },
  PRODUCT_NOT_AVAILABLE: {
    status: 400,
    en: (p) => `Product ${p.id} cannot be ordered (status ${p.status})`,
    "zh-TW": (p) => `商品 ${p.id} 無法訂購（狀態 ${p.status}）`,
  },
  INSUFFICIENT_INVENTORY: {
    status: 400,
    en: (p) => `Insufficient inventory for product ${p.id}: requested ${p.requested}, available ${p.available}`,
    "zh-TW": (p) => `商品 ${p.id} 庫存不足：需要 ${p.requested}，剩餘 ${p.available}`,
  },
  INVALID_ORDER_STATUS: {
    status: 400,
    en: (p) => `Order ${p.id} cannot be paid in status ${p.status}`,
    "zh-TW": (p) => `訂單 ${p.id} 狀態為 ${p.status}，無法付款`,
  },
  ORDER_PAYMENT_FAILED: { status: 400, en: (p) => `Payment for order ${p.id} failed: ${p.cause}`, "zh-TW": (p) => `訂單 ${p.id} 付款失敗：${p.cause}` },
  TOO_MANY_PENDING_ORDERS: {
    status: 409,
    en: (p) => `Too many orders waiting for payment (at most ${p.max}): pay or wait for one before ordering again`,
    "zh-TW": (p) => `待付款的訂單過多（最多 ${p.max} 筆），請先付款或稍後再下單`,
  },
  PAYMENT_GATEWAY_UNAVAILABLE: {
    status: 503,
    en: "The payment gateway could not be reached; nothing was charged, try again later",
    "zh-TW": "無法連線至付款服務，未扣款，請稍後再試",
  },
});

const ordersTexts = defineTexts({
  "field.order.total": { en: "make an order total too large to compute exactly", "zh-TW": "訂單總額過大" },
  "field.cardNumber.luhn": { en: "is not a valid card number", "zh-TW": "信用卡號碼不正確" },
});

/** This feature's part of the catalogue (src/catalogue.ts lists it once). */
export const ordersCatalogue = { errors: ordersErrors, texts: ordersTexts };
