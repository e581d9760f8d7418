/** Who is calling (the access guard's finding) and the access rules routes declare. */

export type RoleName = "USER" | "ADMIN";
/** SELF_OR_ADMIN: the user named by the route's `:id` segment, or an ADMIN (PATCH a user, profiles). */
export type AccessRule = "authenticated" | RoleName | "SELF_OR_ADMIN";

/** The areas an API key's scopes name (docs/security.md, "API keys"): a GET needs `<area>:read`, anything else `<area>:write`. */
export const AREAS = ["users", "files", "orders", "products"] as const;
export type Area = (typeof AREAS)[number];
export type Scope = `${Area}:${"read" | "write"}`;
export const SCOPES = AREAS.flatMap((area) => [`${area}:read`, `${area}:write`] as const) as Scope[];

/**
 * What a route declares about who may call it, once, on its options or on a group's
 * (`access: { allow: "ADMIN", scope: "users:write" }`); the guard (guard.ts) reads it when the
 * route is registered, never per request. A route without `access` is open. The whole-surface
 * tests check every declaration against the rules by path in test/support/access-rules.ts
 * (docs/contributing.md, "Who may call a route").
 */
export interface Access {
  /** Who: any valid bearer ("authenticated"), a role (ADMIN includes USER), or the user the route's `:id` names or an ADMIN ("SELF_OR_ADMIN"). */
  allow: AccessRule;
  /**
   * The scope an API key (or a client's access token) must hold to call the route: `<area>:read`
   * for GET, `<area>:write` otherwise. Without one, keys and client tokens are refused (403
   * API_KEY_NOT_ALLOWED); a key still acts as its owner, who must pass `allow` too.
   */
  scope?: Scope;
  /** Body fields that change who holds power: a key's request that gives any of them a value (not null) is refused whole (403 API_KEY_NOT_ALLOWED). */
  keysMayNotSend?: readonly string[];
  /**
   * A client acting as itself (client_credentials) has no user row. It is refused (403
   * CLIENT_WITHOUT_USER) on every route but those declaring `withoutUser`: they read nothing of the
   * caller's own and write nothing in the caller's name (no order, upload or profile of user 0).
   */
  withoutUser?: true;
  /** The route answers the user its `:id` names: the guard reads that user in the caller's own statement (store/users.ts withUserById) and hands it over as `userReadAlong`. */
  readsUser?: true;
}

export interface Caller {
  id: number;
  email: string;
  roles: RoleName[];
  /** The version the caller's token carries (current, or the guard would have refused it). */
  tokenVersion: number;
  /** The session of a session token (its id and absolute end, ms); tokens without `sid` have none. */
  session?: { id: string; expiresAt: number; amr?: string[] };
  /** An API key's caller: the owner narrowed to the key's scopes (src/security/api-keys.ts). */
  apiKey?: { id: number; scopes: readonly string[]; lastUsedAt: number | null };
  /**
   * A client's access token (OpenID Provider): the user, or for client_credentials the client acting
   * as USER at most (`withoutUser`, id 0: no user row), narrowed to the token's scopes as an API key is.
   */
  client?: { clientId: string; scopes: readonly string[]; withoutUser?: true };
  /** MFA_REQUIRED_ROLES: the session signed in without the second factor its role requires, and may only enrol one. */
  enrolOnly?: boolean;
  /** When the caller's sign-in happened (seconds), from the token; unknown for tokens without a session. */
  authTime?: number;
}

export const isAdmin = (caller: Caller) => caller.roles.includes("ADMIN");

/** ADMIN includes USER. `pathId` is the route's raw `:id` segment, for SELF_OR_ADMIN. */
export function satisfies(caller: Caller, rule: AccessRule, pathId?: string): boolean {
  if (rule === "authenticated") return true;
  if (isAdmin(caller)) return true;
  if (rule === "SELF_OR_ADMIN") return pathId === String(caller.id);
  return caller.roles.includes(rule);
}
