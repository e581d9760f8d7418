/** The interface's ApiResponse envelope: every error, and the /api/auth/** answers. */
import { t, type TSchema } from "elysia";

export interface Envelope<T = unknown> {
  success: boolean;
  message: string;
  errorCode?: string;
  data?: T;
  errors?: string[];
  timestamp: string;
}

export function ok<T>(data: T, message = "OK"): Envelope<T> {
  return { success: true, message, data, timestamp: new Date().toISOString() };
}

export function failure(message: string, errorCode?: string, errors?: string[]): Envelope<never> {
  const body: Envelope<never> = { success: false, message, timestamp: new Date().toISOString() };
  if (errorCode) body.errorCode = errorCode;
  if (errors) body.errors = errors;
  return body;
}

/** Response schema of an envelope carrying `data` of the given schema. */
export const EnvelopeOf = <T extends TSchema>(data: T) =>
  t.Object({
    success: t.Boolean(),
    message: t.String(),
    errorCode: t.Optional(t.String()),
    data: t.Optional(data),
    errors: t.Optional(t.Array(t.String())),
    timestamp: t.String({ format: "date-time" }),
  });

export const ErrorEnvelope = t.Object(
  {
    success: t.Literal(false),
    message: t.String(),
    errorCode: t.Optional(t.String({ description: "UPPER_SNAKE code; absent on body and parameter validation failures" })),
    errors: t.Optional(t.Array(t.String(), { description: "`<field.path>: <message>` per violation" })),
    timestamp: t.String({ format: "date-time" }),
  },
  { title: "ErrorEnvelope" },
);

/** The `response` entries of the error statuses a route can answer, all the envelope. */
export const errorResponses = <S extends number>(...statuses: S[]) =>
  Object.fromEntries(statuses.map((status) => [status, ErrorEnvelope])) as Record<S, typeof ErrorEnvelope>;
