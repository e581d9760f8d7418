/**
 * Interactive API documentation: /swagger (Swagger UI) and /swagger/json (OpenAPI 3.1).
 * The UI's script and stylesheet are imported as text, so `bun build --compile` embeds
 * them: the page needs no CDN and works offline.
 */
import { Elysia, t, type AnyElysia } from "elysia";
import uiScript from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import uiStyles from "swagger-ui-dist/swagger-ui.css" with { type: "text" };
import { buildSpec } from "./spec";

const page = (basePath: string) => `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>usersvc API</title>
  <link rel="stylesheet" href="${basePath}/swagger/assets/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="${basePath}/swagger/assets/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({ url: ${JSON.stringify(`${basePath}/swagger/json`)}, dom_id: "#swagger-ui", persistAuthorization: true, deepLinking: true });
  </script>
</body>
</html>`;

const served = (body: string, type: string, cache: string) => () =>
  new Response(body, { headers: { "content-type": type, "cache-control": cache } });

/** `app` is the whole application, read once on the first request for the document. */
export const docsRoutes = (basePath: string, app: () => AnyElysia) => {
  let spec: ReturnType<typeof buildSpec> | undefined;
  const hidden = { detail: { hide: true } };
  return new Elysia({ tags: ["Documentation"] } as never)
    .get("/swagger", served(page(basePath), "text/html; charset=utf-8", "no-cache"), {
      response: { 200: t.String({ description: "The Swagger UI page (text/html)" }) },
      detail: { summary: "Interactive API documentation" },
    })
    .get("/swagger/json", () => (spec ??= buildSpec(app())), {
      response: { 200: t.Record(t.String(), t.Unknown(), { description: "This OpenAPI 3.1 document" }) },
      detail: { summary: "OpenAPI document" },
    })
    .get("/swagger/assets/swagger-ui-bundle.js", served(uiScript, "text/javascript; charset=utf-8", "public, max-age=86400"), hidden)
    .get("/swagger/assets/swagger-ui.css", served(uiStyles, "text/css; charset=utf-8", "public, max-age=86400"), hidden);
};
