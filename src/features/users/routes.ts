/** /api/users: thin HTTP over the users service, with the interface's access rules. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { errorResponses } from "../../envelope";
import { documentedHeaders } from "../docs/headers";
import { User, UserBody, UserIdParams, UserListQuery, UserPatch } from "./model";
import { createUser, deleteUser, findUser, listUsers, patchUser, replaceUser, revokeAccessTokens, setActive } from "./service";
import { filterUsers } from "../search/service";

const TRIMMED = new Set(["name", "email", "department"]);

/**
 * PUT/PATCH send null for "not given"; dropping nulls before validation keeps one schema.
 * Names, e-mails and departments are stored trimmed, so they are trimmed before the rules
 * check them too (" A " would otherwise pass as 3 characters and be stored as 1).
 */
const normalizeBody = ({ body }: { body: unknown }) => {
  if (body && typeof body === "object" && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>;
    for (const [key, value] of Object.entries(fields)) {
      if (value === null) delete fields[key];
      else if (typeof value === "string" && TRIMMED.has(key)) fields[key] = value.trim();
    }
  }
};

/** Every single-user answer carries ETag: "<version>", ready for the next If-Match. */
const tagged = (set: { headers: Record<string, unknown> }, user: User) => {
  set.headers.etag = `"${user.version}"`;
  return user;
};

const errors = errorResponses(400, 401, 403, 404, 409);

export const usersRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/users", tags: ["Users"] })
    .use(ctx.auth)
    .get(
      "",
      async ({ query, set }) => {
        // The seed's list is a prepared hot path; the console's filters go through the search.
        const filtered = [query.name, query.email, query.department].some((v) => v?.trim()) || (query.active ?? "any") !== "any";
        const { users, total } = filtered ? await filterUsers(ctx.db, query) : await listUsers(ctx.db, query);
        set.headers["x-total-count"] = String(total);
        return users;
      },
      {
        auth: "USER",
        query: UserListQuery,
        response: { 200: t.Array(User), ...errors },
        detail: {
          summary: "List users",
          description:
            "Every user, or one page when page or size is given. Optional filters: name and email (substrings, case-insensitive), department (its name), " +
            "active (true, false or any). The total of the matching users is in X-Total-Count.",
          ...documentedHeaders({ 200: ["X-Total-Count"] }),
        },
      },
    )
    .get("/:id", async ({ params, set }) => tagged(set, await findUser(ctx.db, params.id)), {
      auth: "authenticated",
      params: UserIdParams,
      response: { 200: User, ...errors },
      detail: { summary: "Get a user", description: 'Sends ETag: "<version>" for If-Match.', ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .post(
      "",
      async ({ body, caller, set }) => {
        set.status = 201;
        return tagged(set, await createUser(ctx, body, caller.email));
      },
      {
        auth: "ADMIN",
        body: UserBody,
        transform: normalizeBody,
        response: { 201: User, ...errors },
        detail: { summary: "Create a user", ...documentedHeaders({ 201: ["ETag"] }) },
      },
    )
    .put("/:id", async ({ params, body, request, set }) => tagged(set, await replaceUser(ctx, params.id, body, request.headers.get("if-match"))), {
      auth: "ADMIN",
      params: UserIdParams,
      body: UserBody,
      transform: normalizeBody,
      response: { 200: User, ...errors },
      detail: { summary: "Replace a user's name, email and department", ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .patch("/:id", async ({ params, body, request, set }) => tagged(set, await patchUser(ctx, params.id, body, request.headers.get("if-match"))), {
      auth: "SELF_OR_ADMIN",
      params: UserIdParams,
      body: UserPatch,
      transform: normalizeBody,
      response: { 200: User, ...errors },
      detail: { summary: "Change some of a user's name, email and department", description: "The user themself or an ADMIN.", ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .delete(
      "/:id",
      async ({ params, caller, set }) => {
        await deleteUser(ctx, params.id, caller.email);
        set.status = 204;
      },
      { auth: "ADMIN", params: UserIdParams, response: { 204: t.Void(), ...errors }, detail: { summary: "Delete a user" } },
    )
    .post("/:id/activate", async ({ params, caller, set }) => tagged(set, await setActive(ctx, params.id, true, caller.email)), {
      auth: "ADMIN",
      params: UserIdParams,
      response: { 200: User, ...errors },
      detail: { summary: "Activate a user", description: "The user may log in again (version +1). Already active: unchanged.", ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .post("/:id/deactivate", async ({ params, caller, set }) => tagged(set, await setActive(ctx, params.id, false, caller.email)), {
      auth: "ADMIN",
      params: UserIdParams,
      response: { 200: User, ...errors },
      detail: {
        summary: "Deactivate a user",
        description:
          "The user can no longer log in (403 ACCOUNT_DISABLED) and every token issued to them stops working (401). Version +1. " +
          "The last active ADMIN cannot be deactivated: 409 LAST_ADMIN.",
        ...documentedHeaders({ 200: ["ETag"] }),
      },
    })
    .post(
      "/:id/revoke-tokens",
      async ({ params, caller, set }) => {
        await revokeAccessTokens(ctx, params.id, caller.email);
        set.status = 204;
      },
      {
        auth: "ADMIN",
        params: UserIdParams,
        response: { 204: t.Void(), ...errors },
        detail: { summary: "Revoke a user's tokens", description: "Every token issued to the user so far stops working (401); they may log in again." },
      },
    );
