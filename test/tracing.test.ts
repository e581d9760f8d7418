/**
 * Tracing (OTEL_EXPORTER_OTLP_ENDPOINT): a request's `traceparent` is continued by the request's
 * span, its units of work are its children with their round trips, the outbox row it wrote is
 * delivered in a span of the same trace and the webhook carries that trace on, and its log lines
 * carry the trace_id. All as an OTLP receiver (test/support/otlp-receiver.ts) decodes what the
 * exporter sent. Without the setting, no OpenTelemetry module is loaded at all.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { leg } from "./legs";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { eq } from "drizzle-orm";
import { loadConfig } from "../src/config";
import { outbox } from "../src/db/schema";
import { webhookChannel } from "../src/features/notifications/channels";
import { startOutboxSender } from "../src/features/notifications/sender";
import { startTracing, type Tracing } from "../src/tracing";
import { makeTestApp, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { freePort } from "./server-process";
import { startOtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver";

const ROOT = resolve(import.meta.dir, "..");
const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
/** The test kit's proxy counts round trips to sqld over HTTP (as in remote.test.ts). */
const countsRoundTrips = leg === "remote-http";

let receiver: ReturnType<typeof startOtlpReceiver>;
let tracing: Tracing;
let t: TestApp;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  receiver = startOtlpReceiver();
  const traced = await startTracing(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: "usersvc-test" }).tracing, "0.0.0-test");
  if (!traced) throw new Error("tracing did not start");
  tracing = traced;
  t = await makeTestApp({ LOG_LEVEL: "info" }, { tracing, logs: { write: (line) => void lines.push(JSON.parse(line)) } });
});
afterAll(async () => {
  await t.close();
  await tracing.shutdown();
  receiver.stop();
});

describe("a request with a traceparent", () => {
  const traceId = hex(16);
  const callerSpanId = hex(8);
  let requestId = "";
  let email = "";
  let spans: ReceivedSpan[] = [];
  let requestSpan: ReceivedSpan;

  beforeAll(async () => {
    email = uniqueEmail("trace");
    await t.primary?.reset();
    const res = await t.request("POST", "/api/auth/register", { body: validRegistration(email), headers: { traceparent: `00-${traceId}-${callerSpanId}-01` } });
    expect(res.status).toBe(201);
    requestId = res.headers.get("x-request-id") ?? "";
    // The request's span ends after its answer has gone out (onAfterResponse).
    spans = await receiver.trace(traceId, (found) => found.some((s) => s.kind === 2), { flush: tracing.flush });
    requestSpan = spans.find((s) => s.kind === 2)!;
  });

  test("its span continues the caller's trace, named by the route template, with the status", () => {
    expect(requestSpan).toMatchObject({
      name: "POST /api/auth/register",
      parentSpanId: callerSpanId,
      statusCode: 0,
      attributes: { "http.request.method": "POST", "http.route": "/api/auth/register", "http.response.status_code": 201, "url.path": "/api/auth/register" },
      resource: { "service.name": "usersvc-test", "service.version": "0.0.0-test" },
    });
  });

  test("each unit of work is a child span with its round trips; on a remote primary they are the server's count", async () => {
    const units = spans.filter((s) => s.name.startsWith("db "));
    expect(units.map((s) => s.name)).toContain("db writeAll");
    for (const unit of units) {
      expect({ parent: unit.parentSpanId, kind: unit.kind, system: unit.attributes["db.system.name"], trips: typeof unit.attributes["db.round_trips"] }).toEqual({
        parent: requestSpan.spanId,
        kind: 3,
        system: "sqlite",
        trips: "number",
      });
    }
    const unitTrips = units.reduce((sum, s) => sum + (s.attributes["db.round_trips"] as number), 0);
    const requestTrips = requestSpan.attributes["db.round_trips"] as number;
    expect(requestTrips).toBeGreaterThanOrEqual(unitTrips);
    if (t.primary) {
      expect(unitTrips).toBeGreaterThan(0);
      if (countsRoundTrips) expect(requestTrips).toBe(await t.primary.roundTrips());
    } else expect(requestTrips).toBe(0); // a file: nothing goes over a network
  });

  test("health probes make no trace", async () => {
    const probeTrace = hex(16);
    expect((await t.request("GET", "/actuator/health/liveness", { headers: { traceparent: `00-${probeTrace}-${hex(8)}-01` } })).status).toBe(200);
    await tracing.flush();
    expect(receiver.spans.filter((s) => s.traceId === probeTrace || s.name.includes("/actuator/health"))).toEqual([]);
  });

  test("its log lines carry the trace_id", () => {
    const line = lines.find((l) => l.requestId === requestId && l.msg === "request");
    expect(line).toMatchObject({ route: "/api/auth/register", status: 201, trace_id: traceId, span_id: requestSpan.spanId });
    expect(lines.filter((l) => l.trace_id === undefined && l.requestId === requestId)).toEqual([]);
    // Outside a span a line is as it was.
    t.logging.get("tracing-test").info({ n: 1 }, "outside");
    t.logging.get("tracing-test").info({ n: 2 }, "outside");
    expect(lines.filter((l) => l.msg === "outside").map(({ time: _time, ...rest }) => rest)).toEqual([
      { level: "info", logger: "tracing-test", n: 1, msg: "outside" },
      { level: "info", logger: "tracing-test", n: 2, msg: "outside" },
    ]);
  });

  test("the webhook delivery of its notification continues the trace, and the webhook carries it on", async () => {
    const delivered: { traceparent: string | null; body: { kind: string; recipient: string } }[] = [];
    const webhook = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        delivered.push({ traceparent: request.headers.get("traceparent"), body: (await request.json()) as { kind: string; recipient: string } });
        return new Response(null, { status: 204 });
      },
    });
    const logger = t.logging.get("outbox");
    const channels = [webhookChannel({ url: `http://127.0.0.1:${webhook.port}/hook`, timeoutMs: 5000, logger, now: Date.now })];
    const sender = startOutboxSender({ db: t.database, logger, channels, tracing, pollIntervalMs: 20 });
    try {
      const deadline = Date.now() + 10_000;
      while (!delivered.some((d) => d.body.recipient === email) && Date.now() < deadline) await Bun.sleep(20);
    } finally {
      await sender.stop();
      webhook.stop(true);
    }
    const welcome = delivered.find((d) => d.body.recipient === email && d.body.kind === "WELCOME");
    expect(welcome?.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const deliverySpanId = welcome?.traceparent?.split("-")[2];
    const all = await receiver.trace(traceId, (found) => found.some((s) => s.spanId === deliverySpanId), { flush: tracing.flush });
    const span = all.find((s) => s.spanId === deliverySpanId);
    expect(span).toMatchObject({ name: "outbox webhook", kind: 4, attributes: { "usersvc.outbox.kind": "WELCOME" }, statusCode: 0 });
    // Its parent: the request's unit of work that wrote the outbox row.
    const writers = spans.filter((s) => s.name === "db writeAll" && s.parentSpanId === requestSpan.spanId).map((s) => s.spanId);
    expect(writers).toContain(span?.parentSpanId ?? "");
  });
});

test("each request's outbox rows keep that request's trace, also where the statement is prepared once (POST /api/users, register)", async () => {
  const admin = await t.admin();
  const writes = [
    (email: string) => ({ path: "/api/users", token: admin.token, body: { name: "Traced User", email } }),
    (email: string) => ({ path: "/api/auth/register", token: undefined, body: validRegistration(email) }),
  ];
  for (const write of [...writes, ...writes]) {
    const [email, traceId] = [uniqueEmail("rows"), hex(16)];
    const { path, ...options } = write(email);
    expect((await t.request("POST", path, { ...options, headers: { traceparent: `00-${traceId}-${hex(8)}-01` } })).status).toBe(201);
    const rows = await t.db.select({ kind: outbox.kind, traceparent: outbox.traceparent }).from(outbox).where(eq(outbox.recipient, email));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect({ kind: row.kind, trace: row.traceparent?.split("-")[1] }).toEqual({ kind: row.kind, trace: traceId });
  }
});

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  test("no request or unit makes a span, and no traceparent is stored", async () => {
    const plain = await makeTestApp();
    try {
      const traceId = hex(16);
      const email = uniqueEmail("untraced");
      const res = await plain.request("POST", "/api/auth/register", { body: validRegistration(email), headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
      expect(res.status).toBe(201);
      await tracing.flush();
      await Bun.sleep(100);
      expect(receiver.spans.filter((s) => s.traceId === traceId)).toEqual([]);
      const rows = await plain.db.select({ kind: outbox.kind, traceparent: outbox.traceparent }).from(outbox).where(eq(outbox.recipient, email));
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.filter((row) => row.traceparent !== null)).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  /**
   * `usersvc serve` from source with a preload that reports, at exit, how many modules of the
   * OpenTelemetry SDK were loaded (@opentelemetry/api not counted: prom-client loads it for its exemplars).
   */
  async function openTelemetryModulesOfServe(env: Record<string, string>) {
    const dir = mkdtempSync(join(tmpdir(), "usersvc-tracing-"));
    const preload = join(dir, "count-modules.ts");
    writeFileSync(
      preload,
      `process.on("exit", () => process.stderr.write("otel-modules=" + Object.keys(require.cache).filter((k) => k.includes("/@opentelemetry/") && !k.includes("/@opentelemetry/api/")).length + "\\n"));\n`,
    );
    const port = freePort();
    const server = Bun.spawn([process.execPath, "--preload", preload, join(ROOT, "src/main.ts"), "serve"], {
      cwd: dir,
      env: { ...process.env, DATA_DIR: dir, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", JWT_SECRET: "t".repeat(80), ...env },
      stdout: "ignore",
      stderr: "pipe",
    });
    try {
      for (
        let i = 0;
        !(await fetch(`http://127.0.0.1:${port}/actuator/health`).then(
          (r) => r.ok,
          () => false,
        ));
        i++
      ) {
        if (i > 200 || server.exitCode !== null) throw new Error("usersvc did not start");
        await Bun.sleep(50);
      }
      expect((await fetch(`http://127.0.0.1:${port}/api/version`, { headers: { traceparent: `00-${hex(16)}-${hex(8)}-01` } })).status).toBe(200);
      server.kill("SIGTERM");
      expect(await server.exited).toBe(0);
      const stderr = await new Response(server.stderr).text();
      return Number(/otel-modules=(\d+)/.exec(stderr)?.[1] ?? Number.NaN);
    } finally {
      server.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test("usersvc serve loads no OpenTelemetry module (and does with it)", async () => {
    expect(await openTelemetryModulesOfServe({})).toBe(0);
    expect(await openTelemetryModulesOfServe({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint })).toBeGreaterThan(0);
  }, 30_000);
});
