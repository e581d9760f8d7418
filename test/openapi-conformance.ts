/**
 * Every answer a test receives through test/helpers.ts is checked against the app's own OpenAPI
 * document (ajv, strict, JSON Schema 2020-12): its status is listed for that operation, its
 * media type is declared, a JSON body fits the schema (response objects are closed, so an extra
 * field fails), and every API header it carries (X-Total-Count, ETag, Retry-After, …) is
 * declared for that status. A mismatch fails the test that made the request. (A compressed body,
 * which app.handle hands over as sent, is checked for all but its schema.)
 */
import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { AnyElysia } from "elysia";
import { RESPONSE_HEADERS } from "../src/http/route-docs";
import { buildSpec } from "../src/features/docs/spec";

/** An OpenAPI document (or a part of it) walked generically, typed as src/features/docs/spec.ts types it. */
export type Json = ReturnType<typeof buildSpec>;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

/** The headers an operation must declare when it sends them. */
const API_HEADERS = Object.keys(RESPONSE_HEADERS).map((name) => [name.toLowerCase(), name] as const);
const COMPONENTS_ID = "usersvc:components";

interface Operation {
  pattern: RegExp;
  method: string;
  path: string;
  literalChars: number;
  responses: Json;
}

export interface Conformance {
  /** Every way `answer` differs from the document; empty when it conforms. */
  check(method: string, url: string, answer: Answer): string[];
  readonly document: Json;
}

/** One checker per distinct route list: apps built alike share the document and compiled validators. */
const checkers = new Map<string, Conformance>();

export function conformanceOf(app: AnyElysia): Conformance {
  // Apps with the same routes (one code base, one BASE_PATH) have the same document: build it once.
  const key = app.routes.map((r) => `${r.method} ${r.path}`).join("\n");
  let checker = checkers.get(key);
  if (!checker) {
    // Routes kept out of the document on purpose (the Swagger UI's script and stylesheet).
    const hidden = app.routes.filter((r) => (r.hooks as Json)?.detail?.hide).map((r) => `${r.method} ${r.path}`);
    checker = createChecker(buildSpec(app), new Set(hidden));
    checkers.set(key, checker);
  }
  return checker;
}

/** `#/components/schemas/X` → the one schema registered with ajv under COMPONENTS_ID. */
const rewriteRefs = <T>(value: T): T => JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`));

export function createChecker(document: Json, hidden: ReadonlySet<string> = new Set()): Conformance {
  const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  // OpenAPI's own format for bytes; nothing to check in a JSON value.
  ajv.addFormat("binary", true);
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: rewriteRefs(document.components.schemas) });
  const validators = new Map<Json, ValidateFunction>();
  const validatorOf = (schema: Json) => {
    let validate = validators.get(schema);
    if (!validate) {
      validate = ajv.compile(rewriteRefs(schema));
      validators.set(schema, validate);
    }
    return validate;
  };
  const headerOf = (ref: Json): Json => document.components.headers[ref.$ref.split("/").pop()];

  const operations: Operation[] = [];
  for (const [path, item] of Object.entries<Json>(document.paths)) {
    for (const [method, operation] of Object.entries<Json>(item)) {
      // A trailing slash is optional, as in Elysia's router (BASE_PATH=/svc serves the index at /svc and /svc/).
      const source = path
        .replace(/\/$/, "")
        .replace(/[.+?^$()|[\]\\]/g, "\\$&")
        .replace(/\{[^}]+\}/g, "[^/]+");
      operations.push({
        pattern: new RegExp(`^${source}/?$`),
        method: method.toUpperCase(),
        path,
        literalChars: path.replace(/\{[^}]+\}/g, "").length,
        responses: operation.responses,
      });
    }
  }
  // A literal segment wins over a parameter (/api/users/deactivate-inactive before /api/users/{id}).
  operations.sort((a, b) => b.literalChars - a.literalChars);
  const errorEnvelope = validatorOf({ $ref: "#/components/schemas/ErrorEnvelope" });

  return {
    document,
    check(method, url, answer) {
      const pathname = new URL(url).pathname;
      // HEAD has no body to check; a preflight is answered before routing, by the CORS hook.
      if (method === "HEAD" || method === "OPTIONS" || hidden.has(`${method} ${pathname}`)) return [];
      const operation = operations.find((o) => o.method === method && o.pattern.test(pathname));
      const where = `${method} ${pathname} → ${answer.status}`;
      if (!operation) {
        // No such operation: the errors plugin's 401, 404 or 405, always the envelope.
        return errorEnvelope(answer.body) ? [] : [`${where}: not an operation of the document, and not an ErrorEnvelope: ${ajv.errorsText(errorEnvelope.errors)}`];
      }
      const listed: Json | undefined = operation.responses[String(answer.status)];
      const declared: Json | undefined = listed?.$ref ? document.components.responses[listed.$ref.split("/").pop()] : listed;
      if (!declared) return [`${where}: status ${answer.status} is not listed for ${method} ${operation.path} (listed: ${Object.keys(operation.responses).join(", ")})`];
      const problems: string[] = [];
      const type = (answer.headers.get("content-type") ?? "").split(";")[0].trim();
      const content: Json | undefined = declared.content;
      if (!content) {
        if (answer.text !== "") problems.push(`${where}: a body where the document declares none`);
      } else if (!content[type]) {
        problems.push(`${where}: media type "${type}" is not declared (declared: ${Object.keys(content).join(", ")})`);
      } else if (type === "application/json" && !answer.headers.has("content-encoding")) {
        const validate = validatorOf(content[type].schema);
        if (!validate(answer.body)) problems.push(`${where}: the body does not fit the schema: ${ajv.errorsText(validate.errors)}`);
      }
      for (const [lower, name] of API_HEADERS) {
        const value = answer.headers.get(lower);
        if (value === null) continue;
        const header = declared.headers?.[name];
        if (!header) {
          problems.push(`${where}: sends ${name}, which the document does not declare for this answer`);
          continue;
        }
        const schema = headerOf(header).schema;
        const typed = schema.type === "integer" ? Number(value) : value;
        if (schema.type === "integer" && !/^\d+$/.test(value)) problems.push(`${where}: ${name} "${value}" is not an integer`);
        else if (!validatorOf(schema)(typed)) problems.push(`${where}: ${name} "${value}" does not fit its schema`);
      }
      return problems;
    },
  };
}
