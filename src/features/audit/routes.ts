/** Feature folder audit/: reading the audit trail (GET /api/audit); every feature writes it through store/audit.ts. */
/** /api/audit: the audit trail, for ADMIN only. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { AuditEntry, AuditQuery } from "./model";
import { listAudit } from "./service";

export const auditRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/audit", tags: ["Audit"] }).use(ctx.auth).get(
    "",
    async ({ query, set }) => {
      const { entries, total } = await listAudit(ctx.db, query);
      set.headers["x-total-count"] = String(total);
      return entries;
    },
    {
      access: { allow: "ADMIN" },
      sample: () => ({ path: "/api/audit", status: 200 }),
      query: AuditQuery,
      response: { 200: t.Array(AuditEntry), ...errorResponses(400, 401, 403) },
      detail: {
        summary: "Read the audit log",
        description: "Newest first, paged (page from 0, size up to 100), optionally of one action. Total in X-Total-Count.",
        ...documentedHeaders({ 200: ["X-Total-Count"] }),
      },
    },
  );
