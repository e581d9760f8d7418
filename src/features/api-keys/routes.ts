/** Feature folder api-keys/: keys for scripts and integrations, narrowed by scopes (docs/security.md, "API keys"). */
/**
 * /api/account/api-keys (the caller's own; creation needs a sign-in within 10 minutes) and
 * /api/users/{id}/api-keys (ADMIN). No route here takes a key itself: managing keys needs a sign-in.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { errorResponses } from "../../http/route-docs";
import { UserIdParams, userId } from "../../models/user";
import { queryInteger } from "../../validation";
import { ApiKey, ApiKeyIdParams, CreateApiKeyBody, CreatedApiKey, UserApiKeyParams } from "./model";
import { createKey, listKeys, listUserKeys, revokeKey } from "./service";

export const apiKeysRoutes = (ctx: AppContext) =>
  new Elysia({ tags: ["API keys"] })
    .use(ctx.auth)
    .post(
      "/api/account/api-keys",
      async ({ caller, body, set }) => {
        set.status = 201;
        return createKey(ctx, caller, body);
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: "/api/account/api-keys", body: { name: "walk key", scopes: ["users:read"] }, token: walk.adminSignedIn, status: 201 }),
        body: CreateApiKeyBody,
        response: { 201: CreatedApiKey, ...errorResponses(400, 401, 403, 409, 503) },
        detail: {
          summary: "Create an API key for the caller",
          description:
            "The key (`usk_<prefix>_<secret>`) is in this answer only; it is mailed as API_KEY_CREATED without it. Needs a sign-in within the last 10 minutes (403 REAUTHENTICATION_REQUIRED); 409 TOO_MANY_API_KEYS past API_KEY_MAX_PER_USER.",
        },
      },
    )
    .get("/api/account/api-keys", ({ caller }) => listKeys(ctx, caller.id), {
      access: { allow: "authenticated" },
      sample: () => ({ path: "/api/account/api-keys", status: 200 }),
      response: { 200: t.Array(ApiKey), ...errorResponses(401, 403, 503) },
      detail: { summary: "The caller's API keys", description: "Oldest first; never a key or its hash." },
    })
    .delete(
      "/api/account/api-keys/:id",
      async ({ caller, params, set }) => {
        await revokeKey(ctx, caller.id, queryInteger(params.id) as number, caller);
        set.status = 204;
      },
      {
        access: { allow: "authenticated" },
        sample: (walk: Walk) => ({ path: `/api/account/api-keys/${walk.apiKeys.ownKeyId}`, status: 204 }),
        params: ApiKeyIdParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 503) },
        detail: { summary: "Revoke one of the caller's API keys", description: "Refused at once. 404 API_KEY_NOT_FOUND for another user's or an unknown key." },
      },
    )
    .get("/api/users/:id/api-keys", ({ params }) => listUserKeys(ctx, userId(params)), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.sessions.ownerId}/api-keys`, status: 200 }),
      params: UserIdParams,
      response: { 200: t.Array(ApiKey), ...errorResponses(400, 401, 403, 404, 503) },
      detail: { summary: "A user's API keys" },
    })
    .delete(
      "/api/users/:id/api-keys/:keyId",
      async ({ caller, params, set }) => {
        await revokeKey(ctx, userId(params), queryInteger(params.keyId) as number, caller);
        set.status = 204;
      },
      {
        access: { allow: "ADMIN" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.sessions.ownerId}/api-keys/${walk.apiKeys.ownersKeyId}`, status: 204 }),
        params: UserApiKeyParams,
        response: { 204: t.Void(), ...errorResponses(400, 401, 403, 404, 503) },
        detail: { summary: "Revoke one of a user's API keys" },
      },
    );
