/**
 * What the actuator endpoints report, as plain functions over the app's dependencies:
 * health (Spring Boot shape), the /actuator/metrics view of the Prometheus registry, and
 * the runtime facts behind threaddump.
 */
import type { StatsFs } from "node:fs";
import { statfs } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { sql } from "drizzle-orm";
import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { AppContext } from "../../context";
import { AppError } from "../../errors";
import type { Metrics } from "../../metrics";
import { type AuditRecord, writeAudit } from "../../store/audit";
import { backupHealth } from "../../store/backups";
import { countUsers } from "../../store/users";
import type { ComponentHealth, Health, MetricView } from "./model";

type Deps = Pick<AppContext, "db" | "config" | "lifecycle" | "logger" | "now">;

/** An ADMIN's operation on the process (a logger's level, a heap dump), in the audit log. */
export const audit = ({ db, now }: Pick<Deps, "db" | "now">, entry: AuditRecord) => db.write((tx) => writeAudit(tx, entry, new Date(now())));

/** Free space below this marks diskSpace DOWN (Spring Boot's default threshold). */
const DISK_THRESHOLD_BYTES = 10 * 1024 * 1024;

async function dbHealth({ db, logger, now }: Deps, details: boolean): Promise<ComponentHealth> {
  // What runs the data: Bun's own SQLite for a file by default, libSQL for the client's URLs.
  const database = db.driver === "native" ? "SQLite" : "libSQL";
  try {
    if (!details) {
      await db.get(sql`select 1`);
      return { status: "UP" };
    }
    const n = await countUsers(db);
    return { status: "UP", details: { database, userCount: n, timestamp: new Date(now()).toISOString() } };
  } catch (error) {
    logger.warn({ err: error }, "database health check failed");
    // The kind of failure only: no SQL, no path, no stack.
    return { status: "DOWN", details: { database, error: `database query failed: ${errorName(error)}` } };
  }
}

/**
 * Whether a remote primary answers (one round trip, given DATABASE_BUSY_TIMEOUT_MS; a file database
 * is always at hand), for readiness: an instance that cannot reach it leaves rotation, and comes back by itself.
 */
export function primaryReachable({ db, config }: Pick<Deps, "db" | "config">): Promise<boolean> {
  if (config.databaseUrl.startsWith("file:")) return Promise.resolve(true);
  const answered = Promise.resolve(db.get(sql`select 1`)).then(
    () => true,
    () => false,
  );
  return Promise.race([answered, Bun.sleep(config.databaseBusyTimeoutMs).then(() => false)]);
}

function errorName(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && /^[A-Z_]+$/.test(code) ? code : ((error as Error)?.name ?? "Error");
}

/** The folder the data lives in: the database file's when it is local, else DATA_DIR. */
function dataPath(config: Deps["config"]): string {
  const url = config.databaseUrl;
  if (url.startsWith("file:")) {
    const file = url.slice("file:".length).split("?")[0];
    if (file && file !== ":memory:") return resolve(file, "..");
  }
  return resolve(config.dataDir);
}

/**
 * statfs runs on the thread pool: per request it made /actuator/health cost several times a
 * bare route (npm run bench). Free space is read at most once a second per folder.
 */
const DISK_READING_TTL_MS = 1000;
const diskReadings = new Map<string, { at: number; stats: Promise<StatsFs> }>();
function recentStatfs(path: string) {
  const now = performance.now();
  let reading = diskReadings.get(path);
  if (!reading || now - reading.at > DISK_READING_TTL_MS) {
    reading = { at: now, stats: statfs(path) };
    diskReadings.set(path, reading);
  }
  return reading.stats;
}

async function diskHealth(config: Deps["config"]): Promise<ComponentHealth> {
  const path = dataPath(config);
  try {
    const fs = await recentStatfs(path);
    const free = fs.bavail * fs.bsize;
    return { status: free >= DISK_THRESHOLD_BYTES ? "UP" : "DOWN", details: { total: fs.blocks * fs.bsize, free, threshold: DISK_THRESHOLD_BYTES, path, exists: true } };
  } catch {
    return { status: "DOWN", details: { total: 0, free: 0, threshold: DISK_THRESHOLD_BYTES, path, exists: false } };
  }
}

/** Overall health: DOWN when any component is; details only when the caller may see them. */
export async function health(deps: Deps, { details }: { details: boolean }): Promise<Health> {
  const [db, diskSpace, backup] = await Promise.all([
    dbHealth(deps, details),
    diskHealth(deps.config),
    // Only when backups are scheduled: then a failing one is something to be told about.
    deps.config.backupSchedule ? backupHealth(deps.db, deps.config.backupSchedule).catch((): ComponentHealth => ({ status: "DOWN" })) : undefined,
  ]);
  const { freshness } = deps.db;
  // An embedded replica: whether it reaches its primary, and how long since it last did.
  const primary: ComponentHealth | undefined = freshness && {
    status: freshness.primaryUp() ? "UP" : "DOWN",
    details: { stalenessMs: Math.round(freshness.stalenessMs()) },
  };
  const components = { db, diskSpace, ping: { status: "UP" as const }, ...(backup ? { backup } : {}), ...(primary ? { primary } : {}) };
  const status = Object.values(components).every((c) => c.status === "UP") ? "UP" : "DOWN";
  if (!details) for (const c of Object.values(components)) delete (c as ComponentHealth).details;
  return { status, components };
}

/** /actuator/metrics names (Micrometer's dotted names) and the Prometheus family behind each. */
const CATALOGUE: Record<string, { family: string; kind: "gauge" | "counter" | "timer"; baseUnit: string | null }> = {
  "system.cpu.usage": { family: "system_cpu_usage", kind: "gauge", baseUnit: null },
  "process.cpu.usage": { family: "process_cpu_usage", kind: "gauge", baseUnit: null },
  "jvm.memory.used": { family: "jvm_memory_used_bytes", kind: "gauge", baseUnit: "bytes" },
  "process.memory.rss": { family: "process_memory_rss_bytes", kind: "gauge", baseUnit: "bytes" },
  "http.server.requests": { family: "http_server_requests_seconds", kind: "timer", baseUnit: "seconds" },
  "users.created": { family: "users_created_total", kind: "counter", baseUnit: null },
  "users.operation.duration": { family: "users_operation_duration_seconds", kind: "timer", baseUnit: "seconds" },
  "users.active": { family: "users_active", kind: "gauge", baseUnit: "users" },
};

export const metricNames = () => Object.keys(CATALOGUE).sort();

/** One family as the actuator reports it: this process's, or summed over every worker. */
async function read(metrics: Metrics, family: string): Promise<MetricObjectWithValues<MetricValue<string>>> {
  return (await (await metrics.current()).getSingleMetric(family)!.get()) as MetricObjectWithValues<MetricValue<string>>;
}

const sum = (values: MetricValue<string>[]) => values.reduce((total, v) => total + v.value, 0);

export async function metricView(metrics: Metrics, name: string): Promise<MetricView> {
  const entry = CATALOGUE[name];
  if (!entry) throw new AppError("METRIC_NOT_FOUND", { name });
  const metric = await read(metrics, entry.family);
  let measurements: MetricView["measurements"];
  let values = metric.values;
  if (entry.kind === "timer") {
    const max = await read(metrics, `${entry.family}_max`);
    values = values.filter((v) => (v as { metricName?: string }).metricName === `${entry.family}_count`);
    const of = (suffix: string) => metric.values.filter((v) => (v as { metricName?: string }).metricName === entry.family + suffix);
    measurements = [
      { statistic: "COUNT", value: sum(of("_count")) },
      { statistic: "TOTAL_TIME", value: sum(of("_sum")) },
      { statistic: "MAX", value: Math.max(0, ...max.values.map((v) => v.value)) },
    ];
  } else {
    measurements = [{ statistic: entry.kind === "counter" ? "COUNT" : "VALUE", value: sum(values) }];
  }
  const tags = new Map<string, Set<string>>();
  for (const v of values) {
    for (const [tag, value] of Object.entries(v.labels)) {
      if (value !== undefined) (tags.get(tag) ?? tags.set(tag, new Set()).get(tag)!).add(String(value));
    }
  }
  return {
    name,
    description: metric.help,
    baseUnit: entry.baseUnit,
    measurements,
    availableTags: [...tags].map(([tag, set]) => ({ tag, values: [...set].sort() })),
  };
}

/** Event-loop lag: how late a zero-delay timer fires. */
function eventLoopLagMs(): Promise<number> {
  const started = performance.now();
  return new Promise((done) => setTimeout(() => done(Math.round((performance.now() - started) * 1000) / 1000), 0));
}

/** The runtime's honest counterpart of a JVM thread dump: one event loop, its lag and pending work. */
export async function threadDump(config: Deps["config"], server: { pendingRequests: number; pendingWebSockets: number } | null) {
  const memory = process.memoryUsage();
  return {
    pid: process.pid,
    runtime: `bun ${Bun.version}`,
    uptimeSeconds: Math.round(process.uptime() * 1000) / 1000,
    eventLoopLagMs: await eventLoopLagMs(),
    pendingRequests: server?.pendingRequests ?? 0,
    pendingWebSockets: server?.pendingWebSockets ?? 0,
    workers: config.workers,
    cpus: availableParallelism(),
    memory: { rss: memory.rss, heapTotal: memory.heapTotal, heapUsed: memory.heapUsed, external: memory.external, arrayBuffers: memory.arrayBuffers },
  };
}
