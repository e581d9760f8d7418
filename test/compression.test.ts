/**
 * Compression: JSON and text over 1 KiB are gzip- (or brotli-) compressed when accepted, with
 * Vary: Accept-Encoding; small answers, binary downloads and error envelopes keep their bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { chooseEncoding, COMPRESSION_THRESHOLD_BYTES } from "../src/http/compression";
import { makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
let admin: { id: number; token: string };

beforeAll(async () => {
  // With an allowed origin, so that answers to the others carry CORS's Vary: Origin to merge with.
  t = await makeTestApp({ CORS_ORIGINS: "https://app.example.com" });
  admin = await t.admin();
  for (let i = 0; i < 12; i++) await t.createUser();
});
afterAll(() => t.close());

async function fetchRaw(path: string, acceptEncoding?: string, token = admin.token) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (acceptEncoding !== undefined) headers["accept-encoding"] = acceptEncoding;
  const res = await t.handle(new Request(`http://localhost${path}`, { headers }));
  const raw = Buffer.from(await res.arrayBuffer());
  const encoding = res.headers.get("content-encoding");
  const plain = encoding === "gzip" ? gunzipSync(raw) : encoding === "br" ? brotliDecompressSync(raw) : raw;
  return { res, raw, encoding, plain: plain.toString("utf8") };
}

describe("chooseEncoding", () => {
  test.each([
    [null, undefined],
    ["", undefined],
    ["identity", undefined],
    ["gzip", "gzip"],
    ["gzip, deflate, br, zstd", "gzip"],
    ["br", "br"],
    ["br;q=1.0, gzip;q=0.8", "br"],
    ["gzip;q=0.5, br;q=0.9", "br"],
    ["br;q=0, gzip", "gzip"],
    ["gzip;q=0", undefined],
    ["*", "gzip"],
  ])("Accept-Encoding %p → %p", (header, expected) => {
    expect(chooseEncoding(header)).toBe(expected as never);
  });
});

describe("responses", () => {
  test("a JSON list over 1 KiB: gzip when accepted, the same JSON inside, Vary set", async () => {
    const identity = await fetchRaw("/api/users");
    expect(identity.raw.byteLength).toBeGreaterThan(COMPRESSION_THRESHOLD_BYTES);
    expect(identity.encoding).toBeNull();
    expect(identity.res.headers.get("vary")).toBe("Accept-Encoding");

    const gzip = await fetchRaw("/api/users", "gzip, deflate, br");
    expect(gzip.res.status).toBe(200);
    expect(gzip.encoding).toBe("gzip");
    expect(gzip.res.headers.get("vary")).toBe("Accept-Encoding");
    expect(gzip.res.headers.get("content-type")).toStartWith("application/json");
    expect(gzip.res.headers.get("x-total-count")).toBe("13");
    expect(gzip.res.headers.get("x-request-id")).toEqual(expect.any(String));
    expect(gzip.raw.byteLength).toBeLessThan(identity.raw.byteLength / 2);
    expect(JSON.parse(gzip.plain)).toEqual(JSON.parse(identity.plain));
  });

  test("uncompressed for a client that takes no encoding, its Vary added to one CORS set", async () => {
    const headers = { authorization: `Bearer ${admin.token}`, origin: "https://elsewhere.example" };
    const res = await t.handle(new Request("http://localhost/api/users", { headers }));
    const body = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("vary")).toBe("Origin, Accept-Encoding");
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("x-total-count")).toBe("13");
    expect(body).toBe((await fetchRaw("/api/users", "identity")).plain);
  });

  test("brotli when the client ranks it first", async () => {
    const br = await fetchRaw("/api/users", "br;q=1, gzip;q=0.5");
    expect(br.encoding).toBe("br");
    expect(br.res.headers.get("vary")).toBe("Accept-Encoding");
    expect(JSON.parse(br.plain)).toHaveLength(13);
  });

  test("text over 1 KiB (the Prometheus scrape) is compressed and keeps its type", async () => {
    const scrape = await fetchRaw("/actuator/prometheus", "gzip");
    expect(scrape.encoding).toBe("gzip");
    expect(scrape.res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(scrape.plain).toContain("# TYPE users_active gauge");
  });

  test("answers of 1 KiB or less go out as they are", async () => {
    const small = await fetchRaw(`/api/users/${admin.id}`, "gzip, br");
    expect(small.res.status).toBe(200);
    expect(small.raw.byteLength).toBeLessThanOrEqual(COMPRESSION_THRESHOLD_BYTES);
    expect(small.encoding).toBeNull();
    expect(small.res.headers.get("vary")).toBeNull();
    expect(JSON.parse(small.plain).id).toBe(admin.id);
  });

  test("error envelopes keep their body (unknown route and handler errors)", async () => {
    const unknown = await fetchRaw("/api/no-such-thing", "gzip");
    expect(unknown.res.status).toBe(404);
    expect(JSON.parse(unknown.plain)).toMatchObject({ success: false, errorCode: "NOT_FOUND" });
    const anonymous = await t.handle(new Request("http://localhost/api/no-such-thing", { headers: { "accept-encoding": "gzip" } }));
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ success: false, errorCode: "UNAUTHORIZED" });
    const missing = await fetchRaw("/api/users/999999", "gzip");
    expect(missing.res.status).toBe(404);
    expect(JSON.parse(missing.plain)).toMatchObject({ success: false, errorCode: "USER_NOT_FOUND" });
  });

  test("a binary download is never compressed", async () => {
    const heap = await fetchRaw("/actuator/heapdump", "gzip, br");
    expect(heap.res.status).toBe(200);
    expect(heap.raw.byteLength).toBeGreaterThan(COMPRESSION_THRESHOLD_BYTES);
    expect(heap.encoding).toBeNull();
    expect(heap.res.headers.get("content-type")).toBe("application/octet-stream");
  }, 30_000); // a heap snapshot takes seconds on a busy machine

  test("HEAD is left alone", async () => {
    const res = await t.handle(new Request("http://localhost/actuator/health", { method: "HEAD", headers: { "accept-encoding": "gzip" } }));
    expect(res.headers.get("content-encoding")).toBeNull();
  });
});
