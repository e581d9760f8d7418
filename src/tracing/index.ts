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
import type { Tracing } from "./tracing";

export type { Tracing } from "./tracing";

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
