/**
 * `Cache-Control: no-store` on every answer to an authenticated request and on every token
 * answer, errors and downloads included, so no browser or proxy cache keeps a user's data or a
 * bearer token; GET /api/files/info/{id} keeps the seed's hour, as `private, max-age=3600`.
 * The walk is the private-fields walk (test/support/route-walk.ts): every route the app registers.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { makeTestApp, type TestApp } from "./helpers";
import { prepareRouteWalk } from "./support/route-walk";
import { routesOf } from "./support/access-rules";

let t: TestApp;
let routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;
let user: { id: number; email: string; token: string };

beforeAll(async () => {
  t = await makeTestApp({ PUBLIC_URL: "https://id.example.test" });
  routeWalk = await prepareRouteWalk(t);
  user = await t.createUser({ password: "Passw0rd!" });
}, 60_000);
afterAll(() => t?.close());

/** The one route whose answer a private cache may keep: the seed's hour, now said to be private. */
const FILE_INFO = "GET /api/files/info/:id";

describe("Cache-Control on authenticated and token answers", () => {
  test("every route the app registers, asked with a token: no-store (file info: private, one hour); login's token too", async () => {
    const guarded = new Set(
      routesOf(t)
        .filter(({ access }) => access)
        .map(({ route }) => route),
    );
    const seen: Record<string, string | null> = {};
    const kept: string[] = [];
    const expected: Record<string, string | null> = {};
    await routeWalk.walk(({ route, request, response }) => {
      const isTokenAnswer = route === "POST /api/auth/login";
      if (!request.headers.has("authorization") && !isTokenAnswer) return;
      const cacheControl = response.headers.get("cache-control");
      seen[route] = cacheControl;
      // An open route's page or static asset is the same for everyone, token or not: it keeps its own policy.
      const sameForEveryone = !guarded.has(route) && /^text\/(html|css|javascript)/.test(response.headers.get("content-type") ?? "");
      if (sameForEveryone) kept.push(route);
      expected[route] = route === FILE_INFO ? "private, max-age=3600" : sameForEveryone ? cacheControl : "no-store";
    });
    expect(seen).toEqual(expected);
    // Downloads, errors and the token answers are among them.
    expect(Object.keys(seen)).toEqual(
      expect.arrayContaining([
        "GET /api/files/download/:fileName",
        "GET /api/admin/backups/:name",
        "DELETE /api/admin/backups/:name",
        "POST /api/auth/login",
        "POST /api/auth/refresh",
      ]),
    );
    expect(Object.keys(seen).length).toBeGreaterThan(45);
    expect(kept.sort()).toEqual(["GET /swagger", "GET /swagger/assets/swagger-init.js", "GET /swagger/assets/swagger-ui-bundle.js", "GET /swagger/assets/swagger-ui.css"]);
  }, 60_000); // the walk takes a heap snapshot and a backup: seconds on a busy machine

  const asked = (method: string, path: string, init: { token?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    return t.app.handle(new Request(`http://localhost${path}`, { method, headers, body: init.body }));
  };
  const json = { "content-type": "application/json" };

  const refusals: [string, () => Promise<Response>, number][] = [
    ["an unknown path, with a token", () => asked("GET", "/api/nothing-here", { token: user.token }), 404],
    ["an ADMIN route, with a USER's token", () => asked("GET", "/api/audit", { token: user.token }), 403],
    ["a token that does not verify", () => asked("GET", "/api/users", { token: "not.a.token" }), 401],
    ["a path's method it does not serve, with a token", () => asked("DELETE", "/api/roles", { token: user.token }), 405],
    [
      "a body that fails validation, with a token",
      () => asked("PUT", `/api/users/${user.id}/profile`, { token: user.token, body: JSON.stringify({ bio: 5 }), headers: json }),
      400,
    ],
    ["a body that is not JSON, with a token", () => asked("PUT", `/api/users/${user.id}/profile`, { token: user.token, body: "{", headers: json }), 400],
    ["a download of a file that does not exist", () => asked("GET", "/api/files/download/00000000-0000-4000-8000-000000000000.txt", { token: user.token }), 404],
    ["a wrong password at login", () => asked("POST", "/api/auth/login", { body: JSON.stringify({ email: user.email, password: "Wrong-Passw0rd!" }), headers: json }), 401],
    ["a login body that fails validation", () => asked("POST", "/api/auth/login", { body: JSON.stringify({ email: "x" }), headers: json }), 400],
    ["a login body that is not JSON", () => asked("POST", "/api/auth/login?lang=en", { body: "{", headers: json }), 400],
    ["a refresh with a token that does not verify", () => asked("POST", "/api/auth/refresh", { token: "not.a.token" }), 401],
  ];
  for (const [name, send, status] of refusals) {
    test(`error answers too: ${name} → ${status}, no-store`, async () => {
      const res = await send();
      expect({ status: res.status, cacheControl: res.headers.get("cache-control") }).toEqual({ status, cacheControl: "no-store" });
    });
  }

  test("a ranged download (206) with a token: no-store", async () => {
    const form = new FormData();
    form.append("file", new File(["0123456789"], "digits.txt", { type: "text/plain" }));
    const uploaded = await t.request<{ fileName: string }>("POST", "/api/files/upload", { token: user.token, raw: form });
    const res = await asked("GET", `/api/files/download/${uploaded.body.fileName}`, { token: user.token, headers: { range: "bytes=2-4" } });
    expect({ status: res.status, body: await res.text(), cacheControl: res.headers.get("cache-control") }).toEqual({ status: 206, body: "234", cacheControl: "no-store" });
  });

  test("anonymous answers of open routes keep the seed's headers: no Cache-Control added", async () => {
    for (const path of ["/api/version", "/actuator/health", "/api/auth/validate-email?email=someone@example.com"]) {
      const res = await asked("GET", path);
      expect({ path, status: res.status, cacheControl: res.headers.get("cache-control") }).toEqual({ path, status: 200, cacheControl: null });
    }
    const registered = await asked("POST", "/api/auth/register", { body: JSON.stringify({ email: "x" }), headers: json });
    expect({ status: registered.status, cacheControl: registered.headers.get("cache-control") }).toEqual({ status: 400, cacheControl: null });
  });
});
