/**
 * What a request's URL says, read one way everywhere (the API-key boundary, the guard, the errors
 * plugin, no-store, tracing, the pages): its path and its query, without a URL object.
 *
 * Bun builds `request.url` from the Host header. For a Host that is not a host (`a/b`, `a@b`,
 * `a\b`, `a b`) or none at all (HTTP/1.0) it hands over a bare path ("/api/auth/refresh", no
 * scheme or host), which `new URL` refuses and which once read "/auth/refresh" to a boundary that
 * looked for "//". `hasServableHost` (the first check of every request, http/request-context.ts)
 * answers those 400 before any route, so past it every URL is absolute; `requestPath` reads a bare
 * one all the same, for what runs before that check (tracing's wrapper, no-store).
 */

/** Where the path starts: after the scheme and authority, or at once in a bare path. */
function pathStart(url: string): number {
  if (url.charCodeAt(0) === 47 /* / */) return 0;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  return start === -1 ? url.length : start;
}

/** The query's start (its "?"), or the URL's end. */
function queryStart(url: string, from: number): number {
  const query = url.indexOf("?", from);
  return query === -1 ? url.length : query;
}

/**
 * The request's path without its query, below `basePath` when it lies under it (else the whole
 * path, which no route of the app answers): "/api/users/7" for "http://h/svc/api/users/7?x=1" under "/svc".
 */
export function requestPath(url: string, basePath = ""): string {
  const start = pathStart(url);
  const path = url.slice(start, queryStart(url, start)) || "/";
  if (basePath === "" || !path.startsWith(basePath)) return path;
  const below = path.slice(basePath.length);
  return below === "" ? "/" : below.charCodeAt(0) === 47 ? below : path;
}

/** The request's query string, without its "?" ("" for none). */
export function requestQuery(url: string): string {
  const query = queryStart(url, pathStart(url));
  if (query === url.length) return "";
  const fragment = url.indexOf("#", query);
  return url.slice(query + 1, fragment === -1 ? undefined : fragment);
}

/** A table of the ASCII characters in `chars` (ranges as `0-9`; a `-` last stands for itself). */
function charTable(chars: string): Uint8Array {
  const table = new Uint8Array(128);
  for (let i = 0; i < chars.length; i++) {
    if (chars[i + 1] === "-" && i + 2 < chars.length) {
      for (let c = chars.charCodeAt(i); c <= chars.charCodeAt(i + 2); c++) table[c] = 1;
      i += 2;
    } else table[chars.charCodeAt(i)] = 1;
  }
  return table;
}

/** A host name's characters (RFC 3986 reg-name: unreserved, sub-delims, %-escapes; so `_` and a trailing dot), and an IP literal's inside its brackets. */
const NAME = charTable("0-9A-Za-z._~!$&'()*+,;=%-");
const LITERAL = charTable("0-9A-Za-z:.%~_-");
const allowed = (table: Uint8Array, c: number) => c < 128 && table[c] === 1;

/** Whether `text` from `start` to `end` is a host: an IP literal in brackets or a name, then perhaps `:` and a port of 1–65535 (or none). */
function isHost(text: string, start: number, end: number): boolean {
  let i = start;
  if (text.charCodeAt(i) === 91 /* [ */) {
    const close = text.indexOf("]", i);
    if (close === -1 || close >= end || close === i + 1) return false;
    for (i++; i < close; i++) if (!allowed(LITERAL, text.charCodeAt(i))) return false;
    i++;
  } else {
    for (; i < end && text.charCodeAt(i) !== 58; /* : */ i++) if (!allowed(NAME, text.charCodeAt(i))) return false;
  }
  if (i === end) return true;
  if (text.charCodeAt(i) !== 58) return false;
  let port = 0;
  for (i++; i < end; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return false;
    port = port * 10 + digit;
    if (port > 65535) return false;
  }
  // "host:" names no port (RFC 3986 allows the empty one); "host:0" names port 0.
  return port >= 1 || text.charCodeAt(end - 1) === 58;
}

/**
 * Whether a request can be served as addressed. Bun builds its URL from the Host header: a bare
 * path when it could not read the Host as one (`a/b`, `a@b`, `a\b`, `a b`, a control or non-ASCII
 * character) or there was none (HTTP/1.0); otherwise the Host (lower-cased, a default port dropped)
 * is the URL's authority, where what Bun lets through (`x:0`, `x:65536`, `[::1`) is read here.
 * A scan of the URL in place, with no header read and nothing allocated: every request pays it.
 */
export function hasServableHost(request: Request): boolean {
  const url = request.url;
  if (url.charCodeAt(0) === 47 /* / */) return false;
  const start = url.indexOf("//") + 2;
  const end = url.indexOf("/", start);
  return isHost(url, start, end === -1 ? url.length : end);
}
