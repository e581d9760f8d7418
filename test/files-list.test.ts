/**
 * GET /api/files (ADMIN): every stored file's info, newest first, paged, with X-Total-Count,
 * through app.handle on a real database and upload folder.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import type { FileInfo, FileUploadResponse } from "../src/features/files/model";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { DENIED, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

let t: TestApp;
let admin: { id: number; token: string };
let user: { id: number; token: string };
const uploaded: FileUploadResponse[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  user = await t.createUser();
  for (const [name, by] of [
    ["first.txt", user],
    ["second.pdf", admin],
    ["third.txt", user],
  ] as const) {
    const form = new FormData();
    form.append("file", new File([`bytes of ${name}`], name, { type: "text/plain" }));
    const res = await t.request<FileUploadResponse>("POST", "/api/files/upload", { token: by.token, raw: form });
    expect(res.status).toBe(201);
    uploaded.push(res.body);
  }
});
afterAll(() => t.close());

const list = (query = "", token = admin.token) => t.request<FileInfo[]>("GET", `/api/files${query}`, { token });

describe("GET /api/files", () => {
  test("newest first, each file's whole info, the total in X-Total-Count", async () => {
    const res = await list();
    expect(res.status).toBe(200);
    expect(res.headers.get("x-total-count")).toBe("3");
    expect(res.body.map((f) => f.originalName)).toEqual(["third.txt", "second.pdf", "first.txt"]);
    expect(res.body[1]).toEqual({
      id: uploaded[1].fileName,
      fileName: uploaded[1].fileName,
      originalName: "second.pdf",
      fileSize: "bytes of second.pdf".length,
      contentType: "text/plain",
      sha256: new Bun.CryptoHasher("sha256").update("bytes of second.pdf").digest("hex"),
      uploadedBy: admin.id,
      uploadTime: expect.stringMatching(ISO_Z),
    });
  });

  test("paged: page from 0 and size; past the end is empty; the total stays", async () => {
    const second = await list("?page=1&size=2");
    expect(second.body.map((f) => f.originalName)).toEqual(["first.txt"]);
    expect(second.headers.get("x-total-count")).toBe("3");
    expect((await list("?size=1")).body.map((f) => f.originalName)).toEqual(["third.txt"]);
    expect((await list("?page=5")).body).toEqual([]);
  });

  scenarios([
    { name: "a USER", send: () => list("", user.token), status: 403, failure: DENIED },
    { name: "no token", send: () => t.request("GET", "/api/files"), status: 401, failure: UNAUTHORIZED },
    { name: "size 101", send: () => list("?size=101"), status: 400, failure: invalidParams(["size: must be at most 100"]) },
    { name: "page -1", send: () => list("?page=-1"), status: 400, failure: invalidParams(["page: must be at least 0"]) },
  ]);
});
