/**
 * CORS for the origins in CORS_ORIGINS, and for no one else.
 *
 * Our own hook, not @elysiajs/cors (1.4.2): that plugin puts its expose/allow headers on answers
 * to every origin and answers every OPTIONS itself, where the contract wants a refused origin to
 * see no `access-control-*` header at all.
 *
 * - A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered 204 here, in
 *   onRequest: before routing and authentication. An allowed origin gets the CORS headers; any
 *   other gets a bare 204, so its browser blocks the call.
 * - Any other request from an allowed origin gets Allow-Origin and the exposed headers.
 * - `route`: one path that also answers origins of its own (the federated sign-in's exchange
 *   answers the pages listed in OIDC_RETURN_URLS, and nothing else does).
 * The header objects are prepared once per allowed origin; a request only picks one.
 */
import { Elysia } from "elysia";
import { requestPath } from "./request-url";

/** The answer headers a browser script may read. */
export const EXPOSED_HEADERS = ["X-Total-Count", "ETag", "X-Request-Id", "Retry-After"];
const ALLOWED_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE";
/** Seconds a browser may reuse a preflight answer. */
const PREFLIGHT_MAX_AGE = "600";

/** The answer and preflight headers of each origin, prepared once. */
function headersOf(origins: readonly string[]) {
  const answer = new Map<string, Readonly<Record<string, string>>>();
  const preflight = new Map<string, Readonly<Record<string, string>>>();
  for (const origin of origins) {
    const common = { "access-control-allow-origin": origin, vary: "Origin" };
    answer.set(origin, Object.freeze({ ...common, "access-control-expose-headers": EXPOSED_HEADERS.join(", ") }));
    preflight.set(origin, Object.freeze({ ...common, "access-control-allow-methods": ALLOWED_METHODS, "access-control-max-age": PREFLIGHT_MAX_AGE }));
  }
  return { answer, preflight };
}

export function cors(origins: readonly string[], route?: { path: string; origins: readonly string[] }) {
  const all = headersOf(origins);
  const own = headersOf(route?.origins ?? []);
  const open = origins.length > 0 || own.answer.size > 0;
  /** The headers for `origin` on this request: any path's, or the route's own. */
  const pick = (kind: "answer" | "preflight", origin: string, request: Request) =>
    all[kind].get(origin) ?? (own[kind].has(origin) && requestPath(request.url) === route?.path ? own[kind].get(origin) : undefined);
  return new Elysia({ name: "cors" }).onRequest(({ request, set }) => {
    if (!isPreflight(request)) {
      // Without CORS_ORIGINS (or OIDC_RETURN_URLS) no other answer depends on the Origin (nothing to
      // allow, no Vary to send), so it is not read: that read cost the served GET /api/users/{id}
      // ~0.4 µs (wrk, server CPU per request).
      if (!open) return;
      const origin = request.headers.get("origin");
      if (origin !== null) Object.assign(set.headers, pick("answer", origin, request) ?? REFUSED);
      return;
    }
    const origin = request.headers.get("origin");
    if (origin === null) return;
    const headers = pick("preflight", origin, request);
    if (headers) {
      Object.assign(set.headers, headers);
      const asked = request.headers.get("access-control-request-headers");
      if (asked) set.headers["access-control-allow-headers"] = asked;
    } else if (open) {
      set.headers.vary = "Origin";
    }
    set.status = 204;
    return new Response(null, { status: 204 });
  });
}

/** The answer depends on the Origin even when it is refused, so a cache must key on it. */
const REFUSED = Object.freeze({ vary: "Origin" });

const isPreflight = (request: Request) => request.method === "OPTIONS" && request.headers.has("access-control-request-method");
