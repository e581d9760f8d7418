/** What the hooks of requests, units of work and outbox deliveries call (index.ts says where each is). */
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
