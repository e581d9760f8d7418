/**
 * The console's browser code (ui/), bundled by Bun's own bundler. From source it is bundled on
 * the first request and kept in memory, so `npm start` and the tests need no build step;
 * scripts/build.ts bundles it once and embeds the result in the binary as CONSOLE_BUNDLE.
 */
import { join } from "node:path";

/** {js, css} as JSON, defined by scripts/build.ts; absent when running from source. */
declare const CONSOLE_BUNDLE: string | undefined;

export interface ConsoleAsset {
  type: string;
  body: Uint8Array;
  /** The same bytes gzip-compressed once, for every client that accepts it. */
  gzip: Uint8Array;
  /** A hash of the bytes: the ETag, and the `?v=` the shell puts in its links. */
  hash: string;
}

export interface ConsoleAssets {
  "app.js": ConsoleAsset;
  "app.css": ConsoleAsset;
}

/** Bundles ui/main.tsx (with the CSS it imports) for the browser, minified. */
export async function bundleConsole(): Promise<{ js: string; css: string }> {
  const result = await Bun.build({
    entrypoints: [join(import.meta.dir, "ui", "main.tsx")],
    target: "browser",
    format: "esm",
    minify: true,
    sourcemap: "none",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  if (!result.success) throw new AggregateError(result.logs, "the console did not bundle");
  const text = (kind: string) => Promise.all(result.outputs.filter((o) => o.path.endsWith(kind)).map((o) => o.text())).then((parts) => parts.join("\n"));
  return { js: await text(".js"), css: await text(".css") };
}

function asset(type: string, text: string): ConsoleAsset {
  const body = new TextEncoder().encode(text);
  return { type, body, gzip: Bun.gzipSync(body, { level: 9 }), hash: Bun.hash(body).toString(36) };
}

let assets: Promise<ConsoleAssets> | undefined;

/** The console's assets: the embedded bundle in the binary, else bundled once from source. */
export function consoleAssets(): Promise<ConsoleAssets> {
  assets ??= (async () => {
    const { js, css } = typeof CONSOLE_BUNDLE === "string" ? (JSON.parse(CONSOLE_BUNDLE) as { js: string; css: string }) : await bundleConsole();
    return { "app.js": asset("text/javascript; charset=utf-8", js), "app.css": asset("text/css; charset=utf-8", css) };
  })();
  // A failed bundle (a syntax error while editing) is tried again on the next request.
  assets.catch(() => (assets = undefined));
  return assets;
}
