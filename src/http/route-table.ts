/**
 * What the errors plugin needs to know about the app's routes, built on first use:
 * which methods a path serves (405 versus 404) and the query / params schema of a route
 * (Elysia reports a bad query value without its name, so we re-check the whole query), and the
 * body schema of a route (for its cross-field rules).
 */
import type { AnyElysia, TSchema } from "elysia";

export interface RouteTable {
  methodsFor(pathname: string): string[];
  schemaOf(method: string, route: string, part: "query" | "params" | "headers" | "body"): TSchema | undefined;
}

export function routeTable(app: () => AnyElysia): RouteTable {
  let compiled: { method: string; path: string; pattern: RegExp; hooks: Record<string, unknown> }[] | undefined;
  const table = () =>
    (compiled ??= app().routes.map((r) => ({
      method: r.method,
      path: r.path,
      hooks: r.hooks as Record<string, unknown>,
      pattern: new RegExp(
        `^${r.path
          .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
          .replace(/\/:[^/]+/g, "/[^/]+")
          .replace(/\/\*$/, "/.*")}/?$`,
      ),
    })));
  return {
    methodsFor(pathname) {
      const methods = new Set(
        table()
          .filter((r) => r.pattern.test(pathname))
          .map((r) => r.method),
      );
      if (methods.has("GET")) methods.add("HEAD");
      return [...methods];
    },
    schemaOf(method, route, part) {
      return table().find((r) => r.method === method && r.path === route)?.hooks[part] as TSchema | undefined;
    },
  };
}
