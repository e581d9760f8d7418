/**
 * The headers every answer carries, errors and unknown paths included: framing denied
 * (X-Frame-Options and CSP frame-ancestors), no MIME sniffing, no Referer, and HSTS when
 * HSTS_MAX_AGE is set.
 *
 * They are Elysia's app-wide default headers (`.headers()`): Elysia copies one prepared object
 * into each request's `set.headers`, so no header text is built per request.
 *
 * Answers that are not pages (JSON, files) get a policy that lets nothing load. An HTML page
 * sends ONE complete policy of its own in place of that one (a browser enforces every CSP
 * header it gets, so a second header could only narrow the first): build it once with
 * `pagePolicy(...)` and answer with `pageHeaders(policy)`. A Response's own header wins over the
 * default one (Elysia's mergeHeaders), so the page's answer carries exactly one CSP.
 */
import { Elysia } from "elysia";

export const CSP = "content-security-policy";

/** Loads nothing, framed nowhere: for JSON, files and error answers. */
export const API_POLICY = "default-src 'none'; frame-ancestors 'none'";

/** Where a page may load from, per fetch directive; anything not named stays 'none'. */
export interface PageSources {
  script?: string[];
  style?: string[];
  img?: string[];
  font?: string[];
  connect?: string[];
  /** Where the page's forms may submit (form-action); default none. */
  form?: string[];
}

/**
 * A page's complete policy: `default-src 'none'` plus what the page names, never an inline
 * script ('unsafe-inline' / 'unsafe-eval' in script-src are refused), never framed.
 */
export function pagePolicy(sources: PageSources): string {
  if (sources.script?.some((s) => /unsafe-(inline|eval)|^'(nonce|sha)/.test(s))) throw new Error("pages load scripts from files only: no inline or eval");
  const directive = (name: string, list?: string[]) => (list?.length ? [`${name} ${list.join(" ")}`] : []);
  return [
    "default-src 'none'",
    ...directive("script-src", sources.script),
    ...directive("style-src", sources.style),
    ...directive("img-src", sources.img),
    ...directive("font-src", sources.font),
    ...directive("connect-src", sources.connect),
    `form-action ${sources.form?.length ? sources.form.join(" ") : "'none'"}`,
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The headers of an HTML page answered with its own policy; build once per page, not per request. */
export const pageHeaders = (policy: string, cacheControl = "no-cache"): Readonly<Record<string, string>> =>
  Object.freeze({ "content-type": "text/html; charset=utf-8", "cache-control": cacheControl, [CSP]: policy });

/** The default headers of every answer. */
export function securityHeaders(options: { hstsMaxAge?: number }): Record<string, string> {
  const headers: Record<string, string> = {
    "x-frame-options": "DENY",
    [CSP]: API_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
  if (options.hstsMaxAge !== undefined) headers["strict-transport-security"] = `max-age=${options.hstsMaxAge}`;
  return headers;
}

/** Registered on the root app: Elysia's default headers apply to every route and every error. */
export const securityHeadersPlugin = (options: { hstsMaxAge?: number }) => new Elysia({ name: "security-headers" }).headers(securityHeaders(options));
