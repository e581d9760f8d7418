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
import { assetAnswer, type PageAssets } from "../../http/page-bundle";
import { consoleAssets } from "./bundle";
import { routeSamples } from "../../http/route-sample";

/** Script, styles and API calls from this origin only; data: and blob: images (the favicon, downloads). */
export const CONSOLE_POLICY = pagePolicy({ script: ["'self'"], style: ["'self'"], img: ["'self'", "data:", "blob:"], connect: ["'self'"] });
const SHELL_HEADERS = pageHeaders(CONSOLE_POLICY);

const escapeAttr = (value: string) => value.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`);

/** The base path travels to the script in a data attribute: no inline script needed. */
const shell = (basePath: string, assets: PageAssets) => {
  const href = (name: keyof PageAssets) => escapeAttr(`${basePath}/admin/assets/${name}?v=${assets[name].hash}`);
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

export const consoleRoutes = (basePath: string) =>
  new Elysia({ tags: ["Console"] })
    .use(routeSamples)
    .get("/admin", async () => new Response(shell(basePath, await consoleAssets()), { headers: SHELL_HEADERS }), {
      sample: () => ({ path: "/admin", token: undefined, status: 200 }),
      response: { 200: t.String({ description: "The console's page; sign in with an ADMIN's e-mail and password", contentMediaType: "text/html" }) },
      detail: { summary: "The admin console", description: "A single-page web console for ADMINs over this API. Its script and styles are served beside it." },
    })
    .get(
      "/admin/assets/:name",
      async ({ params, request }) => {
        const answer = assetAnswer(await consoleAssets(), params.name, request);
        if (!answer) throw new AppError("NOT_FOUND");
        return answer;
      },
      { params: t.Object({ name: t.String({ maxLength: 20 }) }), detail: { hide: true }, sample: () => ({ path: "/admin/assets/app.js", token: undefined, status: 200 }) },
    );
