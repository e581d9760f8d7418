/**
 * The Host header (issue 40 items 1 and 6), through real sockets: Bun builds a request's URL from
 * its Host header and, for one that is not a host (`a/b`, `a@b`, `a\b`), hands over a bare path
 * (`/api/auth/refresh`, no scheme or host), which app.handle's requests never have. Such a Host,
 * and one naming a port outside 1–65535, answers 400 INVALID_HOST before any route, in the envelope
 * with the security headers and X-Request-Id; with tracing on too, where the bare path once reached
 * Bun's own HTML error page. IPv6 literals, a trailing dot and `_` in names are hosts like any other.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { loadConfig } from "../src/config";
import { startTracing, type Tracing } from "../src/tracing";
import { makeTestApp } from "./helpers";
import { ADMIN, startServer, type ServerProcess } from "./server-process";
import { startOtlpReceiver } from "./support/otlp-receiver";

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

interface RawRequest {
  headers?: Record<string, string>;
  body?: string;
  version?: string;
}

/** One request written as raw HTTP/1.x to the server's port (`host` null: no Host header), its answer read to the end. */
async function raw(server: ServerProcess, method: string, path: string, host: string | null, sent: RawRequest = {}): Promise<RawAnswer> {
  const { port } = new URL(server.url);
  const { body: content = "", version = "1.1" } = sent;
  const fields = { ...sent.headers, ...(content || method === "POST" ? { "content-length": String(Buffer.byteLength(content)) } : {}) };
  const lines = [
    `${method} ${path} HTTP/${version}`,
    ...(host === null ? [] : [`Host: ${host}`]),
    ...Object.entries(fields).map(([k, v]) => `${k}: ${v}`),
    "Connection: close",
    "",
    content,
  ];
  const chunks: Buffer[] = [];
  const { promise, resolve } = Promise.withResolvers<void>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port: Number(port),
    socket: { data: (_s, data) => void chunks.push(Buffer.from(data)), close: () => resolve(), error: () => resolve() },
  });
  socket.write(lines.join("\r\n"));
  await promise;
  const text = Buffer.concat(chunks).toString("latin1");
  const [head, ...rest] = text.split("\r\n\r\n");
  const [statusLine, ...headerLines] = head.split("\r\n");
  const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]));
  let body = rest.join("\r\n\r\n");
  // A chunked answer: its chunks joined.
  if (headers["transfer-encoding"] === "chunked") {
    let out = "";
    for (let at = 0; ; ) {
      const end = body.indexOf("\r\n", at);
      const size = Number.parseInt(body.slice(at, end), 16);
      if (!size) break;
      out += body.slice(end + 2, end + 2 + size);
      at = end + 2 + size + 2;
    }
    body = out;
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}

/** The 400 a Host that is not a host answers: the envelope, with the headers every error answer carries. */
function expectInvalidHost(answer: RawAnswer, host: string | null) {
  expect({ host, status: answer.status, type: answer.headers["content-type"] }).toEqual({ host, status: 400, type: expect.stringContaining("application/json") });
  expect(JSON.parse(answer.body)).toMatchObject({ success: false, errorCode: "INVALID_HOST" });
  expect(answer.headers["x-request-id"]).toMatch(/^[\w-]{8,}$/);
  expect(answer.headers).toMatchObject({
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "content-security-policy": expect.stringContaining("default-src 'none'"),
  });
}

const BAD_HOSTS = ["a/b", "a@b", "a\\b", "x:0", "x:65536", "x:http", "a b", "a?b", "a#b", "[::1"];
const GOOD_HOSTS = ["[::1]:8080", "a_b.example.", "localhost", "127.0.0.1:8080", "a"];

describe("a real server", () => {
  let server: ServerProcess;
  let key = "";
  beforeAll(async () => {
    server = await startServer({});
    // A products:read key of the ADMIN: what finding 1 turned into an unrestricted token.
    const login = await fetch(`${server.url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(ADMIN) });
    const { token } = ((await login.json()) as { data: { token: string } }).data;
    const created = await fetch(`${server.url}/api/account/api-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: "catalogue", scopes: ["products:read"] }),
    });
    key = ((await created.json()) as { key: string }).key;
  }, 30_000);
  afterAll(() => server.stop());

  test("a Host that is not a host, or names a port outside 1–65535, answers 400 INVALID_HOST before any route", async () => {
    for (const host of BAD_HOSTS) {
      expectInvalidHost(await raw(server, "GET", "/actuator/health", host), host);
      expectInvalidHost(await raw(server, "GET", "/nonexistent?token=setup-secret", host), host);
    }
  });

  test("no Host at all (HTTP/1.0): Bun's URL is a bare path as well, so 400 INVALID_HOST", async () => {
    expectInvalidHost(await raw(server, "GET", "/actuator/health", null, { version: "1.0" }), null);
  });

  test("an API key with `Host: a/b` gets 400 on the refresh (it answered a token for the key's owner), and 403 with any good Host", async () => {
    for (const host of ["a/b", "a@b", "a\\b"]) expectInvalidHost(await raw(server, "POST", "/api/auth/refresh", host, { headers: { authorization: `Bearer ${key}` } }), host);
    for (const host of GOOD_HOSTS) {
      const answer = await raw(server, "POST", "/api/auth/refresh", host, { headers: { authorization: `Bearer ${key}` } });
      expect({ host, status: answer.status, code: JSON.parse(answer.body).errorCode }).toEqual({ host, status: 403, code: "API_KEY_NOT_ALLOWED" });
    }
  });

  test("a short Host (`a`) routes nothing by a shifted path: /xx/api/auth/refresh is no route", async () => {
    const answer = await raw(server, "POST", "/xx/api/auth/refresh", "a", { headers: { authorization: `Bearer ${key}` } });
    expect({ status: answer.status, code: JSON.parse(answer.body).errorCode }).toEqual({ status: 404, code: "NOT_FOUND" });
  });

  test("IPv6 literals, a trailing dot, `_` and short names are answered as usual", async () => {
    for (const host of GOOD_HOSTS) {
      const health = await raw(server, "GET", "/actuator/health", host);
      expect({ host, status: health.status, body: JSON.parse(health.body).status }).toEqual({ host, status: 200, body: "UP" });
      const products = await raw(server, "GET", "/api/products", host, { headers: { authorization: `Bearer ${key}` } });
      expect({ host, status: products.status }).toEqual({ host, status: 200 });
    }
  });
});

describe("a real server with tracing on", () => {
  let receiver: ReturnType<typeof startOtlpReceiver>;
  let server: ServerProcess;
  beforeAll(async () => {
    receiver = startOtlpReceiver();
    server = await startServer({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
  }, 30_000);
  afterAll(async () => {
    await server.stop();
    receiver.stop();
  });

  test("a bad Host and an error answer the envelope, never Bun's HTML error page", async () => {
    for (const host of BAD_HOSTS) expectInvalidHost(await raw(server, "GET", "/nonexistent", host), host);
    const unknown = await raw(server, "GET", "/nonexistent", "localhost");
    expect({ status: unknown.status, code: JSON.parse(unknown.body).errorCode }).toEqual({ status: 401, code: "UNAUTHORIZED" });
    const malformed = await raw(server, "POST", "/api/auth/login", "localhost", { headers: { "content-type": "application/json" }, body: "{" });
    expect({ status: malformed.status, type: malformed.headers["content-type"] }).toEqual({ status: 400, type: expect.stringContaining("application/json") });
  });
});

describe("what escapes the app", () => {
  let tracing: Tracing;
  let receiver: ReturnType<typeof startOtlpReceiver>;
  beforeAll(async () => {
    receiver = startOtlpReceiver();
    tracing = (await startTracing(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint }).tracing, "0.0.0-test"))!;
  });
  afterAll(async () => {
    await tracing.shutdown();
    receiver.stop();
  });

  test("a failure around the whole handling (here the tracer's) answers a 500 envelope with the security headers, not Bun's error page", async () => {
    const failing: Tracing = {
      ...tracing,
      request: () => {
        throw new Error("the tracer failed");
      },
    };
    const lines: string[] = [];
    const t = await makeTestApp({ LOG_LEVEL: "error" }, { tracing: failing, logs: { write: (line) => void lines.push(line) } });
    try {
      t.app.listen({ port: 0, hostname: "127.0.0.1" });
      const answer = await fetch(`http://127.0.0.1:${t.app.server!.port}/api/products`);
      expect({ status: answer.status, type: answer.headers.get("content-type") }).toEqual({ status: 500, type: expect.stringContaining("application/json") });
      expect(await answer.json()).toMatchObject({ success: false, errorCode: "INTERNAL_ERROR" });
      expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
      expect(lines.join("")).toContain("the tracer failed");
    } finally {
      await t.app.stop(true);
      await t.close();
    }
  });
});
