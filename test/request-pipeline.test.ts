/**
 * What every request's plumbing leaves behind, exactly: the X-Request-Id header, one access-log
 * line with fixed fields, one histogram series per route template, method and status. The hooks
 * are tuned for speed (src/http/request-context.ts); this pins what they must keep producing.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
let admin: Awaited<ReturnType<TestApp["admin"]>>;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  t = await makeTestApp({ LOG_LEVEL: "info" }, { logs: { write: (line) => void lines.push(JSON.parse(line)) } });
  admin = await t.admin();
});
afterAll(() => t?.close());

const accessLines = () => lines.filter((l) => l.msg === "request");

describe("request pipeline", () => {
  test("one access-log line per answer, its fields exactly, its id the answer's X-Request-Id", async () => {
    const cases = [
      { path: `/api/users/${admin.id}`, token: admin.token, status: 200, route: "/api/users/:id" },
      { path: "/api/users/999999", token: admin.token, status: 404, route: "/api/users/:id" },
      { path: "/actuator/health", status: 200, route: "/actuator/health" },
      { path: "/no/such/route", token: admin.token, status: 404, route: "UNMATCHED" },
      { path: "/api/users", status: 401, route: "/api/users" },
    ];
    for (const c of cases) {
      const before = accessLines().length;
      const res = await t.request("GET", c.path, { token: c.token });
      expect(res.status).toBe(c.status);
      await Bun.sleep(5); // written after the answer is sent
      const logged = accessLines().slice(before);
      expect(logged).toHaveLength(1);
      expect(Object.keys(logged[0]).sort()).toEqual(["level", "logger", "method", "ms", "msg", "requestId", "route", "status", "time"]);
      expect(logged[0]).toMatchObject({ level: "info", logger: "http", method: "GET", route: c.route, status: c.status, requestId: res.headers.get("x-request-id") });
      expect(logged[0].ms).toEqual(expect.any(Number));
    }
  });

  test("the user answer's headers are exactly these", async () => {
    const res = await t.request("GET", `/api/users/${admin.id}`, { token: admin.token });
    expect([...res.headers.keys()].sort()).toEqual([
      "cache-control",
      "content-security-policy",
      "content-type",
      "etag",
      "referrer-policy",
      "x-content-type-options",
      "x-frame-options",
      "x-request-id",
    ]);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
  });

  test("each route, method and status is its own series, counted once per answer", async () => {
    const count = async (labels: string) => {
      const text = (await t.request("GET", "/actuator/prometheus", { token: admin.token })).text;
      return Number(new RegExp(`^http_server_requests_seconds_count\\{${labels}\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
    };
    const labels = 'method="GET",route="/api/users/:id",status="404"';
    const before = await count(labels);
    for (let i = 0; i < 3; i++) await t.request("GET", "/api/users/999998", { token: admin.token });
    await t.request("DELETE", "/api/users/999998", { token: admin.token });
    await Bun.sleep(5);
    expect(await count(labels)).toBe(before + 3);
    expect(await count('method="DELETE",route="/api/users/:id",status="404"')).toBe(1);
  });
});
