/**
 * Per-request plumbing for every route: X-Request-Id (the client's, or a new one) on every
 * answer, one structured log line per request, and the http_server_requests histogram
 * labelled by route template (never the raw path, so cardinality stays bounded).
 */
import { Elysia } from "elysia";
import type { Logger } from "pino";
import type { Metrics } from "../metrics";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const startedAt = new WeakMap<Request, { at: number; id: string }>();

export const requestContext = (logger: Logger, metrics: Metrics, basePath: string) =>
  new Elysia({ name: "request-context" })
    .onRequest(({ request, set }) => {
      const given = request.headers.get("x-request-id");
      const id = given && REQUEST_ID.test(given) ? given : crypto.randomUUID();
      startedAt.set(request, { at: performance.now(), id });
      set.headers["x-request-id"] = id;
    })
    .onAfterResponse({ as: "global" }, ({ request, route, set }) => {
      const started = startedAt.get(request);
      const seconds = started ? (performance.now() - started.at) / 1000 : 0;
      const status = typeof set.status === "number" ? set.status : 200;
      const template = route ? route.slice(basePath.length) || "/" : "UNMATCHED";
      metrics.httpRequests.observe({ method: request.method, route: template, status: String(status) }, seconds);
      if (logger.isLevelEnabled("info")) {
        logger.info({ method: request.method, route: template, status, ms: Math.round(seconds * 1e4) / 10, requestId: started?.id }, "request");
      }
    });
