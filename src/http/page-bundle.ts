/**
 * A page's browser code (the admin console, the account pages), bundled by Bun's own bundler.
 * From source it is bundled on the first request and kept in memory, so `npm start` and the tests
 * need no build step; scripts/build.ts bundles each once and embeds the result in the binary
 * (a `define` the page's module reads), and the page's routes serve the assets with assetAnswer.
 */

export interface PageAsset {
  type: string;
  body: Uint8Array;
  /** The same bytes gzip-compressed once, for every client that accepts it. */
  gzip: Uint8Array;
  /** A hash of the bytes: the ETag, and the `?v=` the shell puts in its links. */
  hash: string;
}

export interface PageAssets {
  "app.js": PageAsset;
  "app.css": PageAsset;
}

export type PageBundle = { js: string; css: string };

/** Bundles an entry point (with the CSS it imports) for the browser, minified. */
export async function bundlePage(entry: string): Promise<PageBundle> {
  const result = await Bun.build({
    entrypoints: [entry],
    target: "browser",
    format: "esm",
    minify: true,
    sourcemap: "none",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  if (!result.success) throw new AggregateError(result.logs, `${entry} did not bundle`);
  const text = (kind: string) => Promise.all(result.outputs.filter((o) => o.path.endsWith(kind)).map((o) => o.text())).then((parts) => parts.join("\n"));
  return { js: await text(".js"), css: await text(".css") };
}

function asset(type: string, text: string): PageAsset {
  const body = new TextEncoder().encode(text);
  return { type, body, gzip: Bun.gzipSync(body, { level: 9 }), hash: Bun.hash(body).toString(36) };
}

/**
 * The assets of one page: `embedded()` (the binary's JSON of {js, css}) when it gives one, else bundled
 * once from `entry`. A function, so the JSON (~360 KB for both pages) becomes a string only on the
 * page's first request: as a value read at start it was in every idle process's heap.
 */
export function pageAssets(embedded: () => string | undefined, entry: string): () => Promise<PageAssets> {
  let assets: Promise<PageAssets> | undefined;
  return () => {
    assets ??= (async () => {
      const json = embedded();
      const { js, css } = json === undefined ? await bundlePage(entry) : (JSON.parse(json) as PageBundle);
      return { "app.js": asset("text/javascript; charset=utf-8", js), "app.css": asset("text/css; charset=utf-8", css) };
    })();
    // A failed bundle (a syntax error while editing) is tried again on the next request.
    assets.catch(() => (assets = undefined));
    return assets;
  };
}

const accepts = (request: Request, encoding: string) => (request.headers.get("accept-encoding") ?? "").toLowerCase().includes(encoding);

/** One asset by name (undefined for an unknown one), cached for good: the shell links each with ?v=<hash>, so a new bundle is a new URL. */
export function assetAnswer(assets: PageAssets, name: string, request: Request): Response | undefined {
  const found = Object.hasOwn(assets, name) ? assets[name as keyof PageAssets] : undefined;
  if (!found) return undefined;
  const etag = `"${found.hash}"`;
  const headers: Record<string, string> = { "content-type": found.type, etag, "cache-control": "public, max-age=31536000, immutable", vary: "Accept-Encoding" };
  if (request.headers.get("if-none-match") === etag) return new Response(null, { status: 304, headers });
  if (!accepts(request, "gzip")) return new Response(found.body, { headers });
  return new Response(found.gzip, { headers: { ...headers, "content-encoding": "gzip" } });
}
