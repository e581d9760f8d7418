/**
 * Per-request plumbing for every route: X-Request-Id (the client's, or a new one) on every
 * answer, 400 INVALID_HOST for a Host header that is not a host (http/request-url.ts), before any
 * route, one structured log line per request, and the http_server_requests histogram
 * labelled by route template (never the raw path, so cardinality stays bounded).
 *
 * Every request pays these two hooks, so they do the least they can (CPU profile of
 * GET /actuator/health, npm run bench): the start time and id ride on Elysia's context object
 * (the same object from onRequest to onAfterResponse) instead of a WeakMap entry per request,
 * and each (route, method, status) keeps its histogram series, so an answer costs no labels
 * object, no route-template slice and no label hashing of ours.
 */
import { Elysia } from "elysia";
import type { Logger } from "pino";
import type { Lifecycle } from "../context";
import type { Metrics } from "../metrics";
import type { Tracing } from "../tracing";
import { AppError } from "../errors";
import { hasServableHost, requestPath } from "./request-url";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Where onRequest leaves its reading on the context: a symbol, so no route or plugin can clash with it. */
const STARTED = Symbol("request-started");
interface Started {
  at: number;
  id: string;
}

/** One (route, method, status) series: its template label and its recorder. */
interface Series {
  template: string;
  record: (seconds: number) => void;
}

/** What orchestrators and the bench poll while the server is otherwise idle. */
const isHealthProbe = (template: string) => template === "/actuator/health" || template.startsWith("/actuator/health/");

export const requestContext = (logger: Logger, metrics: Metrics, basePath: string, lifecycle: Lifecycle, tracing?: Tracing) => {
  /** route (as Elysia names it, "" when unmatched) → method → status → its series. */
  const known = new Map<string, { template: string; methods: Map<string, Map<number, Series>> }>();
  const seriesOf = (route: string, method: string, status: number): Series => {
    let byRoute = known.get(route);
    if (!byRoute) {
      byRoute = { template: route ? route.slice(basePath.length) || "/" : "UNMATCHED", methods: new Map() };
      known.set(route, byRoute);
      if (isHealthProbe(byRoute.template)) lifecycle.probed?.();
      else lifecycle.serving?.();
    }
    let byMethod = byRoute.methods.get(method);
    if (!byMethod) {
      byMethod = new Map();
      byRoute.methods.set(method, byMethod);
    }
    let found = byMethod.get(status);
    if (!found) {
      const { template } = byRoute;
      found = { template, record: metrics.httpRequests.series({ method, route: template, status: String(status) }) };
      byMethod.set(status, found);
    }
    return found;
  };

  const plugin = new Elysia({ name: "request-context" });
  // With tracing, each request runs inside its span (Elysia's wrap: the one hook around the whole
  // handling, so database units and log lines of every later hook see the span); without, no wrapper
  // at all. Health probes make no trace: an orchestrator's every few seconds would drown the rest.
  const probes = `${basePath}/actuator/health`;
  if (tracing) {
    plugin.wrap((handle) => (request: Request) => (requestPath(request.url).startsWith(probes) ? handle(request) : tracing.request(request, () => handle(request))));
  }
  return plugin
    .onRequest((context) => {
      const { request } = context;
      const given = request.headers.get("x-request-id");
      const id = given && REQUEST_ID.test(given) ? given : crypto.randomUUID();
      (context as { [STARTED]?: Started })[STARTED] = { at: performance.now(), id };
      context.set.headers["x-request-id"] = id;
      // Before any route (and the plugins after this one), once the answer has its id: past this every URL is absolute.
      if (!hasServableHost(request)) throw new AppError("INVALID_HOST");
    })
    .onAfterResponse({ as: "global" }, (context) => {
      const { request, route, set } = context;
      const started = (context as { [STARTED]?: Started })[STARTED];
      const seconds = started ? (performance.now() - started.at) / 1000 : 0;
      const status = typeof set.status === "number" ? set.status : 200;
      const { record, template } = seriesOf(route ?? "", request.method, status);
      record(seconds);
      tracing?.answered(request, template, status);
      if (logger.isLevelEnabled("info")) {
        logger.info({ method: request.method, route: template, status, ms: Math.round(seconds * 1e4) / 10, requestId: started?.id }, "request");
      }
    });
};
