/**
 * The metrics registry: prom-client with a Registry of its own per app (never the global
 * one, so tests and workers can build several apps). Features record into the instruments
 * here; the actuator feature serves them.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface Metrics {
  registry: Registry;
  httpRequests: Histogram<"method" | "route" | "status">;
  usersCreated: Counter;
  usersOperationDuration: Histogram<"operation">;
}

export function createMetrics({ defaultMetrics = true } = {}): Metrics {
  const registry = new Registry();
  if (defaultMetrics) collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpRequests: new Histogram({
      name: "http_server_requests_seconds",
      help: "HTTP requests by method, route template and status",
      labelNames: ["method", "route", "status"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    usersCreated: new Counter({ name: "users_created_total", help: "Users created (API and registration)", registers: [registry] }),
    usersOperationDuration: new Histogram({
      name: "users_operation_duration_seconds",
      help: "Duration of user service operations",
      labelNames: ["operation"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [registry],
    }),
  };
}

/** Times an async operation into users.operation.duration. */
export async function timed<T>(metrics: Metrics, operation: string, work: () => Promise<T>): Promise<T> {
  const end = metrics.usersOperationDuration.startTimer({ operation });
  try {
    return await work();
  } finally {
    end();
  }
}
