/**
 * `Cache-Control: no-store` on every answer to a request that carries credentials and on every
 * token answer (login, refresh), errors included: a browser's or a proxy's cache must never keep
 * a user's data or a bearer token. Set once, in onRequest, as a default header of the answer:
 * the errors plugin, downloads and every route answer with it, and a route that states its own
 * policy replaces it (GET /api/files/info/{id} keeps the seed's hour, as `private`; pages and
 * static assets keep theirs, being the same for everyone).
 *
 * Keyed on the Authorization header, not on the guard's verdict: the guard runs per route, so a
 * 401 for a lapsed token, a 403, an unknown path's 404 or a malformed body's 400 would otherwise
 * answer before anything knew the caller. The header is all any authenticated request has.
 */
import { Elysia } from "elysia";
import { authorizationOf } from "./authorization";
import { requestPath } from "./request-url";

/** The routes whose answer is a bearer token, asked for without one (login) or with one. */
const TOKEN_ROUTES = ["/api/auth/login", "/api/auth/refresh"];

export const noStore = (basePath: string) => {
  const tokenRoutes = new Set(TOKEN_ROUTES.map((route) => basePath + route));
  return new Elysia({ name: "no-store" }).onRequest(({ request, set }) => {
    if (authorizationOf(request) !== null || (request.method === "POST" && tokenRoutes.has(requestPath(request.url)))) set.headers["cache-control"] = "no-store";
  });
};
