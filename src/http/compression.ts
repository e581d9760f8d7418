/**
 * Response compression for every route: JSON and text bodies over 1 KiB are gzip-compressed
 * (brotli when the client ranks br above gzip) when Accept-Encoding allows it, with
 * Vary: Accept-Encoding. Small bodies, binary downloads (files, heap dumps) and bodies that
 * already carry a Content-Encoding go out as they are.
 */
import { promisify } from "node:util";
import { Elysia } from "elysia";

export const COMPRESSION_THRESHOLD_BYTES = 1024;

/** node:zlib from the first answer worth compressing on: most answers are small JSON, and an idle server sends none. */
let compressors: Promise<{ brotli: (body: Uint8Array, size: number) => Promise<Buffer>; gzip: (body: Uint8Array) => Promise<Buffer> }> | undefined;
const loadCompressors = () =>
  (compressors ??= import("node:zlib").then(({ brotliCompress, constants, gzip }) => {
    const brotli = promisify(brotliCompress);
    const gzipped = promisify(gzip);
    return {
      brotli: (body: Uint8Array, size: number) => brotli(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: size } }),
      gzip: (body: Uint8Array) => gzipped(body, { level: 6 }),
    };
  }));

/** Text-like types worth compressing; everything else (octet-stream, images, archives) is left alone. */
const COMPRESSIBLE = /^(text\/|application\/(json|javascript|xml|problem\+json|[\w.+-]+\+json|[\w.+-]+\+xml)\b)/i;

type Encoding = "br" | "gzip";

/** The encoding the client ranks highest (q-values; gzip wins a tie, being the cheaper), or none. */
export function chooseEncoding(header: string | null): Encoding | undefined {
  if (!header) return undefined;
  const q: Record<string, number> = {};
  for (const part of header.split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    const given = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    q[name] = given ? Number(given.slice(2)) || 0 : 1;
  }
  const gz = q.gzip ?? q["x-gzip"] ?? q["*"] ?? 0;
  const br = q.br ?? q["*"] ?? 0;
  if (br > gz && br > 0) return "br";
  if (gz > 0) return "gzip";
  return br > 0 ? "br" : undefined;
}

async function compress(body: Uint8Array, encoding: Encoding): Promise<Buffer> {
  const { brotli, gzip } = await loadCompressors();
  return encoding === "br" ? brotli(body, body.byteLength) : gzip(body);
}

/** Sure to fit under the threshold without encoding it: UTF-8 takes at most 3 bytes per UTF-16 unit. */
const surelySmall = (text: string) => text.length * 3 <= COMPRESSION_THRESHOLD_BYTES;
const isPlainJson = (value: unknown): value is object => value !== null && typeof value === "object" && (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype);

/**
 * The hook is a plain function, not an async one: Elysia awaits an async mapResponse on every
 * request, and most answers (small JSON) are decided here without waiting for anything. Only
 * an answer that may be compressed goes on to `encode`, whose promise Elysia resolves itself.
 */
export const compression = () =>
  // biome-ignore lint/suspicious/noExplicitAny: Elysia types mapResponse as Response | void, yet answers whatever a hook hands back (the JSON text, the value as it was).
  new Elysia({ name: "compression" }).mapResponse({ as: "global" }, ({ request, responseValue, set }): any => {
    // "Leave it" must hand the value back: Elysia 1.4's app-level error path (unknown routes)
    // answers an empty body when a mapResponse hook returns undefined.
    if (request.method === "HEAD") return responseValue;
    // Most answers are small JSON: decide that before any header or encoding work, and hand
    // Elysia the text so the value is serialized once.
    if (isPlainJson(responseValue)) {
      const json = JSON.stringify(responseValue);
      if (!surelySmall(json) && Buffer.byteLength(json) > COMPRESSION_THRESHOLD_BYTES) {
        if (!plainlyEncodable(set) || chooseEncoding(request.headers.get("accept-encoding"))) return encode(request, responseValue, json, set);
        // The client takes no encoding (wrk, curl, most service clients): the text as it is, with
        // the Vary a cache needs. encode() would build the same answer through new Headers, the
        // text encoded to bytes, a Response and an await: 15% of a 10-user search page in-process.
        set.headers.vary = set.headers.vary ? `${set.headers.vary}, Accept-Encoding` : "Accept-Encoding";
      }
      set.headers["content-type"] ??= "application/json; charset=utf-8";
      return json;
    }
    if (typeof responseValue === "string" && surelySmall(responseValue)) return responseValue;
    return encode(request, responseValue, undefined, set);
  });

type AnswerSet = { headers: Record<string, unknown>; status?: unknown };

/** Answers whose JSON body is made while it is sent (streamedJson): compressed as they stream, never read whole. */
const streamed = new WeakSet<Response>();

/** A 200 JSON answer whose body `stream` makes as the client reads it; compressed on the way when the client accepts it. */
export function streamedJson(stream: ReadableStream<Uint8Array>): Response {
  const response = new Response(stream, { headers: { "content-type": "application/json; charset=utf-8" } });
  streamed.add(response);
  return response;
}

/** A streaming compressor of node:zlib, at the levels compress() uses, as a web transform. */
async function compressorStream(encoding: Encoding) {
  const [{ Duplex }, zlib] = await Promise.all([import("node:stream"), import("node:zlib")]);
  const compressor = encoding === "br" ? zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } }) : zlib.createGzip({ level: 6 });
  return Duplex.toWeb(compressor) as ReadableWritablePair<Uint8Array, Uint8Array>;
}

/** A streamed answer with the handler's headers, and compressed chunk by chunk when the client accepts it. */
async function encodeStreamed(request: Request, response: Response, set: AnswerSet) {
  const headers = new Headers(set.headers as Record<string, string>);
  response.headers.forEach((value, key) => {
    headers.set(key, value);
  });
  headers.append("vary", "Accept-Encoding");
  const encoding = chooseEncoding(request.headers.get("accept-encoding"));
  if (!encoding || !response.body) return new Response(response.body, { status: response.status, headers });
  headers.set("content-encoding", encoding);
  return new Response(response.body.pipeThrough(await compressorStream(encoding)), { status: response.status, headers });
}

/** What encode() would compress given the bytes and an encoding: a JSON answer's status and type allow it. */
function plainlyEncodable(set: AnswerSet) {
  return encodable(statusOf(set), String(set.headers["content-type"] ?? "application/json"));
}

const statusOf = (set: AnswerSet) => (typeof set.status === "number" ? set.status : 200);
/** A body with this status and type may be compressed: not a no-content, partial or not-modified answer, and text-like. */
const encodable = (status: number, type: string) => status !== 204 && status !== 206 && status !== 304 && COMPRESSIBLE.test(type);
const utf8 = new TextEncoder();

/** A larger or non-JSON answer: compressed when it is text, big enough and the client accepts it. */
async function encode(request: Request, responseValue: unknown, json: string | undefined, set: AnswerSet): Promise<unknown> {
  // What the handler (or the errors plugin) answered, as bytes plus its type.
  let body: Uint8Array;
  let type: string;
  let status = statusOf(set);
  const headers = new Headers(set.headers as Record<string, string>);
  if (responseValue instanceof Response) {
    if (streamed.has(responseValue)) return encodeStreamed(request, responseValue, set);
    type = responseValue.headers.get("content-type") ?? "";
    const h = responseValue.headers;
    // Downloads keep their bytes as stored (Range, checksums); only our own text answers qualify.
    if (!COMPRESSIBLE.test(type) || h.has("content-encoding") || h.has("content-disposition") || h.has("content-range") || !responseValue.body) return responseValue;
    status = responseValue.status;
    h.forEach((value, key) => {
      headers.set(key, value);
    });
    body = new Uint8Array(await responseValue.arrayBuffer());
  } else if (typeof responseValue === "string") {
    type = String(set.headers["content-type"] ?? "text/plain; charset=utf-8");
    body = utf8.encode(responseValue);
  } else if (json !== undefined) {
    type = String(set.headers["content-type"] ?? "application/json; charset=utf-8");
    body = utf8.encode(json);
  } else {
    return responseValue;
  }
  if (!encodable(status, type)) return responseValue;
  headers.set("content-type", type);
  // A Response read above must be answered anew, whatever its size.
  if (body.byteLength <= COMPRESSION_THRESHOLD_BYTES) return responseValue instanceof Response ? new Response(body, { status, headers }) : responseValue;
  headers.append("vary", "Accept-Encoding");
  const encoding = chooseEncoding(request.headers.get("accept-encoding"));
  if (!encoding) return new Response(body, { status, headers });
  headers.set("content-encoding", encoding);
  headers.delete("content-length");
  return new Response(await compress(body, encoding), { status, headers });
}
