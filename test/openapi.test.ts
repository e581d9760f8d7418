/**
 * The OpenAPI document as client generators read it: integers, named components, exact
 * nullability, closed response objects, declared headers and statuses. And the conformance
 * check that test/helpers.ts runs on every answer: shown here to fail on each kind of mismatch,
 * so its silence elsewhere means something.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { Elysia, t as T } from "elysia";
import { buildSpec } from "../src/features/docs/spec";
import { makeTestApp, type TestApp } from "./helpers";
import { createChecker, type Json } from "./openapi-conformance";

let t: TestApp;
let spec: Json;
beforeAll(async () => {
  t = await makeTestApp();
  spec = (await t.request("GET", "/swagger/json")).body;
});
afterAll(() => t.close());

/** Every node of the document, with its JSON path. */
function* nodes(value: unknown, path = "#"): Generator<[string, Json]> {
  if (!value || typeof value !== "object") return;
  yield [path, value as Json];
  for (const [key, child] of Object.entries(value)) yield* nodes(child, `${path}/${key}`);
}
const operations = () =>
  Object.entries<Json>(spec.paths).flatMap(([path, item]) => Object.entries<Json>(item).map(([method, operation]) => ({ where: `${method.toUpperCase()} ${path}`, operation })));

describe("the document", () => {
  test("integers are type integer: no string-or-integer unions, no 'integer' format", () => {
    const coerced = [...nodes(spec)].filter(
      ([, node]) =>
        node.format === "integer" || node.format === "numeric" || (Array.isArray(node.anyOf) && node.anyOf.some((b: Json) => b.format === "integer" || b.format === "numeric")),
    );
    expect(coerced.map(([path]) => path)).toEqual([]);
    expect(spec.components.schemas.User.properties.id).toEqual({ type: "integer" });
    const idParameter = spec.paths["/api/users/{id}"].get.parameters.find((p: Json) => p.name === "id");
    expect(idParameter.schema.type).toBe("integer");
  });

  test("shared shapes are named components, referenced by $ref and never inlined", () => {
    const names = Object.keys(spec.components.schemas);
    for (const name of [
      "User",
      "UserEnvelope",
      "TokenResponseEnvelope",
      "ErrorEnvelope",
      "FileUploadResponse",
      "FileInfo",
      "Product",
      "Order",
      "OrderItem",
      "Health",
      "Loggers",
      "ServiceIndex",
    ]) {
      expect(names).toContain(name);
    }
    const inlined = [...nodes(spec.paths)].filter(([, node]) => typeof node.title === "string" && /^[A-Z]/.test(node.title));
    expect(inlined.map(([path, node]) => `${path}: ${node.title}`)).toEqual([]);
    const refs = new Set([...nodes(spec)].map(([, node]) => node.$ref).filter(Boolean));
    for (const name of names) expect(refs.has(`#/components/schemas/${name}`), name).toBe(true);
    // Login answers a token, or the second step of an account with a factor (LoginAnswer: TokenResponse or MfaRequired).
    expect(spec.paths["/api/auth/login"].post.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/LoginAnswerEnvelope" });
    expect(spec.components.schemas.UserEnvelope.properties.data).toEqual({ $ref: "#/components/schemas/User" });
    // Error answers are shared response components too: inlined, they would make the document nearly twice its size (0.58 with 60 routes; all inlined is 1).
    expect(spec.paths["/api/users"].post.responses["409"]).toEqual({ $ref: "#/components/responses/Error409" });
    const text = JSON.stringify(spec);
    const withErrorsInlined = text.replace(/\{"\$ref":"#\/components\/responses\/(\w+)"\}/g, (_, name: string) => JSON.stringify(spec.components.responses[name]));
    expect(text.length / withErrorsInlined.length).toBeLessThan(0.75);
  });

  test("nullability is exact: a nullable enum lists null; non-null fields are not nullable", () => {
    expect(spec.components.schemas.LoggerLevels.properties.configuredLevel.enum).toContain(null);
    expect(spec.components.schemas.LoggerLevels.properties.effectiveLevel.enum).not.toContain(null);
    expect(spec.components.schemas.User.properties.lastLogin.type).toEqual(["string", "null"]);
    expect(spec.components.schemas.User.properties.email.type).toBe("string");
  });

  test("objects are closed: additionalProperties false, in answers and request bodies alike", () => {
    const open = [...nodes(spec)].filter(([, node]) => node.properties && node.additionalProperties === undefined);
    expect(open.map(([path]) => path)).toEqual([]);
  });

  test("every operation lists 500 and 431; guarded ones 401 (with WWW-Authenticate) and 503 (with Retry-After)", () => {
    const resolve = (response: Json) => (response.$ref ? spec.components.responses[response.$ref.split("/").pop()] : response);
    for (const { where, operation } of operations()) {
      expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(["500", "431"]));
      if (operation.security.length > 0) {
        expect(resolve(operation.responses["401"]).headers, where).toHaveProperty("WWW-Authenticate");
        expect(resolve(operation.responses["503"]).headers, where).toHaveProperty("Retry-After");
      }
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        if (status !== "431") expect(resolve(response).headers, `${where} ${status}`).toHaveProperty("X-Request-Id");
      }
    }
    expect(spec.paths["/api/users"].get.responses["200"].headers).toHaveProperty("X-Total-Count");
    expect(spec.paths["/api/users/{id}"].get.responses["200"].headers).toHaveProperty("ETag");
    expect(resolve(spec.paths["/api/auth/login"].post.responses["429"]).headers).toHaveProperty("Retry-After");
    expect(spec.paths["/api/files/download/{fileName}"].get.responses["200"].content).toHaveProperty(["application/octet-stream"]);
    expect(spec.paths["/swagger"].get.responses["200"].content).toHaveProperty(["text/html"]);
    expect(spec.components.headers.XTotalCount.schema.type).toBe("integer");
  });

  test("two different shapes under one title stop the document being built", () => {
    const clash = new Elysia()
      .get("/a", () => ({ x: 1 }), { response: T.Object({ x: T.Integer() }, { title: "Thing" }) })
      .get("/b", () => ({ y: "" }), { response: T.Object({ y: T.String() }, { title: "Thing" }) });
    expect(() => buildSpec(clash)).toThrow("two different schemas are titled Thing");
  });
});

describe("the conformance check on every answer", () => {
  const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
    status,
    headers: new Headers({ "content-type": "application/json; charset=utf-8", ...headers }),
    body,
    text: JSON.stringify(body),
  });
  const user = {
    id: 1,
    name: "A",
    email: "a@x.io",
    department: null,
    phone: null,
    active: true,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    lastLogin: null,
    version: 0,
    roles: ["USER"],
    emailVerified: false,
  };
  const url = "http://localhost/api/users/1";

  test("passes a real answer, and fails on an extra field, a wrong type, an unlisted status, an undeclared header or media type", () => {
    const checker = createChecker(spec);
    expect(checker.check("GET", url, answer(200, user, { etag: '"0"' }))).toEqual([]);
    expect(checker.check("GET", url, answer(200, { ...user, passwordHash: "x" })).join()).toContain("must NOT have additional properties");
    expect(checker.check("GET", url, answer(200, { ...user, id: "1" })).join()).toContain("must be integer");
    expect(checker.check("GET", url, answer(418, user)).join()).toContain("status 418 is not listed");
    expect(checker.check("GET", url, answer(200, user, { "x-total-count": "1" })).join()).toContain("sends X-Total-Count, which the document does not declare");
    expect(checker.check("GET", url, answer(200, user, { "content-type": "text/html" })).join()).toContain('media type "text/html" is not declared');
    expect(checker.check("GET", "http://localhost/api/users", answer(200, [user], { "x-total-count": "many" })).join()).toContain('X-Total-Count "many" is not an integer');
    expect(checker.check("GET", "http://localhost/nowhere", answer(404, { success: false })).join()).toContain("not an ErrorEnvelope");
  });
});
