/** Feature folder actuator/: the operations endpoints under /actuator: health, info, metrics, loggers, thread and heap dumps. */
/**
 * Operational endpoints: /actuator/** in Spring Boot actuator shapes, and /api/version.
 * Open: health (details for ADMIN only), probes, info, version. ADMIN: metrics, loggers,
 * threaddump, heapdump; /actuator/prometheus also takes the METRICS_TOKEN bearer when set.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { generateHeapSnapshot } from "bun";
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { ErrorEnvelope } from "../../envelope";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { AppError } from "../../errors";
import type { LogLevel } from "../../config";
import { VERSION } from "../../version";
import { isAdmin, satisfies } from "../../security/caller";
import { bearerToken, callerOutsideGuard, unauthorized } from "../../security/guard";
import { isKeyBearer } from "../../security/api-keys";
import {
  Health,
  Info,
  LEVELS,
  LoggerLevelBody,
  LoggerLevels,
  LoggerNameParams,
  Loggers,
  MetricNameParams,
  MetricNames,
  MetricView,
  ProbeHealth,
  ThreadDump,
  Version,
} from "./model";
import { countActiveUsers } from "../../store/users";
import { audit, health, metricNames, metricView, primaryReachable, threadDump } from "./service";
import { routeSamples } from "../../http/route-sample";

const adminErrors = errorResponses(401, 403);

const toSpring = (level: LogLevel): (typeof LEVELS)[number] => (level === "silent" ? "OFF" : (level.toUpperCase() as (typeof LEVELS)[number]));
const toPino = (level: string): LogLevel => (level.toUpperCase() === "OFF" ? "silent" : (level.toLowerCase() as LogLevel));

const digest = (text: string) => createHash("sha256").update(text).digest();

export const actuatorRoutes = (ctx: AppContext) => {
  ctx.metrics.countActiveUsersWith(() => countActiveUsers(ctx.db));
  if (ctx.db.freshness) ctx.metrics.watchReplica(ctx.db.freshness);
  const metricsToken = ctx.config.metricsToken ? digest(ctx.config.metricsToken) : undefined;

  /** The ADMIN rule (no API key, no session that must still enrol), or the METRICS_TOKEN bearer (compared in constant time over digests). */
  const adminOrMetricsToken = async ({ request }: { request: Request }) => {
    const token = bearerToken(request);
    if (metricsToken && token && timingSafeEqual(digest(token), metricsToken)) return;
    const caller = await callerOutsideGuard(ctx.authenticator, request, ctx.config.basePath);
    if (!caller) throw unauthorized();
    if (!satisfies(caller, "ADMIN")) throw new AppError("ACCESS_DENIED");
  };

  /**
   * Whether the caller may see health details: an ADMIN's bearer (a session that must still enrol:
   * 403 MFA_ENROLMENT_REQUIRED). An API key has no scope over operations: it sees what an anonymous
   * caller sees; so does anyone while the database is unreachable or a replica is too stale.
   */
  const seesDetails = async (request: Request) => {
    const token = bearerToken(request);
    if (!token || isKeyBearer(token)) return false;
    try {
      const caller = await callerOutsideGuard(ctx.authenticator, request, ctx.config.basePath);
      return caller !== undefined && isAdmin(caller);
    } catch (error) {
      // A replica too stale to trust a bearer still reports its health, without details.
      if (error instanceof AppError && error.code !== "SERVICE_UNAVAILABLE") throw error;
      return false;
    }
  };

  const actuator = new Elysia({ prefix: "/actuator", tags: ["Operations"] })
    .use(ctx.auth)
    .get(
      "/health",
      async ({ request, set }) => {
        const report = await health(ctx, { details: await seesDetails(request) });
        if (report.status === "DOWN") set.status = 503;
        return report;
      },
      {
        sample: () => ({ path: "/actuator/health", status: 200 }),
        response: { 200: Health, 503: Health },
        detail: {
          summary: "Overall health",
          description:
            "Components db, diskSpace, ping, backup when BACKUP_SCHEDULE is set, and primary on an embedded replica (DOWN while its primary cannot be reached; details: stalenessMs); their details for ADMIN callers only. 503 when DOWN.",
        },
      },
    )
    .get("/health/liveness", () => ({ status: "UP" as const }), {
      sample: () => ({ path: "/actuator/health/liveness", status: 200 }),
      response: { 200: ProbeHealth },
      detail: { summary: "Liveness probe", description: "UP while the process serves requests." },
    })
    .get(
      "/health/readiness",
      async ({ set }) => {
        if (ctx.lifecycle.ready && !ctx.db.freshness?.tooStale() && (await primaryReachable(ctx))) return { status: "UP" as const };
        set.status = 503;
        return { status: "DOWN" as const };
      },
      {
        sample: () => ({ path: "/actuator/health/readiness", status: 200 }),
        response: { 200: ProbeHealth, 503: ProbeHealth },
        detail: {
          summary: "Readiness probe",
          description:
            "DOWN (503) while starting, while draining after SIGTERM, while a remote primary cannot be reached, and while an embedded replica has not reached its primary for DATABASE_MAX_STALENESS.",
        },
      },
    )
    .get(
      "/info",
      () => ({
        build: { name: VERSION.name, version: VERSION.version, time: VERSION.buildTime },
        git: { commit: { id: VERSION.commit } },
        runtime: { name: "bun", version: Bun.version, platform: process.platform, arch: process.arch },
      }),
      { sample: () => ({ path: "/actuator/info", status: 200 }), response: { 200: Info }, detail: { summary: "Build information" } },
    )
    .get(
      "/prometheus",
      async ({ set }) => {
        set.headers["content-type"] = ctx.metrics.registry.contentType;
        return (await ctx.metrics.current()).metrics();
      },
      {
        sample: () => ({ path: "/actuator/prometheus", status: 200 }),
        beforeHandle: adminOrMetricsToken,
        response: { 200: t.String({ description: "Prometheus text format 0.0.4" }), ...adminErrors },
        detail: { summary: "Metrics in Prometheus text format", description: "ADMIN, or the METRICS_TOKEN bearer when one is configured.", security: [{ bearerAuth: [] }] },
      },
    )
    .guard({ access: { allow: "ADMIN" } }, (admin) =>
      admin
        .get("/metrics", () => ({ names: metricNames() }), {
          sample: () => ({ path: "/actuator/metrics", status: 200 }),
          response: { 200: MetricNames, ...adminErrors },
          detail: { summary: "Metric names" },
        })
        .get("/metrics/:name", ({ params }) => metricView(ctx.metrics, params.name), {
          sample: () => ({ path: "/actuator/metrics/http.server.requests", status: 200 }),
          params: MetricNameParams,
          response: { 200: MetricView, 400: ErrorEnvelope, ...adminErrors, 404: ErrorEnvelope },
          detail: { summary: "One metric's measurements and tags" },
        })
        .get(
          "/loggers",
          () => ({
            levels: [...LEVELS],
            loggers: Object.fromEntries(
              ctx.logging.list().map((l) => [l.name, { configuredLevel: l.configuredLevel && toSpring(l.configuredLevel), effectiveLevel: toSpring(l.effectiveLevel) }]),
            ),
          }),
          { sample: () => ({ path: "/actuator/loggers", status: 200 }), response: { 200: Loggers, ...adminErrors }, detail: { summary: "Loggers and their levels" } },
        )
        .get(
          "/loggers/:name",
          ({ params }) => {
            const found = ctx.logging.list().find((l) => l.name === params.name);
            if (!found) throw new AppError("LOGGER_NOT_FOUND", { name: params.name });
            return { configuredLevel: found.configuredLevel && toSpring(found.configuredLevel), effectiveLevel: toSpring(found.effectiveLevel) };
          },
          {
            sample: () => ({ path: "/actuator/loggers/http", status: 200 }),
            params: LoggerNameParams,
            response: { 200: LoggerLevels, 400: ErrorEnvelope, ...adminErrors, 404: ErrorEnvelope },
            detail: { summary: "One logger's level" },
          },
        )
        .post(
          "/loggers/:name",
          async ({ params, body, caller, set }) => {
            const level = body.configuredLevel ? toPino(body.configuredLevel) : null;
            if (!ctx.logging.setLevel(params.name, level)) throw new AppError("LOGGER_NOT_FOUND", { name: params.name });
            await audit(ctx, {
              action: "LOG_LEVEL_CHANGED",
              actor: caller.email,
              subjectType: "logger",
              subjectId: params.name,
              details: { configuredLevel: body.configuredLevel ?? null },
            });
            set.status = 204;
          },
          {
            params: LoggerNameParams,
            sample: () => ({ path: "/actuator/loggers/http", body: { configuredLevel: null }, status: 204 }),
            body: LoggerLevelBody,
            response: { 204: t.Void({ description: "Level changed" }), 400: ErrorEnvelope, ...adminErrors, 404: ErrorEnvelope },
            detail: { summary: "Change a logger's level at run time", description: "configuredLevel null resets a named logger to the root level." },
          },
        )
        .get("/threaddump", ({ server }) => threadDump(ctx.config, server), {
          sample: () => ({ path: "/actuator/threaddump", status: 200 }),
          response: { 200: ThreadDump, ...adminErrors },
          detail: { summary: "Event loop, pending work and memory", description: "The runtime's counterpart of a JVM thread dump." },
        })
        .get(
          "/heapdump",
          async ({ caller }) => {
            // The machine's clock: a file name the operator sorts among their own dumps, not a stored timestamp.
            const name = `usersvc-${process.pid}-${Date.now()}.heapsnapshot`;
            // Audited before it is taken: a snapshot holds whatever the process holds (tokens, keys).
            await audit(ctx, { action: "HEAP_DUMP_DOWNLOADED", actor: caller.email, subjectType: "heapdump", subjectId: name });
            return new Response(generateHeapSnapshot("v8", "arraybuffer"), {
              headers: {
                "content-type": "application/octet-stream",
                "content-disposition": `attachment; filename="${name}"`,
                "cache-control": "no-store",
              },
            });
          },
          {
            // A snapshot of the process's memory holds every string the program knows, these names included:
            // it is the ADMIN's debugging download, not an answer about data.
            sample: () => ({ path: "/actuator/heapdump", status: 200, holdsPrivateData: "a heap snapshot is the process's memory" }),
            response: { 200: t.File({ description: "V8 heap snapshot (opens in Chrome DevTools)" }), ...adminErrors },
            detail: { summary: "Heap snapshot download", ...documentedHeaders({ 200: ["Content-Disposition"] }) },
          },
        ),
    );

  const version = new Elysia({ prefix: "/api", tags: ["Operations"] }).use(routeSamples).get("/version", () => VERSION, {
    sample: () => ({ path: "/api/version", status: 200 }),
    response: { 200: Version },
    detail: { summary: "Version information" },
  });

  return new Elysia().use(actuator).use(version);
};
