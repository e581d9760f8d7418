/** What every screen needs, handed down once by <App>: the API, texts, formatters and navigation. */
import { createContext } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import type { Api } from "./api";
import type { formatters, Lang, Translate } from "./i18n";

export interface Console {
  api: Api;
  lang: Lang;
  t: Translate;
  fmt: ReturnType<typeof formatters>;
  /** Says something to the reader in the page's live region (success of an action). */
  announce(message: string): void;
}

// Cast: the provider always wraps the app, so no screen reads the context without a value.
export const ConsoleContext = createContext<Console>(undefined as never);
export const useConsole = () => useContext(ConsoleContext);

/** Where the console is: the part of location.hash after "#", split into path and query. */
export interface Route {
  path: string;
  query: URLSearchParams;
}

const readRoute = (): Route => {
  const [path = "", query = ""] = location.hash.replace(/^#/, "").split("?");
  return { path: path || "/users", query: new URLSearchParams(query) };
};

/** Hash routing: the server serves one page at /admin, so every screen is an address under it. */
export function useRoute(): Route {
  const [route, setRoute] = useState(readRoute);
  useEffect(() => {
    const changed = () => setRoute(readRoute());
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}

export const href = (path: string, query?: Record<string, string | number | undefined>) => {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) if (value !== undefined && value !== "") params.set(key, String(value));
  const text = params.toString();
  return `#${path}${text ? `?${text}` : ""}`;
};

export const navigate = (path: string, query?: Record<string, string | number | undefined>) => {
  location.hash = href(path, query);
};
