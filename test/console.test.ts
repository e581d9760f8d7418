/**
 * The admin console as the server delivers it, through app.handle: the shell (open, its own
 * complete CSP, no inline script), its bundled assets (gzip, hash links, 304, the size budget),
 * BASE_PATH, and the operations screen's arithmetic over real /actuator/prometheus text.
 * What it does in a browser: test/browser/console.test.ts (npm run test:browser).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readScrape, pointBetween } from "../src/features/console/ui/metrics";
import { makeTestApp, type TestApp } from "./helpers";

/** The budget: at most 150 KB of gzipped JavaScript. */
const JS_BUDGET_BYTES = 150 * 1024;

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const raw = (path: string, headers: Record<string, string> = {}, app = t) => app.app.handle(new Request(`http://localhost${app.config.basePath}${path}`, { headers }));
const linksOf = (html: string) => [...html.matchAll(/(?:href|src)="([^"]+)"/g)].map((m) => m[1]);

describe("/admin", () => {
  test("the shell is open, HTML, not cached, with one complete CSP and no inline script", async () => {
    const res = await raw("/admin");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp.split("; ")).toEqual(
      expect.arrayContaining(["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"]),
    );
    expect(csp).not.toContain("unsafe");
    const html = await res.text();
    // Every script has a src; no inline handlers; nothing from another origin.
    expect([...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1].trim())).toEqual([""]);
    expect(html).not.toMatch(/\son\w+=/i);
    expect(linksOf(html).filter((link) => !link.startsWith("/admin/assets/") && link !== "data:,")).toEqual([]);
  });

  test("the assets it links: gzip when accepted, immutable by hash, 304 on the ETag, plain otherwise", async () => {
    const html = await (await raw("/admin")).text();
    const [css, js] = linksOf(html).filter((link) => link.startsWith("/admin/assets/"));
    expect(css).toMatch(/^\/admin\/assets\/app\.css\?v=\w+$/);
    expect(js).toMatch(/^\/admin\/assets\/app\.js\?v=\w+$/);

    const zipped = await raw(js, { "accept-encoding": "gzip, br" });
    expect(zipped.status).toBe(200);
    expect(zipped.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    expect(zipped.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const gzipped = new Uint8Array(await zipped.arrayBuffer());
    const source = new TextDecoder().decode(Bun.gunzipSync(gzipped));
    expect(source).toContain("usersvc.console.token");
    // No CDN: the bundle fetches nothing but this origin's API.
    expect(source).not.toMatch(/https?:\/\/(?!www\.w3\.org)[\w.-]+\.(com|net|org|io|dev)\//);

    const plain = await raw(js);
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(await plain.text()).toBe(source);

    const again = await raw(js, { "if-none-match": zipped.headers.get("etag")! });
    expect(again.status).toBe(304);

    const styles = await raw(css);
    expect(styles.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(await styles.text()).toContain(".uplot");
  });

  test(`the JavaScript stays within ${JS_BUDGET_BYTES / 1024} KB gzipped`, async () => {
    const html = await (await raw("/admin")).text();
    const js = linksOf(html).find((link) => link.includes("app.js"))!;
    const size = (await (await raw(js, { "accept-encoding": "gzip" })).arrayBuffer()).byteLength;
    console.log(`console bundle: ${(size / 1024).toFixed(1)} KB gzipped`);
    expect(size).toBeLessThanOrEqual(JS_BUDGET_BYTES);
  });

  test("an unknown asset is 404 in the envelope, even without a token", async () => {
    const res = await raw("/admin/assets/secrets.js");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { errorCode: string }).errorCode).toBe("NOT_FOUND");
  });

  test("under BASE_PATH the shell links its assets and tells the script the prefix", async () => {
    const prefixed = await makeTestApp({ BASE_PATH: "/svc" });
    try {
      const res = await raw("/admin", {}, prefixed);
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain('data-base-path="/svc"');
      const assets = linksOf(html).filter((link) => link.includes("/admin/assets/"));
      expect(assets.every((link) => link.startsWith("/svc/admin/assets/"))).toBe(true);
      for (const link of assets) expect((await prefixed.app.handle(new Request(`http://localhost${link}`))).status).toBe(200);
      expect((await prefixed.app.handle(new Request("http://localhost/admin"))).status).not.toBe(200);
    } finally {
      await prefixed.close();
    }
  });
});

describe("operations charts from /actuator/prometheus", () => {
  test("request rate, p99 and error rate between two real scrapes", async () => {
    const admin = await t.admin();
    // A request is counted once its answer has gone out (onAfterResponse): let the counts settle first.
    const scrape = async () => {
      await Bun.sleep(50);
      return readScrape((await t.request("GET", "/actuator/prometheus", { token: admin.token })).text, Date.now());
    };
    const first = await scrape();
    for (let i = 0; i < 9; i++) await t.request("GET", "/api/users", { token: admin.token });
    await t.request("GET", "/api/users/abc", { token: admin.token }); // a 400: not an error of the server
    const second = await scrape();
    expect(second.activeUsers).toBeGreaterThanOrEqual(1);
    // 9 + 1 requests, plus the first scrape itself (counted once it was answered).
    expect(second.requests - first.requests).toBe(11);
    const point = pointBetween(first, { ...second, at: first.at + 2000 })!;
    expect(point.rate).toBeCloseTo(5.5);
    expect(point.errorRate).toBe(0);
    expect(point.p99).toBeGreaterThan(0);
    expect(point.p99).toBeLessThan(10_000);
  });

  test("p99 interpolates within its bucket; 5xx count as errors; a restarted server gives no point", () => {
    const text = (count: number, fast: number, errors: number) => `# HELP http_server_requests_seconds x
# TYPE http_server_requests_seconds histogram
http_server_requests_seconds_bucket{le="0.01",method="GET",route="/a",status="200"} ${fast}
http_server_requests_seconds_bucket{le="0.1",method="GET",route="/a",status="200"} ${count - errors}
http_server_requests_seconds_bucket{le="+Inf",method="GET",route="/a",status="200"} ${count - errors}
http_server_requests_seconds_count{method="GET",route="/a",status="200"} ${count - errors}
http_server_requests_seconds_bucket{le="0.01",method="GET",route="/a",status="503"} 0
http_server_requests_seconds_bucket{le="0.1",method="GET",route="/a",status="503"} ${errors}
http_server_requests_seconds_bucket{le="+Inf",method="GET",route="/a",status="503"} ${errors}
http_server_requests_seconds_count{method="GET",route="/a",status="503"} ${errors}
users_active 7
`;
    const before = readScrape(text(100, 100, 0), 0);
    const after = readScrape(text(300, 100, 20), 10_000);
    expect(after.activeUsers).toBe(7);
    // 200 new requests in 10 s, 20 of them 503; none of the new ones under 10 ms, so p99 lies in (0.01, 0.1]:
    // rank 198 of 200 → 0.01 + 0.09 × 198/200 s.
    expect(pointBetween(before, after)).toEqual({ at: 10_000, rate: 20, errorRate: 10, p99: expect.closeTo((0.01 + 0.09 * (198 / 200)) * 1000, 9) });
    expect(pointBetween(after, { ...before, at: 20_000 })).toBeUndefined();
    expect(pointBetween(before, { ...before, at: 5_000 })).toEqual({ at: 5_000, rate: 0, errorRate: 0, p99: null });
  });
});
