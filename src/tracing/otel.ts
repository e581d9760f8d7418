/**
 * The OpenTelemetry SDK behind `Tracing` (index.ts), loaded only when tracing is configured.
 * Nothing is registered globally (no global tracer provider, context manager or propagator):
 * this module holds its own, so a second app in the same process (the tests) is not affected.
 */
import { createContextKey, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type TextMapGetter } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler } from "@opentelemetry/sdk-trace";
import type { TracingConfig } from "../config";
import type { Database } from "../db/database";
import type { Tracing } from "./tracing";
import { requestPath } from "../http/request-url";
import { peekRequestState, requestState } from "../http/request-state";

function samplerOf({ sampler, samplerRatio }: TracingConfig): Sampler {
  const root = sampler.endsWith("always_off") ? new AlwaysOffSampler() : sampler.endsWith("traceidratio") ? new TraceIdRatioBasedSampler(samplerRatio) : new AlwaysOnSampler();
  return sampler.startsWith("parentbased_") ? new ParentBasedSampler({ root }) : root;
}

/** Round trips of a request or a unit; a unit's also count for the request it runs in. */
interface RoundTrips {
  count: number;
  outer?: RoundTrips;
}
const ROUND_TRIPS = createContextKey("usersvc.db.round_trips");

const fromHeaders: TextMapGetter<Headers> = { get: (headers, key) => headers.get(key) ?? undefined, keys: (headers) => [...headers.keys()] };
const fromRecord: TextMapGetter<Record<string, string>> = { get: (carrier, key) => carrier[key], keys: (carrier) => Object.keys(carrier) };

export function openTelemetry(config: TracingConfig, version: string): Tracing {
  const contexts = new AsyncLocalStorageContextManager().enable();
  const propagator = new W3CTraceContextPropagator();
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": config.serviceName, "service.version": version }),
    sampler: samplerOf(config),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: config.tracesUrl, headers: { ...config.headers } }) })],
  });
  const tracer = provider.getTracer("usersvc", version);

  const traceparentOf = (context: Context) => {
    const carrier: Record<string, string> = {};
    propagator.inject(context, carrier, defaultTextMapSetter);
    return carrier.traceparent;
  };

  /** Runs `work` as the span's context; the span ends when it settles, marked an error if it throws. */
  async function within<T>(span: Span, context: Context, work: () => Promise<T>, beforeEnd?: () => void): Promise<T> {
    try {
      return await contexts.with(context, work);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: String((error as Error)?.message ?? error).slice(0, 200) });
      throw error;
    } finally {
      beforeEnd?.();
      span.end();
    }
  }

  /** A unit of work's span, only inside a trace: the sender's idle passes make none. `work` gets the unit's context. */
  function unit<T>(operation: string, driver: string, work: (context: Context) => Promise<T>): Promise<T> {
    const parent = contexts.active();
    if (!trace.getSpan(parent)) return work(parent);
    const span = tracer.startSpan(
      `db ${operation}`,
      { kind: SpanKind.CLIENT, attributes: { "db.system.name": "sqlite", "db.operation.name": operation, "usersvc.db.driver": driver } },
      parent,
    );
    const trips: RoundTrips = { count: 0, outer: parent.getValue(ROUND_TRIPS) as RoundTrips | undefined };
    const context = trace.setSpan(parent, span).setValue(ROUND_TRIPS, trips);
    return within(
      span,
      context,
      () => work(context),
      () => span.setAttribute("db.round_trips", trips.count),
    );
  }

  return {
    request(request, handle) {
      const parent = propagator.extract(ROOT_CONTEXT, request.headers, fromHeaders);
      const span = tracer.startSpan(request.method, { kind: SpanKind.SERVER, attributes: { "http.request.method": request.method, "url.path": requestPath(request.url) } }, parent);
      const trips: RoundTrips = { count: 0 };
      requestState(request).endSpan = (route, status) => {
        span.updateName(`${request.method} ${route}`);
        span.setAttributes({ "http.route": route, "http.response.status_code": status, "db.round_trips": trips.count });
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      };
      return contexts.with(trace.setSpan(parent, span).setValue(ROUND_TRIPS, trips), handle);
    },
    answered(request, route, status) {
      const state = peekRequestState(request);
      const end = state?.endSpan;
      if (!end) return;
      state.endSpan = undefined;
      end(route, status);
    },
    database(db: Database): Database {
      return {
        ...db,
        write: (work) => unit("write", db.driver, () => db.write(work)),
        // A list unit's statements are built when the unit runs (on the native driver, in the group
        // of whichever unit came first): built in the unit's own context, its outbox rows keep its trace.
        writeAll: (build, options) => unit("writeAll", db.driver, (context) => db.writeAll((tx) => contexts.with(context, () => build(tx)), options)),
        readAll: (build) => unit("readAll", db.driver, (context) => db.readAll((reader) => contexts.with(context, () => build(reader)))),
      };
    },
    roundTrip() {
      for (let trips = contexts.active().getValue(ROUND_TRIPS) as RoundTrips | undefined; trips; trips = trips.outer) trips.count++;
    },
    delivery(name, parent, attributes, deliver) {
      const from = parent ? propagator.extract(ROOT_CONTEXT, { traceparent: parent }, fromRecord) : ROOT_CONTEXT;
      const span = tracer.startSpan(name, { kind: SpanKind.PRODUCER, attributes }, from);
      const context = trace.setSpan(from, span);
      return within(span, context, () => deliver(traceparentOf(context)));
    },
    traceparent: () => traceparentOf(contexts.active()),
    // A new object each time: pino merges the line's own fields into it.
    logFields(): Record<string, string> {
      const span = trace.getSpan(contexts.active());
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
    flush: () => provider.forceFlush(),
    async shutdown() {
      await provider.shutdown();
      contexts.disable();
    },
  };
}
