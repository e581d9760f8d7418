/**
 * The metrics registry: prom-client with a Registry of its own per app (never the global
 * one, so tests and workers can build several apps). Features record into the instruments
 * here; the actuator feature serves them (/actuator/prometheus, /actuator/metrics).
 */
import { cpus } from "node:os";
// prom-client's parts, file by file: its index also loads the Pushgateway (node:http, node:https)
// and the cluster aggregator, ~4 MiB of idle RSS that serving never uses (compiled binaries
// compared, npm run bench). Types: src/prom-client-parts.d.ts.
import Counter from "prom-client/lib/counter";
import Gauge from "prom-client/lib/gauge";
import Registry from "prom-client/lib/registry";
import { BoundHistogram } from "./histogram";

/**
 * A timer as Micrometer shows it: a histogram for Prometheus plus the longest duration seen
 * (`<name>_max`), which a histogram cannot give. `observe` and `startTimer` match Histogram's.
 */
export interface Timer<L extends string> {
  histogram: BoundHistogram<L>;
  max: Gauge<L>;
  observe(labels: Partial<Record<L, string>>, seconds: number): void;
  startTimer(labels: Partial<Record<L, string>>): () => void;
  /**
   * A recorder of one label set, for a hot path that can keep it: the labels object, its key
   * and its running maximum are built once instead of on every observation.
   */
  series(labels: Record<L, string>): (seconds: number) => void;
}

export type AuthenticationKind = "session" | "token" | "api_key";

/** What an embedded replica tells of its primary (db/database.ts, Freshness). */
export interface ReplicaReadings {
  stalenessMs(): number;
  primaryUp(): boolean;
}

/** The replica's gauges, registered once its database is known (none on other databases: a 0 there would read as "primary down"). */
function replicaGauges(registry: Registry) {
  let watched: ReplicaReadings | undefined;
  return (replica: ReplicaReadings) => {
    if (!watched) {
      new Gauge({
        name: "usersvc_replica_staleness_seconds",
        help: "Seconds since this embedded replica last reached its primary (past DATABASE_MAX_STALENESS it refuses authenticated requests)",
        registers: [registry],
        aggregator: "max",
        collect() {
          this.set(watched!.stalenessMs() / 1000);
        },
      });
      new Gauge({
        name: "usersvc_primary_up",
        help: "1 when this embedded replica's last probe (or write) reached its primary, else 0",
        registers: [registry],
        aggregator: "min",
        collect() {
          this.set(watched!.primaryUp() ? 1 : 0);
        },
      });
    }
    watched = replica;
  };
}

export interface Metrics {
  registry: Registry;
  httpRequests: Timer<"method" | "route" | "status">;
  usersCreated: Counter;
  /** Outbox passes that met a busy database and backed off. */
  outboxContention: Counter;
  usersOperationDuration: Timer<"operation">;
  usersActive: Gauge;
  /** Notifications a channel gave up on after its retries (they stay in the outbox, status failed). */
  notificationsFailed: Counter<"channel">;
  /** Segments of the name-search index this instance's upkeep folded away (src/features/search/index-upkeep.ts). */
  searchIndexSegmentsMerged: Counter;
  /** Counts a request whose caller the guard found, by how it authenticated: session, token (no session), api_key; never per key. */
  authenticated(kind: AuthenticationKind): void;
  /** Where users_active reads its value at scrape time (set by the app, which owns the database). */
  countActiveUsersWith(count: () => Promise<number>): void;
  /** An embedded replica: usersvc_replica_staleness_seconds and usersvc_primary_up, read from it at scrape time. */
  watchReplica(replica: ReplicaReadings): void;
  /**
   * What the actuator reports from: this registry, or under `--workers N` every worker's summed
   * into one (src/workers.ts replaces it). /actuator/prometheus and /actuator/metrics both read it.
   */
  current: () => Promise<Registry>;
  /** This process's registry alone, default metrics added (what --workers peers read from it). */
  own: () => Promise<Registry>;
}

function createTimer<L extends string>(registry: Registry, name: string, help: string, labelNames: L[], buckets: number[]): Timer<L> {
  const histogram = new BoundHistogram<L>(`${name}_seconds`, help, labelNames, buckets, registry);
  const max = new Gauge<L>({ name: `${name}_seconds_max`, help: `${help}: longest so far`, labelNames, registers: [registry], aggregator: "max" });
  /** Per label set: its histogram series and the longest duration so far (the gauge is written only when it grows). */
  type Entry = { labels: Partial<Record<L, string>>; observe: (seconds: number) => void; longest: number };
  const known = new Map<string, Entry>();
  const entryOf = (labels: Partial<Record<L, string>>) => {
    const key = labelNames.map((l) => labels[l]).join("\u0000");
    let entry = known.get(key);
    if (!entry) {
      entry = { labels: { ...labels }, observe: histogram.bind(labels), longest: -1 };
      known.set(key, entry);
    }
    return entry;
  };
  const record = (entry: Entry, seconds: number) => {
    entry.observe(seconds);
    if (seconds > entry.longest) {
      entry.longest = seconds;
      max.set(entry.labels, seconds);
    }
  };
  const observe = (labels: Partial<Record<L, string>>, seconds: number) => record(entryOf(labels), seconds);
  return {
    histogram,
    max,
    observe,
    series(labels) {
      const entry = entryOf(labels);
      return (seconds) => record(entry, seconds);
    },
    startTimer(labels) {
      const started = performance.now();
      return () => observe(labels, (performance.now() - started) / 1000);
    },
  };
}

/**
 * CPU share (0..1) used since the previous reading, from a cumulative busy-time source.
 * Readings less than a second apart repeat the last value: a tiny window is mostly noise.
 */
function cpuShare(read: () => { busy: number; total: number }) {
  let last = { busy: 0, total: 0, at: -Infinity };
  let share = 0;
  return () => {
    const at = performance.now();
    if (at - last.at < 1000) return share;
    const now = { ...read(), at };
    const total = now.total - last.total;
    share = total > 0 ? Math.min(1, Math.max(0, (now.busy - last.busy) / total)) : 0;
    last = now;
    return share;
  };
}

const systemCpu = () => {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const sum = times.user + times.nice + times.sys + times.idle + times.irq;
    total += sum;
    busy += sum - times.idle;
  }
  return { busy, total };
};

const processCpu = () => {
  const { user, system } = process.cpuUsage();
  // Busy microseconds against wall-clock microseconds on every core.
  return { busy: user + system, total: process.uptime() * 1e6 * Math.max(1, cpus().length) };
};

/** users_active: a burst of scrapes shares one indexed count (one query in flight, then a 1 s memo). */
const ACTIVE_USERS_MEMO_MS = 1000;

/**
 * prom-client's process and runtime metrics, as Prometheus' own tooling accepts them. Loaded by
 * the first scrape, not at start: their files bring node:perf_hooks, node:v8 and @opentelemetry/api,
 * and the event-loop and GC monitors start with them (~1.6 MiB of an idle server's RSS, npm run
 * bench -- --idle 9). Event-loop lag and GC counts are counted from that first scrape.
 */
export async function addDefaultMetrics(registry: Registry) {
  const { default: collectDefaultMetrics } = await import("prom-client/lib/defaultMetrics");
  collectDefaultMetrics({ register: registry });
  const dropped = [
    // Gauges named *_total fail `promtool check metrics`; their per-type siblings carry the same counts.
    "nodejs_active_handles_total",
    "nodejs_active_requests_total",
    "nodejs_active_resources_total",
    // V8 heap spaces: zeros on JavaScriptCore except "old", and the costliest part of a scrape (~2 ms).
    "nodejs_heap_space_size_total_bytes",
    "nodejs_heap_space_size_used_bytes",
    "nodejs_heap_space_size_available_bytes",
  ];
  for (const name of dropped) registry.removeSingleMetric(name);
}

/** CPU and memory of the machine and the process, read at scrape time, under the names Micrometer's clients know. */
function addRuntimeGauges(registry: Registry) {
  const systemCpuShare = cpuShare(systemCpu);
  const processCpuShare = cpuShare(processCpu);
  new Gauge({
    name: "system_cpu_usage",
    help: "Recent CPU usage of the whole machine (0..1)",
    registers: [registry],
    aggregator: "max",
    collect() {
      this.set(systemCpuShare());
    },
  });
  new Gauge({
    name: "process_cpu_usage",
    help: "Recent CPU usage of this process (0..1 of all cores)",
    registers: [registry],
    collect() {
      this.set(processCpuShare());
    },
  });
  new Gauge({
    name: "jvm_memory_used_bytes",
    help: "Runtime heap in use (JavaScriptCore), under the JVM name its clients know",
    registers: [registry],
    collect() {
      this.set(process.memoryUsage().heapUsed);
    },
  });
  new Gauge({
    name: "process_memory_rss_bytes",
    help: "Resident set size of this process",
    registers: [registry],
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });
}

/** users_active, counted at scrape time by whatever the app gives `countWith`; a burst of scrapes shares one count. */
function activeUsersGauge(registry: Registry) {
  let countActive: (() => Promise<number>) | undefined;
  let memo: { at: number; value: Promise<number> } | undefined;
  const activeUsers = () => {
    const now = performance.now();
    if (!memo || now - memo.at > ACTIVE_USERS_MEMO_MS) {
      const value = countActive!();
      memo = { at: now, value };
      value.catch(() => (memo = undefined));
    }
    return memo.value;
  };
  const gauge = new Gauge({
    name: "users_active",
    help: "Users whose account is active",
    registers: [registry],
    // Every worker counts the same table.
    aggregator: "max",
    async collect() {
      if (countActive) this.set(await activeUsers());
    },
  });
  return {
    gauge,
    countWith(count: () => Promise<number>) {
      countActive = count;
      memo = undefined;
    },
  };
}

export function createMetrics({ defaultMetrics = true } = {}): Metrics {
  const registry = new Registry();
  let defaults: Promise<void> | undefined;
  const withDefaults = async () => {
    if (defaultMetrics) {
      defaults ??= addDefaultMetrics(registry);
      await defaults;
    }
    return registry;
  };
  addRuntimeGauges(registry);
  // In the order of /actuator/prometheus.
  const httpRequests = createTimer(
    registry,
    "http_server_requests",
    "HTTP requests by method, route template and status",
    ["method", "route", "status"],
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  const usersCreated = new Counter({ name: "users_created_total", help: "Users created (API and registration)", registers: [registry] });
  const outboxContention = new Counter({ name: "outbox_contention_total", help: "Outbox passes that met a busy database and backed off", registers: [registry] });
  const usersOperationDuration = createTimer(
    registry,
    "users_operation_duration",
    "Duration of user service operations",
    ["operation"],
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  );
  const activeUsers = activeUsersGauge(registry);
  const notificationsFailed = new Counter({
    name: "notifications_failed_total",
    help: "Notifications a channel (mail, webhook) gave up on after its retries",
    labelNames: ["channel"],
    registers: [registry],
  });
  const searchIndexSegmentsMerged = new Counter({
    name: "search_index_segments_merged_total",
    help: "Segments of the name-search index this instance's upkeep merged away",
    registers: [registry],
  });
  // Tallied in plain numbers and handed to the counter when it is read: a labelled inc() on every
  // authenticated request hashed its labels each time (~1 µs of GET /api/users/{id} served).
  const authenticatedTally: Record<AuthenticationKind, number> = { session: 0, token: 0, api_key: 0 };
  new Counter({
    name: "http_server_requests_authenticated_total",
    help: "Authenticated requests by how the caller authenticated (session, token, api_key)",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, count] of Object.entries(authenticatedTally)) if (count > 0) this.inc({ kind }, count);
    },
  });
  return {
    registry,
    httpRequests,
    authenticated: (kind) => {
      authenticatedTally[kind]++;
    },
    usersCreated,
    outboxContention,
    usersOperationDuration,
    usersActive: activeUsers.gauge,
    notificationsFailed,
    searchIndexSegmentsMerged,
    countActiveUsersWith: activeUsers.countWith,
    watchReplica: replicaGauges(registry),
    current: withDefaults,
    own: withDefaults,
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
