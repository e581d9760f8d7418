/** Operational endpoints: /actuator/** (Spring Boot actuator shapes) and /api/version. */
import { Elysia, t } from "elysia";
import { sql } from "drizzle-orm";
import type { AppContext } from "../../context";

export const actuatorRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/actuator", tags: ["Operations"] } as never).get(
    "/health",
    async ({ set }) => {
      try {
        await ctx.db.run(sql`select 1`);
        return { status: "UP" as const };
      } catch {
        set.status = 503;
        return { status: "DOWN" as const };
      }
    },
    { response: { 200: t.Object({ status: t.Literal("UP") }), 503: t.Object({ status: t.Literal("DOWN") }) }, detail: { summary: "Overall health" } },
  );
