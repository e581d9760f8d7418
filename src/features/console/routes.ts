/** Feature folder console/: the admin console: its Preact bundle (ui/) and the routes that serve it. */
/**
 * /admin: the admin console, a single page that talks only to the public API with the ADMIN's
 * token. Open (the page holds no data; the API decides what the token may see). The shell is
 * a static document with no inline script; its own complete CSP (pagePolicy, replacing the
 * global one) allows only this origin's script, style and API, and no framing.
 */
import { Elysia, t } from "elysia";
import { AppError } from "../../errors";
import { pageHeaders, pagePolicy } from "../../http/security-headers";
import { consoleAssets, type ConsoleAssets } from "./bundle";

/** Script, styles and API calls from this origin only; data: and blob: images (the favicon, downloads). */
export const CONSOLE_POLICY = pagePolicy({ script: ["'self'"], style: ["'self'"], img: ["'self'", "data:", "blob:"], connect: ["'self'"] });
const SHELL_HEADERS = pageHeaders(CONSOLE_POLICY);

const escapeAttr = (value: string) => value.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`);

/** The base path travels to the script in a data attribute: no inline script needed. */
const shell = (basePath: string, assets: ConsoleAssets) => {
  const href = (name: keyof ConsoleAssets) => escapeAttr(`${basePath}/admin/assets/${name}?v=${assets[name].hash}`);
  return `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>usersvc console</title>
  <link rel="icon" href="data:," />
  <link rel="stylesheet" href="${href("app.css")}" />
  <script type="module" src="${href("app.js")}"></script>
</head>
<body>
  <div id="app" data-base-path="${escapeAttr(basePath)}"></div>
  <noscript>The usersvc console needs JavaScript.</noscript>
</body>
</html>`;
};

const accepts = (request: Request, encoding: string) => (request.headers.get("accept-encoding") ?? "").toLowerCase().includes(encoding);

export const consoleRoutes = (basePath: string) =>
  new Elysia({ tags: ["Console"] })
    .get("/admin", async () => new Response(shell(basePath, await consoleAssets()), { headers: SHELL_HEADERS }), {
      response: { 200: t.String({ description: "The console's page; sign in with an ADMIN's e-mail and password", contentMediaType: "text/html" }) },
      detail: { summary: "The admin console", description: "A single-page web console for ADMINs over this API. Its script and styles are served beside it." },
    })
    .get(
      "/admin/assets/:name",
      async ({ params, request }) => {
        const assets = await consoleAssets();
        const found = Object.hasOwn(assets, params.name) ? assets[params.name as keyof ConsoleAssets] : undefined;
        if (!found) throw new AppError("NOT_FOUND");
        const etag = `"${found.hash}"`;
        const headers: Record<string, string> = {
          "content-type": found.type,
          etag,
          // The shell links each asset with ?v=<hash>: a new bundle is a new URL.
          "cache-control": "public, max-age=31536000, immutable",
          vary: "Accept-Encoding",
        };
        if (request.headers.get("if-none-match") === etag) return new Response(null, { status: 304, headers });
        if (!accepts(request, "gzip")) return new Response(found.body, { headers });
        return new Response(found.gzip, { headers: { ...headers, "content-encoding": "gzip" } });
      },
      { params: t.Object({ name: t.String({ maxLength: 20 }) }), detail: { hide: true } },
    );
