/** The built-in card payment simulator docs/api.md describes ("Products, orders and notifications"), behind the PaymentGateway port (src/payment-gateway.ts). */
import type { ChargeResult, PaymentGateway } from "../../payment-gateway";

/** The simulator's card that is always declined. */
export const DECLINED_TEST_CARD = "4000000000000002";

export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** The simulator (one per app); it remembers results by idempotency key for as long as it lives. */
export function createSimulatedGateway(): PaymentGateway {
  const answered = new Map<string, ChargeResult>();
  return {
    async charge({ cardNumber, idempotencyKey }) {
      let result = answered.get(idempotencyKey);
      if (!result) {
        result = cardNumber === DECLINED_TEST_CARD ? { approved: false, reason: "card declined by issuer" } : { approved: true, paymentId: `PAY-${crypto.randomUUID()}` };
        answered.set(idempotencyKey, result);
      }
      return result;
    },
  };
}
