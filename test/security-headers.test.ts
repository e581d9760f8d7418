/**
 * Security headers on every answer (a success, a 401, a 404, a 500, the Swagger page with its
 * own single policy), HSTS from HSTS_MAX_AGE, and CORS only for CORS_ORIGINS: preflights
 * answered before authentication, refused origins seeing no access-control-* header at all.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { API_POLICY, pagePolicy } from "../src/http/security-headers";
import { makeTestApp, type TestApp } from "./helpers";

const ALLOWED = "https://app.example.com";
const REFUSED = "https://evil.example.net";

let t: TestApp;
let admin: Awaited<ReturnType<TestApp["admin"]>>;
beforeAll(async () => {
  t = await makeTestApp({ CORS_ORIGINS: `${ALLOWED}, http://localhost:5173` });
  admin = await t.admin();
});
afterAll(() => t.close());

function expectSecurityHeaders(headers: Headers, policy = API_POLICY) {
  expect(headers.get("x-frame-options")).toBe("DENY");
  expect(headers.get("content-security-policy")).toBe(policy);
  expect(headers.get("x-content-type-options")).toBe("nosniff");
  expect(headers.get("referrer-policy")).toBe("no-referrer");
}

const accessControl = (headers: Headers) => [...headers.keys()].filter((k) => k.startsWith("access-control-"));

describe("security headers", () => {
  test("on a success, a 401, a 404 and a 405", async () => {
    const answers = [
      await t.request("GET", "/actuator/health"),
      await t.request("GET", "/api/users"),
      await t.request("GET", "/api/no-such-thing", { token: admin.token }),
      await t.request("DELETE", "/api/version", { token: admin.token }),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 401, 404, 405]);
    for (const answer of answers) {
      expectSecurityHeaders(answer.headers);
      expect(answer.headers.get("strict-transport-security")).toBeNull();
    }
  });

  test("on a 500 (the database closed under the app)", async () => {
    const broken = await makeTestApp();
    const { token } = await broken.admin();
    broken.database.close();
    try {
      const res = await broken.request("GET", "/api/users", { token });
      expect(res.status).toBe(500);
      expectSecurityHeaders(res.headers);
    } finally {
      await broken.close();
    }
  });

  test("/swagger sends one complete policy of its own: scripts from itself only, never framed", async () => {
    const page = await t.request("GET", "/swagger");
    expect(page.status).toBe(200);
    const policy = page.headers.get("content-security-policy")!;
    expectSecurityHeaders(page.headers, policy);
    // One header: Headers joins repeated ones with ", ", which a single policy never contains.
    expect(policy).not.toContain(",");
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("script-src 'self';");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toContain("unsafe");
    expect(page.text).not.toMatch(/<script>|<script(?![^>]*\bsrc=)[^>]*>/);
    const init = await t.request("GET", "/swagger/assets/swagger-init.js");
    expect(init.status).toBe(200);
    expect(init.text).toContain("SwaggerUIBundle(");
  });

  test("a page policy never admits inline or eval'd script", () => {
    expect(() => pagePolicy({ script: ["'self'", "'unsafe-inline'"] })).toThrow();
    expect(pagePolicy({ script: ["'self'"] })).toBe("default-src 'none'; script-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'");
  });

  test("HSTS_MAX_AGE adds Strict-Transport-Security to every answer", async () => {
    const hsts = await makeTestApp({ HSTS_MAX_AGE: "31536000" });
    try {
      for (const path of ["/actuator/health", "/api/users", "/swagger"]) {
        expect((await hsts.request("GET", path)).headers.get("strict-transport-security"), path).toBe("max-age=31536000");
      }
    } finally {
      await hsts.close();
    }
  });
});

describe("CORS", () => {
  const preflight = (origin: string, path = "/api/users") =>
    t.request("OPTIONS", path, { headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" } });

  test("a preflight from an allowed origin, without a token: 204 with the CORS headers", async () => {
    for (const path of ["/api/users", "/api/users/1", "/actuator/loggers/root"]) {
      const res = await preflight(ALLOWED, path);
      expect(res.status, path).toBe(204);
      expect(res.text).toBe("");
      expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
      expect(res.headers.get("access-control-allow-methods")).toContain("POST");
      expect(res.headers.get("access-control-allow-headers")).toBe("authorization, content-type");
      expect(res.headers.get("access-control-max-age")).toMatch(/^\d+$/);
      expect(res.headers.get("vary")).toBe("Origin");
      expectSecurityHeaders(res.headers);
    }
  });

  test("a preflight from a refused origin: 204 and no access-control-* header", async () => {
    const res = await preflight(REFUSED);
    expect(res.status).toBe(204);
    expect(accessControl(res.headers)).toEqual([]);
    expectSecurityHeaders(res.headers);
  });

  test("answers to an allowed origin expose X-Total-Count, ETag, X-Request-Id and Retry-After", async () => {
    for (const [token, status] of [
      [admin.token, 200],
      [undefined, 401],
    ] as const) {
      const res = await t.request("GET", "/api/users", { token, headers: { origin: "http://localhost:5173" } });
      expect(res.status).toBe(status);
      expect(res.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
      expect(res.headers.get("access-control-expose-headers")).toBe("X-Total-Count, ETag, X-Request-Id, Retry-After");
    }
  });

  test("a plain GET from a refused origin (with or without a token): no access-control-* header", async () => {
    for (const token of [admin.token, undefined]) {
      const res = await t.request("GET", "/api/users", { token, headers: { origin: REFUSED } });
      expect(accessControl(res.headers)).toEqual([]);
    }
    // Matching is exact: a look-alike or a sub-path is another origin.
    for (const origin of [`${ALLOWED}.evil.net`, "http://app.example.com", "null"]) {
      expect(accessControl((await preflight(origin)).headers), origin).toEqual([]);
    }
  });

  test("without CORS_ORIGINS every origin is refused: preflights get a bare 204, answers no access-control-*", async () => {
    const plain = await makeTestApp();
    try {
      const res = await plain.request("OPTIONS", "/api/users", { headers: { origin: ALLOWED, "access-control-request-method": "GET" } });
      expect(res.status).toBe(204);
      expect(accessControl(res.headers)).toEqual([]);
      expectSecurityHeaders(res.headers);
      expect(res.headers.get("x-request-id")).toEqual(expect.any(String));
      const answer = await plain.request("GET", "/actuator/health", { headers: { origin: ALLOWED } });
      expect(accessControl(answer.headers)).toEqual([]);
      // No answer depends on the Origin, so none tells caches to key on it.
      expect(answer.headers.get("vary")).toBeNull();
    } finally {
      await plain.close();
    }
  });
});
