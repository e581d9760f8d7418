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

/** A success envelope: always `success: true` and `data`, never an errorCode. */
export interface Success<T> {
  success: true;
  message: string;
  data: T;
  timestamp: string;
}

/**
 * Success envelopes stamped by `now` (the app's clock): routes use the one bound in their
 * context (`ctx.ok`), so no answer can take the machine's clock by forgetting an argument.
 */
export const successOn =
  (now: () => number) =>
  <T>(data: T, message = "OK"): Success<T> => ({ success: true, message, data, timestamp: new Date(now()).toISOString() });

/** `at`: the instant of the answer, from the app's clock (errorsPlugin's `now`). */
export function failure(at: number, message: string, errorCode?: string, errors?: string[]): Envelope<never> {
  const body: Envelope<never> = { success: false, message, timestamp: new Date(at).toISOString() };
  if (errorCode) body.errorCode = errorCode;
  if (errors) body.errors = errors;
  return body;
}

/**
 * Response schema of a success envelope carrying `data` of the given schema, named in the
 * OpenAPI document `<name>Envelope` (name: the data schema's title unless given).
 */
export const EnvelopeOf = <T extends TSchema>(data: T, name: string | undefined = data.title) => {
  if (!name) throw new Error('EnvelopeOf needs a name for untitled data (e.g. EnvelopeOf(t.Boolean(), "Boolean"))');
  return t.Object(
    {
      success: t.Literal(true),
      message: t.String(),
      data,
      timestamp: t.String({ format: "date-time" }),
    },
    { title: `${name}Envelope` },
  );
};

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
