/**
 * /actuator/** and /api/version: health shapes by caller, DOWN and draining, every metric,
 * counters moving, route-template labels, promtool, loggers taking effect, the heap dump.
 */
import { afterAll, beforeAll, describe, expect, leg, replica, test } from "./legs";
import { health } from "../src/features/actuator/service";
import { createLogging } from "../src/logging/logger";
import { addDefaultMetrics, createMetrics } from "../src/metrics";
import { makeTestApp, type TestApp } from "./helpers";
import { DENIED, expectFailure, scenarios, UNAUTHORIZED } from "./scenario";

const METRIC_NAMES = [
  "http.server.requests",
  "jvm.memory.used",
  "process.cpu.usage",
  "process.memory.rss",
  "system.cpu.usage",
  "users.active",
  "users.created",
  "users.operation.duration",
];

let t: TestApp;
let admin: { id: number; token: string };
let user: { id: number; token: string };

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  user = await t.createUser();
});
afterAll(() => t.close());

const measurement = async (name: string, statistic: string) => {
  const { body } = await t.request("GET", `/actuator/metrics/${name}`, { token: admin.token });
  return body.measurements.find((m: { statistic: string }) => m.statistic === statistic)?.value as number;
};

describe("health", () => {
  // An embedded replica adds its primary (test/primary-outage.test.ts shows it DOWN).
  const primary = replica ? { primary: { status: "UP" } } : {};
  const bare = { status: "UP", components: { db: { status: "UP" }, diskSpace: { status: "UP" }, ping: { status: "UP" }, ...primary } };

  test.each([
    ["anonymous", () => undefined],
    ["USER", () => user.token],
  ])("%s sees component names and statuses only", async (_, token) => {
    const res = await t.request("GET", "/actuator/health", { token: token() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(bare);
  });

  test("ADMIN sees the details", async () => {
    const res = await t.request("GET", "/actuator/health", { token: admin.token });
    expect(res.status).toBe(200);
    const { db, diskSpace, ping } = res.body.components;
    expect(res.body.status).toBe("UP");
    expect(db).toEqual({ status: "UP", details: { database: leg === "native" ? "SQLite" : "libSQL", userCount: 2, timestamp: expect.stringMatching(/Z$/) } });
    expect(diskSpace.status).toBe("UP");
    expect(diskSpace.details).toMatchObject({ threshold: 10 * 1024 * 1024, path: expect.any(String), exists: true });
    expect(diskSpace.details.total).toBeGreaterThan(diskSpace.details.free);
    expect(ping).toEqual({ status: "UP" });
  });

  test("liveness and readiness; readiness DOWN while draining", async () => {
    expect(await t.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
    expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 200, body: { status: "UP" } });
    t.lifecycle.ready = false;
    try {
      expect(await t.request("GET", "/actuator/health/readiness")).toMatchObject({ status: 503, body: { status: "DOWN" } });
      expect(await t.request("GET", "/actuator/health/liveness")).toMatchObject({ status: 200, body: { status: "UP" } });
    } finally {
      t.lifecycle.ready = true;
    }
  });

  test("a closed database: 503 DOWN, and the db detail names the failure without SQL or stack", async () => {
    const down = await makeTestApp();
    try {
      down.database.close();
      const res = await down.request("GET", "/actuator/health");
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ status: "DOWN", components: { db: { status: "DOWN" }, diskSpace: { status: "UP" }, ping: { status: "UP" }, ...primary } });
      // With the database gone no caller can be proven ADMIN, so the details are read at the service.
      const report = await health(
        { db: down.database, config: down.config, lifecycle: down.lifecycle, logger: createLogging("silent", "json").root, now: Date.now },
        { details: true },
      );
      expect(report.status).toBe("DOWN");
      expect(report.components.db.status).toBe("DOWN");
      const error = report.components.db.details?.error ?? "";
      expect(error).toStartWith("database query failed");
      expect(error).not.toMatch(/select|from|users|\/tmp|\bat\b/i);
    } finally {
      await down.close();
    }
  });
});

describe("access", () => {
  const adminOnly = [
    "/actuator/metrics",
    "/actuator/metrics/users.created",
    "/actuator/prometheus",
    "/actuator/loggers",
    "/actuator/loggers/ROOT",
    "/actuator/threaddump",
    "/actuator/heapdump",
  ];
  scenarios(
    adminOnly.flatMap((path) => [
      { name: `GET ${path} anonymous`, send: () => t.request("GET", path), status: 401, failure: UNAUTHORIZED },
      { name: `GET ${path} as a USER`, send: () => t.request("GET", path, { token: user.token }), status: 403, failure: DENIED },
    ]),
  );

  test("info and version are open", async () => {
    const info = await t.request("GET", "/actuator/info");
    expect(info.status).toBe(200);
    expect(info.body).toEqual({
      build: { name: "usersvc", version: expect.any(String), time: null },
      git: { commit: { id: "dev" } },
      runtime: { name: "bun", version: Bun.version, platform: process.platform, arch: process.arch },
    });
    const version = await t.request("GET", "/api/version");
    expect(version.status).toBe(200);
    expect(version.body).toEqual({ name: "usersvc", version: info.body.build.version, commit: "dev", buildTime: null, runtime: `bun ${Bun.version}` });
  });
});

describe("metrics", () => {
  test("names, and every one answers the Spring shape", async () => {
    const names = await t.request("GET", "/actuator/metrics", { token: admin.token });
    expect(names).toMatchObject({ status: 200, body: { names: METRIC_NAMES } });
    for (const name of METRIC_NAMES) {
      const res = await t.request("GET", `/actuator/metrics/${name}`, { token: admin.token });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        name,
        description: expect.any(String),
        baseUnit: name.includes("cpu") || name === "users.created" ? null : expect.any(String),
        measurements: expect.any(Array),
        availableTags: expect.any(Array),
      });
      expect(res.body.measurements.length).toBeGreaterThan(0);
      for (const m of res.body.measurements) expect(Number.isFinite(m.value)).toBe(true);
    }
  });

  test("gauges read the runtime and the database", async () => {
    expect(await measurement("jvm.memory.used", "VALUE")).toBeGreaterThan(0);
    expect(await measurement("process.memory.rss", "VALUE")).toBeGreaterThan(await measurement("jvm.memory.used", "VALUE"));
    for (const cpu of ["system.cpu.usage", "process.cpu.usage"]) {
      const value = await measurement(cpu, "VALUE");
      expect(value).toBeGreaterThanOrEqual(0);
      expect(value).toBeLessThanOrEqual(1);
    }
    expect(await measurement("users.active", "VALUE")).toBe(2);
  });

  test("unknown metric: 404 METRIC_NOT_FOUND", async () => {
    const res = await t.request("GET", "/actuator/metrics/no.such.metric", { token: admin.token });
    expectFailure(res, 404, { message: "No metric named no.such.metric", errorCode: "METRIC_NOT_FOUND" });
  });

  test("creating a user moves users.created and users.operation.duration", async () => {
    const created = await measurement("users.created", "COUNT");
    const timed = await measurement("users.operation.duration", "COUNT");
    const res = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Metric Person", email: `metric-${Date.now()}@example.com` } });
    expect(res.status).toBe(201);
    expect(await measurement("users.created", "COUNT")).toBe(created + 1);
    expect(await measurement("users.operation.duration", "COUNT")).toBe(timed + 1);
    const view = await t.request("GET", "/actuator/metrics/users.operation.duration", { token: admin.token });
    expect(view.body.availableTags).toContainEqual({ tag: "operation", values: expect.arrayContaining(["create"]) });
    expect(await measurement("users.operation.duration", "MAX")).toBeGreaterThan(0);
  });

  test("http.server.requests is labelled by route template, never the raw id", async () => {
    const before = await measurement("http.server.requests", "COUNT");
    expect((await t.request("GET", `/api/users/${user.id}`, { token: admin.token })).status).toBe(200);
    expect((await t.request("GET", "/api/users/999999", { token: admin.token })).status).toBe(404);
    await Bun.sleep(5); // onAfterResponse records after the answer is sent (setImmediate)
    expect(await measurement("http.server.requests", "COUNT")).toBeGreaterThanOrEqual(before + 2);
    const view = await t.request("GET", "/actuator/metrics/http.server.requests", { token: admin.token });
    const routes = view.body.availableTags.find((tag: { tag: string }) => tag.tag === "route").values;
    expect(routes).toContain("/api/users/:id");
    expect(routes.some((r: string) => /\d/.test(r))).toBe(false);
    expect(view.body.availableTags.find((tag: { tag: string }) => tag.tag === "status").values).toEqual(expect.arrayContaining(["200", "404"]));
    const text = (await t.request("GET", "/actuator/prometheus", { token: admin.token })).text;
    expect(text).toContain('http_server_requests_seconds_count{method="GET",route="/api/users/:id",status="200"}');
    expect(text).toContain('http_server_requests_seconds_max{method="GET",route="/api/users/:id",status="404"}');
    expect(text).not.toContain(`route="/api/users/${user.id}"`);
    expect(text).not.toContain('route="/api/users/999999"');
  });
});

describe("prometheus", () => {
  test("prom-client's default metrics are registered by the first scrape, not at start (an idle server never loads them)", async () => {
    const metrics = createMetrics();
    expect(metrics.registry.getSingleMetric("process_cpu_user_seconds_total")).toBeUndefined();
    const scraped = await metrics.current();
    expect(scraped.getSingleMetric("process_cpu_user_seconds_total")).toBeDefined();
    expect(scraped.getSingleMetric("nodejs_eventloop_lag_seconds")).toBeDefined();
    // Registered once: a second scrape finds them, and registering again would throw.
    expect((await metrics.own()).getSingleMetric("process_cpu_user_seconds_total")).toBeDefined();
    expect(await scraped.metrics()).toContain("process_cpu_user_seconds_total ");
  });

  test("text format 0.0.4 with every family", async () => {
    const res = await t.request("GET", "/actuator/prometheus", { token: admin.token });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    for (const family of [
      "http_server_requests_seconds",
      "http_server_requests_seconds_max",
      "users_created_total",
      "users_operation_duration_seconds",
      "users_operation_duration_seconds_max",
      "users_active",
      "system_cpu_usage",
      "process_cpu_usage",
      "jvm_memory_used_bytes",
      "process_memory_rss_bytes",
    ]) {
      expect(res.text).toContain(`# TYPE ${family} `);
    }
  });

  const promtool = Bun.which("promtool");
  if (!promtool) console.warn("skipping the promtool check: promtool is not installed (Debian package prometheus)");
  test.skipIf(!promtool)("promtool check metrics accepts the scrape, default process metrics included", async () => {
    const app = await makeTestApp();
    try {
      await addDefaultMetrics(app.metrics.registry); // as main.ts's createMetrics() does on the first scrape
      const scrapeAdmin = await app.admin();
      await app.request("GET", `/api/users/${scrapeAdmin.id}`, { token: scrapeAdmin.token });
      const text = (await app.request("GET", "/actuator/prometheus", { token: scrapeAdmin.token })).text;
      expect(text).toContain("process_cpu_user_seconds_total");
      const check = Bun.spawnSync([promtool!, "check", "metrics"], { stdin: new TextEncoder().encode(text) });
      const output = check.stdout.toString() + check.stderr.toString();
      console.log(`promtool check metrics (exit ${check.exitCode}):\n${output || "(no output)"}`);
      expect(check.exitCode).toBe(0);
      expect(output).not.toMatch(/error/i);
    } finally {
      await app.close();
    }
  });

  test("METRICS_TOKEN opens /actuator/prometheus only", async () => {
    const token = "scrape-token-0123456789abcdef";
    const app = await makeTestApp({ METRICS_TOKEN: token });
    try {
      expect((await app.request("GET", "/actuator/prometheus", { token })).status).toBe(200);
      expect((await app.request("GET", "/actuator/prometheus", { token: `${token}x` })).status).toBe(401);
      expect((await app.request("GET", "/actuator/prometheus", { token: token.slice(0, -1) })).status).toBe(401);
      expect((await app.request("GET", "/actuator/metrics", { token })).status).toBe(401);
      const appAdmin = await app.admin();
      expect((await app.request("GET", "/actuator/prometheus", { token: appAdmin.token })).status).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe("loggers", () => {
  test("list, read, change live, reset; unknown and bad levels refused", async () => {
    const lines: string[] = [];
    const app = await makeTestApp({}, { logs: { write: (line) => void lines.push(line) } });
    try {
      app.logging.get("http");
      const appAdmin = await app.admin();
      const list = await app.request("GET", "/actuator/loggers", { token: appAdmin.token });
      expect(list.status).toBe(200);
      expect(list.body.levels).toEqual(["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]);
      expect(list.body.loggers).toMatchObject({ ROOT: { configuredLevel: "OFF", effectiveLevel: "OFF" }, http: { configuredLevel: null, effectiveLevel: "OFF" } });

      const requestLines = () => lines.filter((l) => JSON.parse(l).msg === "request").length;
      await app.request("GET", "/actuator/health");
      expect(requestLines()).toBe(0);

      expect((await app.request("POST", "/actuator/loggers/http", { token: appAdmin.token, body: { configuredLevel: "INFO" } })).status).toBe(204);
      expect((await app.request("GET", "/actuator/loggers/http", { token: appAdmin.token })).body).toEqual({ configuredLevel: "INFO", effectiveLevel: "INFO" });
      await app.request("GET", "/actuator/health");
      await Bun.sleep(10);
      expect(requestLines()).toBeGreaterThanOrEqual(1);
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "request" && l.route === "/actuator/health");
      expect(logged).toMatchObject({ level: "info", logger: "http", method: "GET", status: 200 });

      expect((await app.request("POST", "/actuator/loggers/http", { token: appAdmin.token, body: { configuredLevel: null } })).status).toBe(204);
      expect((await app.request("GET", "/actuator/loggers/http", { token: appAdmin.token })).body).toEqual({ configuredLevel: null, effectiveLevel: "OFF" });
      const count = requestLines();
      await app.request("GET", "/actuator/health");
      await Bun.sleep(10);
      expect(requestLines()).toBe(count);

      const unknown = await app.request("POST", "/actuator/loggers/nobody", { token: appAdmin.token, body: { configuredLevel: "DEBUG" } });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toMatchObject({ success: false, errorCode: "LOGGER_NOT_FOUND" });
      const bad = await app.request("POST", "/actuator/loggers/http", { token: appAdmin.token, body: { configuredLevel: "LOUD" } });
      expect(bad.status).toBe(400);
      expect(bad.body.errorCode).toBeUndefined();
      expect(bad.body.errors?.[0]).toStartWith("configuredLevel: ");
    } finally {
      await app.close();
    }
  });
});

describe("diagnostics", () => {
  test("threaddump: event loop lag, pending work, workers, memory", async () => {
    const res = await t.request("GET", "/actuator/threaddump", { token: admin.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      pid: process.pid,
      runtime: `bun ${Bun.version}`,
      uptimeSeconds: expect.any(Number),
      eventLoopLagMs: expect.any(Number),
      pendingRequests: 0,
      pendingWebSockets: 0,
      workers: 1,
      cpus: expect.any(Number),
      memory: { rss: expect.any(Number), heapTotal: expect.any(Number), heapUsed: expect.any(Number), external: expect.any(Number), arrayBuffers: expect.any(Number) },
    });
    expect(res.body.eventLoopLagMs).toBeGreaterThanOrEqual(0);
  });

  test("heapdump: an ADMIN download of a V8 heap snapshot that parses", async () => {
    const res = await t.handle(new Request("http://localhost/actuator/heapdump", { headers: { authorization: `Bearer ${admin.token}`, "accept-encoding": "gzip" } }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="usersvc-\d+-\d+\.heapsnapshot"$/);
    expect(res.headers.get("content-encoding")).toBeNull();
    const snapshot = JSON.parse(await res.text());
    expect(snapshot.snapshot.meta.node_fields).toContain("name");
    expect(snapshot.nodes.length).toBeGreaterThan(1000);
    expect(snapshot.strings.length).toBeGreaterThan(100);
  }, 30_000); // a heap snapshot takes seconds on a busy machine
});
