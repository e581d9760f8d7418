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
 * What a route declares with the `auth` macro: its access rule alone (API keys refused:
 * 403 API_KEY_NOT_ALLOWED), or the rule and the area an API key needs a scope of
 * (`auth: ["authenticated", "orders"]`). `grep -rn "auth:" src/features` is the table.
 * A route that answers the user of its `:id` adds `{ readsUser: true }`: the guard reads that user
 * in the caller's statement (store/users.ts withUserById) and hands it over as `userReadAlong`.
 * A route a key may call, but whose body can also change who holds power, names those body fields
 * in `keysMayNotSend`: a key's request that sends any of them (not null) is refused whole.
 */
export type AccessDeclaration = AccessRule | readonly [AccessRule, Area] | readonly [AccessRule, Area, RouteOptions];
export interface RouteOptions {
  readsUser?: true;
  keysMayNotSend?: readonly string[];
  /**
   * A client acting as itself (client_credentials) has no user row. It is refused (403
   * CLIENT_WITHOUT_USER) on every route but those declaring `withoutUser`: they read nothing of the
   * caller's own and write nothing in the caller's name (no order, upload or profile of user 0).
   */
  withoutUser?: true;
}

/** The scope a request of `method` on an area needs. */
export const scopeFor = (area: Area, method: string): Scope => `${area}:${method === "GET" || method === "HEAD" ? "read" : "write"}`;

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
