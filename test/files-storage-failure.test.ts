/**
 * S3 storage that fails after start: a loopback endpoint that answers the start-up bucket
 * check, then refuses every write, then is gone. Uploads answer 503 STORAGE_UNAVAILABLE
 * (never a 500) and record nothing.
 */
import { afterAll, beforeAll, expect, test } from "./legs";
import { count } from "drizzle-orm";
import { files } from "../src/db/schema";
import { makeTestApp, type TestApp } from "./helpers";

let endpoint: ReturnType<typeof Bun.serve>;
let t: TestApp;
let token: string;

beforeAll(async () => {
  endpoint = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request) =>
      request.method === "GET"
        ? new Response('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>', {
            headers: { "content-type": "application/xml" },
          })
        : new Response("<Error><Code>InternalError</Code><Message>disk on fire</Message></Error>", { status: 500, headers: { "content-type": "application/xml" } }),
  });
  t = await makeTestApp({
    FILE_STORAGE: "s3://failing-bucket/uploads",
    S3_ENDPOINT: `http://127.0.0.1:${endpoint.port}`,
    S3_ACCESS_KEY_ID: "test-key",
    S3_SECRET_ACCESS_KEY: "test-secret",
    S3_REGION: "us-east-1",
  });
  token = (await t.createUser()).token;
});
afterAll(async () => {
  endpoint.stop(true);
  await t.close();
});

async function upload() {
  const form = new FormData();
  form.append("file", new Blob(["some bytes"]), "a.txt");
  const res = await t.handle(new Request("http://localhost/api/files/upload", { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form }));
  return { status: res.status, text: await res.text() };
}

test.each([
  ["the endpoint answers every write with a 500", () => {}],
  ["the endpoint is gone (connection refused)", () => endpoint.stop(true)],
])("%s: 503 STORAGE_UNAVAILABLE, no row, no endpoint detail", async (_, breakIt) => {
  breakIt();
  const res = await upload();
  expect(res.status).toBe(503);
  expect(JSON.parse(res.text)).toMatchObject({ success: false, errorCode: "STORAGE_UNAVAILABLE" });
  expect(res.text).not.toMatch(/127\.0\.0\.1|disk on fire|failing-bucket|S3 /);
  const [{ rows }] = await t.db.select({ rows: count() }).from(files);
  expect(rows).toBe(0);
});
