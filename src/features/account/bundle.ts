/**
 * The setup and security pages' browser code (ui/), bundled by src/http/page-bundle.ts: from
 * source on the first request; scripts/build.ts embeds it in the binary as ACCOUNT_BUNDLE.
 */
import { join } from "node:path";
import { bundlePage, pageAssets } from "../../http/page-bundle";

/** {js, css} as JSON, defined by scripts/build.ts; absent when running from source. */
declare const ACCOUNT_BUNDLE: string | undefined;

const ENTRY = join(import.meta.dir, "ui", "main.tsx");

export const bundleAccountPages = () => bundlePage(ENTRY);

export const accountAssets = pageAssets(() => (typeof ACCOUNT_BUNDLE === "string" ? ACCOUNT_BUNDLE : undefined), ENTRY);
