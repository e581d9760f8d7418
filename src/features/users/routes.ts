/** Feature folder users/: the /api/users resource: list, read, create, change, activate, deactivate, revoke tokens, delete. */
/** /api/users: thin HTTP over the users service, with the interface's access rules. */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import type { Walk } from "../../http/route-sample";
import { clientAddress } from "../../http/client-address";
import { documentedHeaders, errorResponses } from "../../http/route-docs";
import { User, UserIdParams, UserList, userId } from "../../models/user";
import type { MaybePromise } from "../../maybe-promise";
import type { Caller } from "../../security/caller";
import { withPasswordPolicy } from "../../security/password-policy";
import { UserBody, UserListQuery, UserPatch } from "./model";
import { type Actor, createUser, deleteUser, getUser, mayChange, patchUser, replaceUser, revokeBearerTokens, setActive, unlockSignIn, usersFor } from "./service";

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

/**
 * What an API key may not send, whatever its scopes: it never sets a password, an account's state
 * or its roles (those two are no fields of ours, and would be dropped unseen; sent by a key, they refuse
 * the request whole). Moving an e-mail is refused in the change itself (service.ts applyUpdate).
 */
const KEYS_MAY_NOT_SEND = ["password", "active", "roles"];
const BY_KEY = "An API key may not send password, active or roles, nor change the e-mail: 403 API_KEY_NOT_ALLOWED, nothing changed. ";

type ChangeBody = Parameters<typeof mayChange>[3];
interface ChangeContext<B> {
  params: { id: number | string };
  body: B;
  caller: Caller;
  request: Request;
  server: Parameters<typeof clientAddress>[0];
  set: { headers: Record<string, unknown> };
}

/** PUT's and PATCH's handler: may the caller change this (mayChange), then the change, answered with its ETag. */
const changeUser =
  <B extends ChangeBody>(ctx: AppContext, apply: (deps: AppContext, id: number, body: B, ifMatch: string | null, actor: Actor) => Promise<User>) =>
  async ({ params, body, caller, request, server, set }: ChangeContext<B>) => {
    const id = userId(params);
    await mayChange(ctx, caller, id, body, () => clientAddress(server, request, ctx.config.trustProxy));
    return tagged(set, await apply(ctx, id, body, request.headers.get("if-match"), caller));
  };
/** What PUT and PATCH share besides their body. */
const changeRoute = { params: UserIdParams, transform: normalizeBody, response: { 200: User, ...errors, ...errorResponses(429) } };

const OWN_EMAIL =
  "Changing one's own e-mail address needs currentPassword (400 on that field when absent or wrong; wrong ones count as failed logins, 429 after too many), " +
  "or, for an account without a password, a stepUpToken (403 INVALID_STEP_UP when wrong, used or expired). " +
  "An e-mail change ends every token issued to the user so far, the caller's own included (they sign in again with the new address), " +
  "and mails EMAIL_CHANGED to the old address. ";
const PASSWORD_BY_ADMIN = "An ADMIN's password sets it and ends every token issued to the user so far; from anyone else it is a 400.";

export const usersRoutes = (ctx: AppContext) =>
  new Elysia({ prefix: "/api/users", tags: ["Users"] })
    .use(ctx.auth)
    .get(
      "",
      async ({ query, set }) => {
        const { users, total } = await usersFor(ctx.db, query);
        set.headers["x-total-count"] = String(total);
        return users;
      },
      {
        access: { allow: "USER", scope: "users:read", withoutUser: true },
        sample: () => ({ path: "/api/users", status: 200 }),
        query: UserListQuery,
        response: { 200: UserList, ...errors },
        detail: {
          summary: "List users",
          description:
            "Every user, or one page when page or size is given. Optional filters: name and email (substrings, case-insensitive), department (its name), " +
            "active (true, false or any). The total of the matching users is in X-Total-Count.",
          ...documentedHeaders({ 200: ["X-Total-Count"] }),
        },
      },
    )
    .get(
      "/:id",
      // Not an async function: its promise and the await of it cost ~1 µs of the ~46 a served read
      // takes (wrk, server CPU per request), and the user is usually here already. Elysia awaits
      // what a handler returns whenever its source calls something in a return, as this one does,
      // so getUser's promise is awaited (the 404 tests go through it).
      ({ params, set, userReadAlong }): MaybePromise<User> => {
        const id = userId(params);
        // Read by the guard in its own statement (readsUser); when the guard found none, getUser answers 404.
        const read = userReadAlong?.id === id ? userReadAlong.user : undefined;
        if (read) return tagged(set, read);
        return getUser(ctx.db, id).then((user) => tagged(set, user));
      },
      {
        access: { allow: "authenticated", scope: "users:read", readsUser: true, withoutUser: true },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}`, status: 200 }),
        params: UserIdParams,
        response: { 200: User, ...errors },
        detail: { summary: "Get a user", description: 'Sends ETag: "<version>" for If-Match.', ...documentedHeaders({ 200: ["ETag"] }) },
      },
    )
    .post(
      "",
      async ({ body, caller, set }) => {
        set.status = 201;
        return tagged(set, await createUser(ctx, body, caller.email));
      },
      {
        access: { allow: "ADMIN", scope: "users:write", keysMayNotSend: KEYS_MAY_NOT_SEND },
        sample: () => ({ path: "/api/users", body: { name: "Walk User", email: "walk@example.com", password: "Passw0rd!" }, status: 201 }),
        body: withPasswordPolicy(UserBody, ctx.config.passwordPolicy),
        transform: normalizeBody,
        response: { 201: User, ...errors },
        detail: { summary: "Create a user", description: "An API key may not send password or roles: 403 API_KEY_NOT_ALLOWED.", ...documentedHeaders({ 201: ["ETag"] }) },
      },
    )
    .put("/:id", changeUser(ctx, replaceUser), {
      access: { allow: "ADMIN", scope: "users:write", keysMayNotSend: KEYS_MAY_NOT_SEND },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}`, body: { name: "Mei Lin", email: walk.registered.email, department: "Walkers" }, status: 200 }),
      body: withPasswordPolicy(UserBody, ctx.config.passwordPolicy),
      ...changeRoute,
      detail: { summary: "Replace a user's name, email and department", description: OWN_EMAIL + PASSWORD_BY_ADMIN + BY_KEY, ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .patch("/:id", changeUser(ctx, patchUser), {
      access: { allow: "SELF_OR_ADMIN", scope: "users:write", keysMayNotSend: KEYS_MAY_NOT_SEND },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}`, body: { name: "Mei Lin" }, status: 200 }),
      body: withPasswordPolicy(UserPatch, ctx.config.passwordPolicy),
      ...changeRoute,
      detail: {
        summary: "Change some of a user's name, email and department",
        description: `The user themself or an ADMIN. ${OWN_EMAIL}${PASSWORD_BY_ADMIN}${BY_KEY}`,
        ...documentedHeaders({ 200: ["ETag"] }),
      },
    })
    .delete(
      "/:id",
      async ({ params, caller, set }) => {
        await deleteUser(ctx, userId(params), caller.email);
        set.status = 204;
      },
      // No API key deletes, activates or deactivates an account (no area: 403 API_KEY_NOT_ALLOWED).
      {
        access: { allow: "ADMIN" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.doomedUserId}`, status: 204 }),
        params: UserIdParams,
        response: { 204: t.Void(), ...errors },
        detail: { summary: "Delete a user" },
      },
    )
    .post("/:id/activate", async ({ params, caller, set }) => tagged(set, await setActive(ctx, userId(params), true, caller.email)), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/activate`, status: 200 }),
      params: UserIdParams,
      response: { 200: User, ...errors },
      detail: { summary: "Activate a user", description: "The user may log in again (version +1). Already active: unchanged.", ...documentedHeaders({ 200: ["ETag"] }) },
    })
    .post("/:id/deactivate", async ({ params, caller, set }) => tagged(set, await setActive(ctx, userId(params), false, caller.email)), {
      access: { allow: "ADMIN" },
      sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/deactivate`, status: 200 }),
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
        await revokeBearerTokens(ctx, userId(params), caller.email);
        set.status = 204;
      },
      {
        access: { allow: "ADMIN", scope: "users:write" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/revoke-tokens`, status: 204 }),
        params: UserIdParams,
        response: { 204: t.Void(), ...errors },
        detail: { summary: "Revoke a user's tokens", description: "Every token issued to the user so far stops working (401); they may log in again." },
      },
    )
    .post(
      "/:id/unlock",
      async ({ params, caller, set }) => {
        await unlockSignIn(ctx, userId(params), caller.email);
        set.status = 204;
      },
      {
        access: { allow: "ADMIN" },
        sample: (walk: Walk) => ({ path: `/api/users/${walk.registered.id}/unlock`, status: 204 }),
        params: UserIdParams,
        response: { 204: t.Void(), ...errors },
        detail: {
          summary: "Lift a user's sign-in lockout",
          description:
            "Clears the failed-login counts of the user's e-mail on every network and its global lockout (LOGIN_MAX_FAILURES_GLOBAL), so they may sign in at once. Audited USER_UNLOCKED.",
        },
      },
    );
