/**
 * What a route declares for the OpenAPI document besides its schemas: the error statuses it can
 * answer (all the error envelope) and the response headers it sends. Kept apart from the docs
 * feature's spec.ts so that routes do not load the document generator.
 */
import { ErrorEnvelope } from "../envelope";

/** The `response` entries of the error statuses a route can answer, all the envelope. */
export const errorResponses = <S extends number>(...statuses: S[]) => Object.fromEntries(statuses.map((status) => [status, ErrorEnvelope])) as Record<S, typeof ErrorEnvelope>;

/** The response headers the service sends, by name; a route picks from these (a new one is added here). */
export const RESPONSE_HEADERS = {
  "X-Request-Id": { description: "The request's id: the client's own X-Request-Id when it was well-formed, else a new UUID", schema: { type: "string" } },
  "X-Total-Count": { description: "How many items the whole list has (every page together)", schema: { type: "integer", minimum: 0 } },
  ETag: { description: 'The user\'s version as an entity tag ("<version>"), for If-Match', schema: { type: "string" } },
  "Retry-After": { description: "Seconds to wait before trying again", schema: { type: "integer", minimum: 0 } },
  "WWW-Authenticate": { description: "`Bearer`: a token from POST /api/auth/login is needed", schema: { type: "string" } },
  "X-File-Version": { description: "The SHA-256 of the bytes (a stored file never changes)", schema: { type: "string" } },
  "X-Last-Modified": { description: "The upload time (HTTP date)", schema: { type: "string" } },
  "X-Client-Version": { description: "The caller's X-Client-Version, or 1.0", schema: { type: "string" } },
  "Content-Disposition": { description: "`attachment` with the file's name (RFC 6266 / RFC 8187)", schema: { type: "string" } },
  "Content-Range": { description: "The range sent (206), or `bytes */<size>` (416)", schema: { type: "string" } },
  Location: { description: "Where the browser goes next (a redirect)", schema: { type: "string" } },
} as const;
export type ResponseHeader = keyof typeof RESPONSE_HEADERS;

export const HEADERS_KEY = "x-usersvc-response-headers";

/** Spread into a route's `detail`: the headers its answers carry, by status. */
export const documentedHeaders = (byStatus: Record<number, ResponseHeader[]>) => ({ [HEADERS_KEY]: byStatus });
