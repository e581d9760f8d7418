/** Feature folder sessions/: the signed-in devices a user (or an ADMIN) can list and end. */
/**
 * /api/account/sessions (self-service, any signed-in caller) and /api/users/{id}/sessions
 * (ADMIN). Lists are bare arrays; ending answers 204.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { errorResponses } from "../../http/route-docs";
import { UserIdParams, userId } from "../../models/user";
import { Session, SessionIdParams, UserSessionParams } from "./model";
import { endOtherSessions, endSession, listSessions, listUserSessions } from "./service";

export const sessionsRoutes = (ctx: AppContext) =>
  new Elysia({ tags: ["Sessions"] })
    .use(ctx.auth)
    .get("/api/account/sessions", ({ caller }) => listSessions(ctx, caller.id, caller), {
      access: { allow: "authenticated" },
      sample: (walk: Walk) => ({ path: "/api/account/sessions", token: walk.sessions.device, status: 200 }),
      response: { 200: t.Array(Session), ...errorResponses(401, 503) },
      detail: { summary: "The caller's open sessions", description: "Most recent activity first." },
    })
    .post(
      "/api/account/sessions/revoke-others",
      async ({ caller, set }) => {
        await endOtherSessions(ctx, caller);
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/account/sessions/revoke-others", token: walk.sessions.another, status: 204 }),
        response: { 204: t.Void(), ...errorResponses(401, 503) },
        detail: { summary: "End the caller's other sessions" },
      },
    )
    .delete(
      "/api/account/sessions/:id",
      async ({ caller, params, set }) => {
        await endSession(ctx, caller.id, params.id, caller);
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: `/api/account/sessions/${walk.sessions.endedSid}`, token: walk.sessions.device, status: 204 }),
        params: SessionIdParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 404, 503) },
        detail: { summary: "End one of the caller's sessions", description: "Its tokens are refused at once." },
      },
    )
    .get("/api/users/:id/sessions", ({ caller, params }) => listUserSessions(ctx, userId(params), caller), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.sessions.ownerId}/sessions`, status: 200 }),
      params: UserIdParams,
      response: { 200: t.Array(Session), ...errorResponses(400, 401, 403, 404, 503) },
      detail: { summary: "A user's open sessions" },
    })
    .delete(
      "/api/users/:id/sessions/:sid",
      async ({ caller, params, set }) => {
        await endSession(ctx, userId(params), params.sid, caller);
        set.status = 204;
      },
      {
        access: { allow: "ADMIN" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.sessions.ownerId}/sessions/${walk.sessions.endedByAdminSid}`, status: 204 }),
        params: UserSessionParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 503) },
        detail: { summary: "End one of a user's sessions" },
      },
    );
