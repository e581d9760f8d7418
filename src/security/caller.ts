/** Who is calling (the access guard's finding) and the access rules routes declare. */

export type RoleName = "USER" | "ADMIN";
/** SELF_OR_ADMIN: the user named by the route's `:id` segment, or an ADMIN (PATCH a user, profiles). */
export type AccessRule = "authenticated" | RoleName | "SELF_OR_ADMIN";

export interface Caller {
  id: number;
  email: string;
  roles: RoleName[];
  /** The version the caller's token carries (current, or the guard would have refused it). */
  tokenVersion: number;
  /** The session of a session token (its id and absolute end, ms); tokens without `sid` have none. */
  session?: { id: string; expiresAt: number };
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
