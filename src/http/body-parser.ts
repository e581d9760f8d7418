/**
 * Request bodies: JSON up to MAX_BODY_BYTES, refused with 413 before it is read in full;
 * unparsable JSON is 400 "Malformed JSON request"; a body of a type no route takes is 415.
 * Routes that stream their own body (file upload) get it untouched, with their own limit.
 */
import { Elysia, ParseError, type TSchema } from "elysia";
import { AppError, Violations } from "../errors";
import { overLengthViolations } from "../validation";
import { peekRequestState, requestState } from "./request-state";
import type { RouteTable } from "./route-table";

async function readLimited(request: Request, limit: number): Promise<string> {
  const declared = request.headers.get("content-length");
  if (declared !== null) {
    if (Number(declared) > limit) throw new AppError("PAYLOAD_TOO_LARGE");
    // The server reads no more than the declared length, and its own read is far cheaper than
    // iterating the body's stream in JavaScript.
    return request.text();
  }
  if (!request.body) return "";
  // Chunked: counted as it arrives, refused once past the limit.
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > limit) throw new AppError("PAYLOAD_TOO_LARGE");
    chunks.push(chunk);
  }
  return new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(chunks));
}

/**
 * Deeper JSON is refused before parsing: no body of ours nests past a few levels, and
 * validating thousands of levels overflows the stack (a 500) where a 400 is due.
 */
export const MAX_JSON_DEPTH = 64;

const OPENING = /[[{]/g;

/** Whether `text` holds more than `limit` opening brackets (in strings or not): a native scan, so a huge string costs little. */
function opensMoreThan(text: string, limit: number): boolean {
  OPENING.lastIndex = 0;
  for (let count = 0; OPENING.exec(text); ) if (++count > limit) return true;
  return false;
}

/** Whether brackets outside strings nest deeper than `limit`: one pass, no recursion (none when too few brackets to nest that deep). */
export function nestsDeeperThan(text: string, limit: number): boolean {
  if (!opensMoreThan(text, limit)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \\ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > limit) return true;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return false;
}

const isJson = (type: string) => type.startsWith("application/json") || /^application\/[\w.+-]+\+json/.test(type);

const isRefusal = (error: unknown): error is Error => error instanceof AppError || error instanceof ParseError || error instanceof Violations;

/**
 * `streamedRoutes`: full route paths that read their own body as a stream (file upload); untouched here.
 * A body with a text over its field's maxLength is refused here, on lengths alone: Elysia's check
 * would pass it whole through every pattern and format (and, outside production, print it).
 */
export const bodyParser = (maxBodyBytes: number, routes: RouteTable, streamedRoutes: readonly string[] = []) => {
  // Per method and route: its body schema, or null (looked up once).
  const schemas = new Map<string, TSchema | null>();
  const schemaOf = (method: string, route: string) => {
    const key = `${method} ${route}`;
    let schema = schemas.get(key);
    if (schema === undefined) {
      schema = routes.schemaOf(method, route, "body") ?? null;
      schemas.set(key, schema);
    }
    return schema;
  };
  return (
    new Elysia({ name: "body-parser" })
      .onParse({ as: "global" }, async ({ request, contentType, route }) => {
        // Returning the request keeps Elysia's own parsers (formData(), which buffers) off the stream.
        if (streamedRoutes.includes(route)) return request;
        try {
          const parsed = await parse(request, (contentType ?? "").toLowerCase(), maxBodyBytes);
          const schema = schemaOf(request.method, route);
          const overLength = schema && overLengthViolations(schema, parsed);
          if (overLength) throw new Violations("body", overLength);
          return parsed;
        } catch (error) {
          if (!isRefusal(error)) throw error;
          // Elysia parses before the access guard runs, so a refused body (malformed, too large, not
          // an object, of a type no route takes) is held back: the route sees {} and the refusal is
          // raised once the guard has let the caller through. An anonymous caller gets 401, not a verdict on the body.
          requestState(request).refusedBody = error;
          return {};
        }
      })
      // Runs after the guard (a transform) and after validation; a body that failed validation
      // because it was held back is answered with its refusal by the errors plugin instead.
      .onBeforeHandle({ as: "global" }, ({ request }) => {
        const refused = peekRequestState(request)?.refusedBody;
        if (refused) throw refused;
      })
  );
};

async function parse(request: Request, type: string, maxBodyBytes: number): Promise<unknown> {
  if (isJson(type)) {
    const text = await readLimited(request, maxBodyBytes);
    if (text.trim() === "") return null;
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw new ParseError();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ParseError();
    }
    // Every JSON body here is an object; Elysia's normaliser would turn "abc", 7 or [1] into {}
    // and let an all-optional schema (a PATCH, a profile PUT) accept it as "change nothing / clear all".
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new Violations("body", [{ path: "root", key: "field.type", params: { expected: "an object" } }]);
    }
    // Elysia's normaliser builds a new value (turning a string sent where a list goes into a list
    // of one entry per character), so this one stays as sent: violations are reported on it.
    requestState(request).sentBody = parsed;
    return parsed;
  }
  // Multipart is only for the streamed upload routes above: anywhere else it would be buffered whole.
  const length = request.headers.get("content-length");
  const hasBody = request.body !== null && length !== "0";
  if (hasBody) throw new AppError("UNSUPPORTED_MEDIA_TYPE");
  return null;
}
