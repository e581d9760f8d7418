/**
 * /swagger and /swagger/json: every route documented with its schemas, the bearer scheme where
 * the guard applies, a document redocly accepts, a page that renders offline in Chromium
 * under its own CSP;
 * and BASE_PATH moving all of it (actuator included) under the prefix.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium as playwright } from "playwright-core";
import { makeTestApp, TEST_SECRET, type TestApp } from "./helpers";
import type { Json } from "./openapi-conformance";

let t: TestApp;
let spec: Json;

beforeAll(async () => {
  t = await makeTestApp();
  const res = await t.request("GET", "/swagger/json");
  expect(res.status).toBe(200);
  spec = res.body;
});
afterAll(() => t.close());

/** Elysia's `/api/users/:id` is OpenAPI's `/api/users/{id}`. */
const openApiPath = (path: string) => path.replace(/:([^/]+)/g, "{$1}");
const documentedRoutes = (app: TestApp["app"]) =>
  app.routes.filter((r) => !r.path.includes(".") && !["HEAD", "OPTIONS"].includes(r.method) && !(r.hooks as { detail?: { hide?: boolean } })?.detail?.hide);

describe("the OpenAPI document", () => {
  test("every route in app.routes is there, with a summary and responses", () => {
    const routes = documentedRoutes(t.app);
    expect(routes.length).toBeGreaterThan(15);
    for (const route of routes) {
      const operation = spec.paths[openApiPath(route.path)]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation.summary, `${route.method} ${route.path}`).toEqual(expect.any(String));
      expect(Object.keys(operation.responses ?? {}).length, `${route.method} ${route.path}`).toBeGreaterThan(0);
    }
  });

  test("users and actuator operations: schemas, bearer where guarded, error envelopes", () => {
    expect(spec.openapi).toBe("3.1.0");
    expect(spec.components.securitySchemes.bearerAuth).toEqual({ type: "http", scheme: "bearer", bearerFormat: "JWT", description: expect.any(String) });

    const create = spec.paths["/api/users"].post;
    // The bearer, or an API key with the area's scope (a GET's :read, anything else :write).
    expect(create.security).toEqual([{ bearerAuth: [] }, { apiKey: ["users:write"] }]);
    expect(create.requestBody.content["application/json"].schema.properties).toHaveProperty("email");
    expect(create.responses["201"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/User" });
    const user = spec.components.schemas.User;
    expect(user.properties).toHaveProperty("roles");
    expect(user.properties).not.toHaveProperty("passwordHash");
    for (const status of ["400", "401", "403", "409", "413", "415", "500", "503"]) {
      expect(create.responses[status], status).toEqual({ $ref: `#/components/responses/Error${status}` });
      expect(spec.components.responses[`Error${status}`].content["application/json"].schema, status).toEqual({ $ref: "#/components/schemas/ErrorEnvelope" });
    }
    expect(spec.components.schemas.ErrorEnvelope.properties).toHaveProperty("errorCode");
    expect(spec.paths["/api/users/{id}"].get.parameters).toContainEqual(expect.objectContaining({ name: "id", in: "path", required: true }));

    for (const open of ["/actuator/health", "/actuator/health/liveness", "/actuator/health/readiness", "/actuator/info", "/api/version"]) {
      expect(spec.paths[open].get.security, open).toEqual([]);
    }
    for (const guarded of ["/actuator/metrics", "/actuator/metrics/{name}", "/actuator/prometheus", "/actuator/loggers", "/actuator/threaddump", "/actuator/heapdump"]) {
      expect(spec.paths[guarded].get.security, guarded).toEqual([{ bearerAuth: [] }]);
      expect(spec.paths[guarded].get.responses["401"]).toEqual({ $ref: "#/components/responses/Error401" });
    }
    expect(spec.paths["/actuator/health"].get.responses["503"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Health" });
    expect(spec.components.schemas.Health.properties).toHaveProperty("components");
    expect(spec.paths["/actuator/loggers/{name}"].post.responses["204"]).toEqual({
      description: "Level changed",
      headers: { "X-Request-Id": { $ref: "#/components/headers/XRequestId" } },
    });
    // Our validation keywords never reach the document.
    expect(JSON.stringify(spec)).not.toMatch(/"(messages|refine|nullable)":/);
  });

  test("a browser navigation answers a redirect and no 2xx: its default is the error envelope, and only there", () => {
    const start = spec.paths["/api/auth/oidc/{provider}/start"].get.responses;
    expect(start["302"].headers).toHaveProperty("Location");
    expect(start.default).toEqual({ $ref: "#/components/responses/ErrorDefault" });
    expect(spec.components.responses.ErrorDefault.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ErrorEnvelope" });
    const withDefault = Object.entries<Json>(spec.paths).flatMap(([path, item]) =>
      Object.entries<Json>(item)
        .filter(([, operation]) => operation.responses?.default)
        .map(([method]) => `${method} ${path}`),
    );
    expect(withDefault.sort()).toEqual(["get /api/auth/oidc/{provider}/callback", "get /api/auth/oidc/{provider}/start"]);
  });

  const redocly = join(import.meta.dir, "../node_modules/@redocly/cli/bin/cli.js");
  const node = Bun.which("node");
  if (!existsSync(redocly) || !node) console.warn("skipping the redocly lint: @redocly/cli (devDependency) or node is not installed");
  test.skipIf(!existsSync(redocly) || !node)(
    "redocly lint, recommended ruleset: 0 errors, 0 warnings",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "usersvc-openapi-"));
      try {
        writeFileSync(join(dir, "openapi.json"), JSON.stringify(spec));
        // No redocly.yaml: its built-in recommended ruleset, every rule at its default severity.
        const lint = Bun.spawnSync([node!, redocly, "lint", "openapi.json", "--format=stylish"], {
          cwd: dir,
          env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
        });
        // Redocly's framed notice about the Node.js version is not about the document.
        const output = (lint.stdout.toString() + lint.stderr.toString()).replace(/^\s*[╔║╚].*\n/gm, "");
        expect(output).toContain("using built in recommended configuration");
        expect(output).toContain("Your API description is valid");
        expect(output, output).not.toMatch(/error|warning/i);
        expect(lint.exitCode).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});

describe("the page", () => {
  test("served from the app itself: no CDN", async () => {
    const page = await t.request("GET", "/swagger");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.text).toContain('src="/swagger/assets/swagger-ui-bundle.js"');
    expect(page.text).toContain('"/swagger/json"');
    expect(page.text).not.toMatch(/https?:\/\//);
    const script = await t.request("GET", "/swagger/assets/swagger-ui-bundle.js");
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(script.text).toContain("SwaggerUIBundle");
    const styles = await t.request("GET", "/swagger/assets/swagger-ui.css");
    expect(styles.status).toBe(200);
    expect(styles.headers.get("content-type")).toBe("text/css; charset=utf-8");
  });

  const chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(existsSync);
  if (!chromium) console.warn("skipping the Chromium render: chromium is not installed (Debian package chromium)");
  test.skipIf(!chromium)(
    "renders in headless Chromium from a real port, under BASE_PATH, listing the operations, with no CSP violation",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "usersvc-docs-"));
      const server = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
        cwd: join(import.meta.dir, ".."),
        env: { PATH: process.env.PATH, PORT: "0", HOST: "127.0.0.1", DATA_DIR: dir, JWT_SECRET: TEST_SECRET, BASE_PATH: "/svc", LOG_LEVEL: "info" },
        stdout: "pipe",
        stderr: "inherit",
      });
      const browser = await playwright.launch({ executablePath: chromium, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
      try {
        const port = await listeningPort(server.stdout);
        const page = await browser.newPage();
        // Chromium reports each blocked load or inline script as a console error naming the policy.
        const problems: string[] = [];
        page.on("console", (message) => {
          if (message.type() === "error" || /Content Security Policy/i.test(message.text())) problems.push(message.text());
        });
        page.on("pageerror", (error) => problems.push(error.message));
        page.on("response", (response) => response.status() >= 400 && problems.push(`${response.status()} ${response.url()}`));
        await page.goto(`http://127.0.0.1:${port}/svc/swagger`);
        await page.waitForSelector(".opblock-summary-description", { timeout: 30_000 });
        const summaries = await page.locator(".opblock-summary-description").allTextContents();
        for (const summary of ["Overall health", "Readiness probe", "Metrics in Prometheus text format", "Heap snapshot download", "List users", "Create a user"]) {
          expect(summaries).toContain(summary);
        }
        expect(await page.locator(".opblock-summary-path").allTextContents()).toContain("/svc/api/users/{id}");
        expect(problems).toEqual([]);
      } finally {
        await browser.close();
        server.kill("SIGTERM");
        await server.exited;
        rmSync(dir, { recursive: true, force: true });
      }
    },
    90_000,
  );
});

/** The port from main.ts's "usersvc listening" log line. */
async function listeningPort(stdout: ReadableStream<Uint8Array>): Promise<number> {
  const decoder = new TextDecoder();
  let seen = "";
  for await (const chunk of stdout) {
    seen += decoder.decode(chunk);
    const line = seen.split("\n").find((l) => l.includes('"usersvc listening"'));
    if (line) return JSON.parse(line).port;
  }
  throw new Error(`the server stopped before listening:\n${seen}`);
}

describe("BASE_PATH=/svc", () => {
  let svc: TestApp;
  beforeAll(async () => {
    svc = await makeTestApp({ BASE_PATH: "/svc" });
  });
  afterAll(() => svc.close());

  test("actuator, version, docs and the API all answer under the prefix, and nothing outside it", async () => {
    const svcAdmin = await svc.admin();
    expect(await svc.request("GET", "/actuator/health")).toMatchObject({ status: 200, body: { status: "UP" } });
    expect((await svc.request("GET", "/actuator/health/readiness")).status).toBe(200);
    expect((await svc.request("GET", "/api/version")).status).toBe(200);
    expect((await svc.request("GET", `/api/users/${svcAdmin.id}`, { token: svcAdmin.token })).status).toBe(200);
    const page = await svc.request("GET", "/swagger");
    expect(page.status).toBe(200);
    expect(page.text).toContain('src="/svc/swagger/assets/swagger-ui-bundle.js"');
    expect(page.text).toContain('"/svc/swagger/json"');
    expect((await svc.request("GET", "/swagger/assets/swagger-ui.css")).status).toBe(200);

    const document = (await svc.request("GET", "/swagger/json")).body;
    expect(Object.keys(document.paths).every((p) => p.startsWith("/svc/"))).toBe(true);
    expect(document.paths).toHaveProperty(["/svc/api/users/{id}"]);
    expect(document.paths).toHaveProperty(["/svc/actuator/prometheus"]);

    // Metrics label routes by their template inside the service, without the prefix.
    await Bun.sleep(5);
    const scrape = await svc.request("GET", "/actuator/prometheus", { token: svcAdmin.token });
    expect(scrape.status).toBe(200);
    expect(scrape.text).toContain('route="/api/users/:id"');

    for (const outside of ["/actuator/health", "/swagger", "/api/version"]) {
      const res = await svc.handle(new Request(`http://localhost${outside}`));
      expect(res.status, outside).toBe(401);
    }
  });
});

describe("GET /", () => {
  test("open: a small JSON index of where things are", async () => {
    const res = await t.request("GET", "/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.body).toEqual({ name: "usersvc", version: expect.stringMatching(/^\d+\.\d+\.\d+/), docs: "/swagger", health: "/actuator/health", console: "/admin" });
    expect((await t.request("GET", res.body.docs)).status).toBe(200);
    expect((await t.request("GET", res.body.health)).status).toBe(200);
  });

  test("under BASE_PATH the links carry the prefix", async () => {
    const svc = await makeTestApp({ BASE_PATH: "/svc" });
    try {
      for (const path of ["", "/"]) {
        const res = await svc.handle(new Request(`http://localhost/svc${path}`));
        expect(res.status, `/svc${path}`).toBe(200);
        expect(await res.json()).toMatchObject({ docs: "/svc/swagger", health: "/svc/actuator/health", console: "/svc/admin" });
      }
    } finally {
      await svc.close();
    }
  });
});
