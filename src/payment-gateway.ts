/**
 * Where card payments go: the port a deployment plugs a real gateway into (AppDeps.paymentGateway;
 * a test passes a counting one). The built-in simulator is the orders feature's
 * (features/orders/payment-gateway.ts), as docs/api.md describes ("Products, orders and notifications").
 */
export interface ChargeRequest {
  orderId: number;
  amountCents: number;
  cardNumber: string;
  /** The same key twice gets the first charge's result, never a second charge (what real gateways offer). */
  idempotencyKey: string;
}

export type ChargeResult = { approved: true; paymentId: string } | { approved: false; reason: string };

export interface PaymentGateway {
  /** Declines are results; a thrown error means the gateway could not be asked (nothing charged). */
  charge(request: ChargeRequest): Promise<ChargeResult>;
}
