/**
 * GET /api/files (ADMIN): every stored file's info, newest first, paged, with X-Total-Count,
 * through app.handle on a real database and upload folder.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
let admin: { id: number; token: string };
let user: { id: number; token: string };
const uploaded: any[] = [];

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
    const res = await t.request("POST", "/api/files/upload", { token: by.token, raw: form });
    expect(res.status).toBe(201);
    uploaded.push(res.body);
  }
});
afterAll(() => t.close());

const list = (query = "", token = admin.token) => t.request("GET", `/api/files${query}`, { token });

describe("GET /api/files", () => {
  test("newest first, each file's whole info, the total in X-Total-Count", async () => {
    const res = await list();
    expect(res.status).toBe(200);
    expect(res.headers.get("x-total-count")).toBe("3");
    expect(res.body.map((f: any) => f.originalName)).toEqual(["third.txt", "second.pdf", "first.txt"]);
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
    expect(second.body.map((f: any) => f.originalName)).toEqual(["first.txt"]);
    expect(second.headers.get("x-total-count")).toBe("3");
    expect((await list("?size=1")).body.map((f: any) => f.originalName)).toEqual(["third.txt"]);
    expect((await list("?page=5")).body).toEqual([]);
  });

  const refused: [string, () => Promise<{ status: number; body: any }>, number, string | undefined][] = [
    ["a USER", () => list("", user.token), 403, "ACCESS_DENIED"],
    ["no token", () => t.request("GET", "/api/files"), 401, "UNAUTHORIZED"],
    ["size 101", () => list("?size=101"), 400, undefined],
    ["page -1", () => list("?page=-1"), 400, undefined],
  ];
  test.each(refused)("%s → %i", async (_, send, status, errorCode) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.body.success).toBe(false);
    expect(res.body.errorCode).toBe(errorCode);
  });
});
