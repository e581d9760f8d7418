/**
 * Tracing: W3C trace context in, spans out over OTLP/HTTP, when OTEL_EXPORTER_OTLP_ENDPOINT (or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. This file is all that loads otherwise: the
 * OpenTelemetry SDK (otel.ts) is imported only by startTracing with a configuration, so a
 * service without it keeps its idle memory and its read path as they were.
 *
 * The hooks, each in one place: a span per request (src/http/request-context.ts: named by route
 * template, with its status), a span per unit of work inside a trace (`database`, applied where
 * main.ts opens the database; round trips to a remote primary counted by the driver through
 * `roundTrip`), and a span per outbox delivery (sender.ts) that continues the trace of the
 * request whose unit wrote the row (its `traceparent`, stored with the row) and hands the
 * webhook its own traceparent. Log lines written inside a span carry its trace_id and span_id.
 */
import type { TracingConfig } from "../config";
import type { Database } from "../db/database";

export interface Tracing {
  /** Runs one request's handling inside its span, continuing the request's `traceparent` when it has one. */
  request<T>(request: Request, handle: () => T): T;
  /** Names the request's span by its route template (`GET /api/users/:id`), records the status and ends it. */
  answered(request: Request, route: string, status: number): void;
  /** The database with a span for each unit of work (write, writeAll, readAll) run inside a trace. */
  database(db: Database): Database;
  /** One round trip to the database: counted on the active unit's span and the request's. */
  roundTrip(): void;
  /**
   * One outbox delivery in a span continuing `parent` (the row's stored traceparent); `deliver`
   * gets the delivery span's own traceparent for the receiver.
   */
  delivery<T>(name: string, parent: string | null, attributes: Record<string, string | number>, deliver: (traceparent: string | undefined) => Promise<T>): Promise<T>;
  /** The active span as a `traceparent` value, if there is one. */
  traceparent(): string | undefined;
  /** trace_id and span_id of the active span, for a log line (pino's mixin). */
  logFields(): Record<string, string>;
  /** Exports the spans ended so far. */
  flush(): Promise<void>;
  /** Exports what is left and stops. */
  shutdown(): Promise<void>;
}

/** The one started in this process, for what runs deep inside units (the outbox row's traceparent). */
let started: Tracing | undefined;

/** Loads the OpenTelemetry SDK and starts exporting; without a configuration, nothing is loaded. */
export async function startTracing(config: TracingConfig | undefined, version: string): Promise<Tracing | undefined> {
  if (!config) return undefined;
  const { openTelemetry } = await import("./otel");
  const tracing = openTelemetry(config, version);
  started = tracing;
  const shutdown = tracing.shutdown;
  tracing.shutdown = () => {
    if (started === tracing) started = undefined;
    return shutdown();
  };
  return tracing;
}

/** The trace context an outbox row keeps for its delivery: the writing unit's span, or null outside a trace. */
export const currentTraceparent = (): string | null => started?.traceparent() ?? null;
