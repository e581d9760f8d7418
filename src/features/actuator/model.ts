/** Schemas of the actuator answers (Spring Boot actuator shapes) and of /api/version. */
import { t, type Static } from "elysia";

export const Status = t.Union([t.Literal("UP"), t.Literal("DOWN")]);

export const ComponentHealth = t.Object({
  status: Status,
  details: t.Optional(
    t.Object(
      {
        database: t.Optional(t.String()),
        userCount: t.Optional(t.Integer()),
        timestamp: t.Optional(t.String({ format: "date-time" })),
        error: t.Optional(t.String()),
        total: t.Optional(t.Integer()),
        free: t.Optional(t.Integer()),
        threshold: t.Optional(t.Integer()),
        path: t.Optional(t.String()),
        exists: t.Optional(t.Boolean()),
        schedule: t.Optional(t.String({ description: "backup: BACKUP_SCHEDULE" })),
        lastSuccess: t.Optional(t.String({ format: "date-time", description: "backup: when the last successful backup was taken" })),
        lastBackup: t.Optional(t.String({ description: "backup: its archive's name" })),
        lastFailure: t.Optional(t.String({ format: "date-time", description: "backup: when the last backup failed" })),
        lastError: t.Optional(t.String({ description: "backup: why it failed" })),
        stalenessMs: t.Optional(t.Integer({ description: "primary: milliseconds since this embedded replica last reached its primary" })),
      },
      { description: "Shown to ADMIN callers only" },
    ),
  ),
});
export type ComponentHealth = Static<typeof ComponentHealth>;

export const Health = t.Object(
  {
    status: Status,
    components: t.Object({ db: ComponentHealth, diskSpace: ComponentHealth, ping: ComponentHealth, backup: t.Optional(ComponentHealth), primary: t.Optional(ComponentHealth) }),
  },
  { title: "Health" },
);
export type Health = Static<typeof Health>;

export const ProbeHealth = t.Object({ status: Status }, { title: "ProbeHealth" });

export const MetricNames = t.Object({ names: t.Array(t.String()) }, { title: "MetricNames" });

export const MetricView = t.Object(
  {
    name: t.String(),
    description: t.String(),
    baseUnit: t.Union([t.String(), t.Null()]),
    measurements: t.Array(t.Object({ statistic: t.String({ examples: ["COUNT", "TOTAL_TIME", "MAX", "VALUE"] }), value: t.Number() })),
    availableTags: t.Array(t.Object({ tag: t.String(), values: t.Array(t.String()) })),
  },
  { title: "MetricView" },
);
export type MetricView = Static<typeof MetricView>;

export const MetricNameParams = t.Object({ name: t.String({ pattern: "^[A-Za-z0-9._-]{1,100}$" }) });

/** Spring Boot's level names; OFF is pino's "silent". */
export const LEVELS = ["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"] as const;
export const Level = t.UnionEnum(LEVELS);

export const LoggerLevels = t.Object({ configuredLevel: t.Union([Level, t.Null()]), effectiveLevel: Level }, { title: "LoggerLevels" });

export const Loggers = t.Object({ levels: t.Array(Level), loggers: t.Record(t.String(), LoggerLevels) }, { title: "Loggers" });

export const LoggerNameParams = t.Object({ name: t.String({ pattern: "^[A-Za-z0-9._-]{1,100}$" }) });

/** null (or absent) resets a named logger to the root level. */
export const LoggerLevelBody = t.Object({ configuredLevel: t.Optional(t.Union([t.UnionEnum([...LEVELS, ...LEVELS.map((l) => l.toLowerCase())]), t.Null()])) });

export const ThreadDump = t.Object(
  {
    pid: t.Integer(),
    runtime: t.String(),
    uptimeSeconds: t.Number(),
    eventLoopLagMs: t.Number({ description: "How late a zero-delay timer fired" }),
    pendingRequests: t.Integer({ description: "Requests in flight on this process's server" }),
    pendingWebSockets: t.Integer(),
    workers: t.Integer({ description: "Configured worker processes sharing the port" }),
    cpus: t.Integer(),
    memory: t.Object({ rss: t.Integer(), heapTotal: t.Integer(), heapUsed: t.Integer(), external: t.Integer(), arrayBuffers: t.Integer() }),
  },
  { title: "ThreadDump" },
);

export const Version = t.Object(
  { name: t.String(), version: t.String(), commit: t.String(), buildTime: t.Union([t.String({ format: "date-time" }), t.Null()]), runtime: t.String() },
  { title: "Version" },
);

export const Info = t.Object(
  {
    build: t.Object({ name: t.String(), version: t.String(), time: t.Union([t.String({ format: "date-time" }), t.Null()]) }),
    git: t.Object({ commit: t.Object({ id: t.String() }) }),
    runtime: t.Object({ name: t.String(), version: t.String(), platform: t.String(), arch: t.String() }),
  },
  { title: "Info" },
);
