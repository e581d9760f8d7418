/**
 * The products API through app.handle on a real libSQL file: exact decimal prices (never a
 * float multiplication), the DECIMAL(10,2) limits, unique codes, automatic audit fields, access.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { products } from "../src/db/schema";
import { fromCents, toCents } from "../src/money";
import type { Product } from "../src/features/products/model";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { DENIED, expectFailure, invalidBody, scenarios, UNAUTHORIZED } from "./scenario";

let t: TestApp;
let admin: { id: number; email: string; token: string };
let plain: { id: number; email: string; token: string };

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  plain = await t.createUser();
});
afterAll(() => t.close());

let serial = 0;
const code = () => `P-${++serial}-${crypto.randomUUID().slice(0, 6)}`;
const body = (extra: Record<string, unknown> = {}) => ({ name: "Widget", code: code(), price: 19.99, stock: 5, ...extra });
const post = (b: unknown, token = admin.token) => t.request("POST", "/api/products", { body: b, token });
const storedCents = async (id: number) => (await t.db.select({ c: products.priceCents }).from(products).where(eq(products.id, id)))[0].c;

describe("money", () => {
  test.each([
    [19.99, 1999],
    [0.1, 10],
    [0.29, 29],
    [1.005 + 0, undefined], // three fraction digits: refused, not rounded
    [99999999.99, 9999999999],
    [0, 0],
    [1e21, undefined],
    ["12.30", 1230],
  ] as [number | string, number | undefined][])("toCents(%p) = %p", (value, cents) => {
    expect(toCents(value)).toBe(cents);
  });

  test("every cent value from 0.00 to 20.00 survives JSON and back exactly", () => {
    for (let cents = 0; cents <= 2000; cents++) {
      const json = JSON.parse(JSON.stringify({ price: fromCents(cents) })).price;
      expect(toCents(json)).toBe(cents);
    }
  });
});

describe("create and read", () => {
  test("POST stores exact cents and answers 201 with audit fields from the caller", async () => {
    const sent = body({ price: 0.29, description: "A small one" });
    const res = await post(sent);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(Number),
      name: "Widget",
      code: sent.code,
      price: 0.29,
      description: "A small one",
      status: "ACTIVE",
      stock: 5,
      createdAt: expect.stringMatching(ISO_Z),
      updatedAt: expect.stringMatching(ISO_Z),
      createdBy: admin.email,
      updatedBy: admin.email,
    });
    expect(res.text).toContain('"price":0.29');
    expect(await storedCents(res.body.id)).toBe(29); // 0.29 * 100 = 28.999999999999996 in floats
  });

  test("the largest DECIMAL(10,2) price round-trips", async () => {
    const res = await post(body({ price: 99999999.99 }));
    expect(res.status).toBe(201);
    expect(res.body.price).toBe(99999999.99);
    expect(await storedCents(res.body.id)).toBe(9999999999);
  });

  test("GET one and GET all for any authenticated caller; the list carries X-Total-Count", async () => {
    const created = (await post(body({ name: "Listed" }))).body;
    const one = await t.request("GET", `/api/products/${created.id}`, { token: plain.token });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(created);
    const all = await t.request<Product[]>("GET", "/api/products", { token: plain.token });
    expect(all.status).toBe(200);
    expect(all.body.map((p) => p.id)).toContain(created.id);
    expect(all.headers.get("x-total-count")).toBe(String(all.body.length));
    const page = await t.request("GET", "/api/products?page=0&size=1", { token: plain.token });
    expect(page.body).toHaveLength(1);
    expect(page.headers.get("x-total-count")).toBe(String(all.body.length));
  });

  test("PUT replaces the fields, keeps createdBy and sets updatedBy to the caller", async () => {
    const created = (await post(body())).body;
    const other = await t.admin();
    const res = await t.request("PUT", `/api/products/${created.id}`, {
      token: other.token,
      body: { name: "Renamed", code: created.code, price: 7, status: "DISCONTINUED", stock: 0 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "Renamed", price: 7, status: "DISCONTINUED", stock: 0, description: null, createdBy: admin.email, updatedBy: other.email });
    expect(res.body.createdAt).toBe(created.createdAt);
  });
});

describe("errors", () => {
  scenarios([
    { name: "three fraction digits", send: () => post(body({ price: 19.999 })), status: 400, failure: invalidBody(["price: must have at most 8 integer and 2 fraction digits"]) },
    {
      name: "three fraction digits on PUT",
      send: () => t.request("PUT", "/api/products/1", { token: admin.token, body: body({ price: 19.999 }) }),
      status: 400,
      failure: invalidBody(["price: must have at most 8 integer and 2 fraction digits"]),
    },
    { name: "a price above 99,999,999.99", send: () => post(body({ price: 100000000 })), status: 400, failure: invalidBody(["price: must be at most 99999999.99"]) },
    { name: "a negative price", send: () => post(body({ price: -0.01 })), status: 400, failure: invalidBody(["price: must be at least 0"]) },
    { name: "a negative stock", send: () => post(body({ stock: -1 })), status: 400, failure: invalidBody(["stock: must be at least 0"]) },
    { name: "a fractional stock", send: () => post(body({ stock: 1.5 })), status: 400, failure: invalidBody(["stock: must be an integer"]) },
    { name: "an unknown status", send: () => post(body({ status: "SOLD_OUT" })), status: 400, failure: invalidBody(["status: must be one of ACTIVE, INACTIVE, DISCONTINUED"]) },
    { name: "a blank name", send: () => post(body({ name: " " })), status: 400, failure: invalidBody(["name: is invalid"]) },
    { name: "a USER creating", send: () => post(body(), plain.token), status: 403, failure: DENIED },
    { name: "a USER replacing", send: () => t.request("PUT", "/api/products/1", { token: plain.token, body: body() }), status: 403, failure: DENIED },
    { name: "no token", send: () => t.request("GET", "/api/products"), status: 401, failure: UNAUTHORIZED },
    { name: "an unknown id", send: () => t.request("GET", "/api/products/999999", { token: plain.token }), status: 404, failure: { errorCode: "PRODUCT_NOT_FOUND" } },
    {
      name: "PUT on an unknown id",
      send: () => t.request("PUT", "/api/products/999999", { token: admin.token, body: body() }),
      status: 404,
      failure: { errorCode: "PRODUCT_NOT_FOUND" },
    },
  ]);

  test("a taken code → 409 DUPLICATE_PRODUCT_CODE, on create and on update", async () => {
    const first = (await post(body())).body;
    const dup = await post(body({ code: first.code }));
    expectFailure(dup, 409, { message: `Product code already exists: ${first.code}`, errorCode: "DUPLICATE_PRODUCT_CODE" });
    const second = (await post(body())).body;
    const clash = await t.request("PUT", `/api/products/${second.id}`, { token: admin.token, body: body({ code: first.code }) });
    expect(clash.status).toBe(409);
    expect(clash.body.errorCode).toBe("DUPLICATE_PRODUCT_CODE");
  });

  test("concurrent creates of one code give one product", async () => {
    const shared = code();
    const results = await Promise.all(Array.from({ length: 5 }, () => post(body({ code: shared }))));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });
});
