/**
 * Cross-field rules (confirmPassword equals password, a price's fraction digits) are `refine`
 * functions on a body schema, which Elysia does not know about: it checks only the TypeBox part.
 * This one global hook runs them for every route whose body schema declares any, once the
 * guard has let the caller through and TypeBox has accepted the body, so no route can forget them.
 */
import { Elysia, type TSchema } from "elysia";
import { Violations } from "../errors";
import { hasRefinements, refinementViolationsOf } from "../validation";
import type { RouteTable } from "./route-table";

export const refinements = (routes: RouteTable) => {
  // Per route and method: the body schema when it has refinements, else null (decided once).
  const refined = new Map<string, TSchema | null>();
  const schemaOf = (method: string, route: string) => {
    const key = `${method} ${route}`;
    let schema = refined.get(key);
    if (schema === undefined) {
      const body = routes.schemaOf(method, route, "body");
      schema = body && hasRefinements(body) ? body : null;
      refined.set(key, schema);
    }
    return schema;
  };
  return new Elysia({ name: "refinements" }).onBeforeHandle({ as: "global" }, ({ request, route, body }) => {
    // No body, nothing to refine: a read builds no route key.
    if (body === undefined) return;
    const schema = schemaOf(request.method, route);
    if (!schema) return;
    const violations = refinementViolationsOf(schema, body);
    if (violations.length > 0) throw new Violations("body", violations);
  });
};
