/**
 * The console's browser code (ui/), bundled by src/http/page-bundle.ts: from source on the first
 * request; scripts/build.ts bundles it once and embeds the result in the binary as CONSOLE_BUNDLE.
 */
import { join } from "node:path";
import { bundlePage, pageAssets } from "../../http/page-bundle";

/** {js, css} as JSON, defined by scripts/build.ts; absent when running from source. */
declare const CONSOLE_BUNDLE: string | undefined;

const ENTRY = join(import.meta.dir, "ui", "main.tsx");

export const bundleConsole = () => bundlePage(ENTRY);

/** The console's assets: the embedded bundle in the binary, else bundled once from source. */
export const consoleAssets = pageAssets(() => (typeof CONSOLE_BUNDLE === "string" ? CONSOLE_BUNDLE : undefined), ENTRY);
