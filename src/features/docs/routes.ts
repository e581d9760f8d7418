/** Feature folder docs/: the OpenAPI document and the Swagger UI built from every route's own schemas. */
/**
 * Interactive API documentation: /swagger (Swagger UI) and /swagger/json (OpenAPI 3.1).
 * The UI's script and stylesheet are imported as files, so `bun build --compile` embeds
 * them: the page needs no CDN and works offline. A file import is a path, read when asked
 * for: as text imports, the 1.9 MB of Swagger UI were strings in every idle process.
 */
import { Elysia, t, type AnyElysia } from "elysia";
import uiScript from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import uiStyles from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import initScript from "./swagger-init.js" with { type: "file" };
import { pageHeaders, pagePolicy } from "../../http/security-headers";
import { VERSION } from "../../version";
import type { buildSpec } from "./spec";
import { routeSamples } from "../../http/route-sample";

/**
 * The page's own complete policy: scripts and styles only from its embedded assets; the CSS
 * draws its icons as data: SVG images; the UI fetches the document (and "Try it out") from here.
 */
export const SWAGGER_POLICY = pagePolicy({ script: ["'self'"], style: ["'self'"], img: ["'self'", "data:"], connect: ["'self'"] });

const page = (basePath: string) => `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>usersvc API</title>
  <!-- No favicon: else the browser asks for /favicon.ico, outside BASE_PATH and the API. -->
  <link rel="icon" href="data:," />
  <link rel="stylesheet" href="${basePath}/swagger/assets/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${basePath}/swagger/assets/swagger-ui-bundle.js"></script>
  <script src="${basePath}/swagger/assets/swagger-init.js" data-spec="${basePath}/swagger/json"></script>
</body>
</html>`;

const served = (body: string, headers: Readonly<Record<string, string>>) => () => new Response(body, { headers });
const servedFile = (path: string, headers: Readonly<Record<string, string>>) => () => new Response(Bun.file(path), { headers });
const asset = (type: string) => Object.freeze({ "content-type": type, "cache-control": "public, max-age=86400" });

/** What a newcomer opening http://localhost:8080/ meets: where everything else is. */
export const ServiceIndex = t.Object(
  {
    name: t.String(),
    version: t.String(),
    docs: t.String({ description: "The interactive API documentation (Swagger UI)" }),
    health: t.String({ description: "The health endpoint" }),
    console: t.String({ description: "The admin console" }),
  },
  { title: "ServiceIndex", additionalProperties: false },
);

/**
 * `app` is the whole application, read once on the first request for the document. The generator
 * (@elysiajs/openapi, the largest library after Elysia) is loaded then too, not at every start.
 */
export const docsRoutes = (basePath: string, app: () => AnyElysia) => {
  let spec: Promise<ReturnType<typeof buildSpec>> | undefined;
  const hidden = { detail: { hide: true } };
  const index = Object.freeze({
    name: VERSION.name,
    version: VERSION.version,
    docs: `${basePath}/swagger`,
    health: `${basePath}/actuator/health`,
    console: `${basePath}/admin`,
  });
  return new Elysia({ tags: ["Documentation"] })
    .use(routeSamples)
    .get("/", () => index, {
      sample: () => ({ path: "/", status: 200 }),
      response: { 200: ServiceIndex },
      detail: { summary: "Service index: links to the docs, health and the console" },
    })
    .get("/swagger", served(page(basePath), pageHeaders(SWAGGER_POLICY)), {
      sample: () => ({ path: "/swagger", status: 200 }),
      response: { 200: t.String({ description: "The Swagger UI page", contentMediaType: "text/html" }) },
      detail: { summary: "Interactive API documentation" },
    })
    .get("/swagger/json", () => (spec ??= import("./spec").then(({ buildSpec }) => buildSpec(app()))), {
      sample: () => ({ path: "/swagger/json", status: 200 }),
      response: { 200: t.Record(t.String(), t.Unknown(), { description: "This OpenAPI 3.1 document" }) },
      detail: { summary: "OpenAPI document" },
    })
    .get("/swagger/assets/swagger-ui-bundle.js", servedFile(uiScript, asset("text/javascript; charset=utf-8")), {
      ...hidden,
      sample: () => ({ path: "/swagger/assets/swagger-ui-bundle.js", status: 200 }),
    })
    .get("/swagger/assets/swagger-init.js", servedFile(initScript, asset("text/javascript; charset=utf-8")), {
      ...hidden,
      sample: () => ({ path: "/swagger/assets/swagger-init.js", status: 200 }),
    })
    .get("/swagger/assets/swagger-ui.css", servedFile(uiStyles, asset("text/css; charset=utf-8")), {
      ...hidden,
      sample: () => ({ path: "/swagger/assets/swagger-ui.css", status: 200 }),
    });
};
