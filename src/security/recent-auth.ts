/**
 * Recent authentication: adding a factor or a passkey, creating an API key and the like need a
 * sign-in within the last 10 minutes (the token's auth_time), so a token left in a browser or a
 * log cannot be turned into a lasting foothold. A token without a session carries no sign-in time
 * and never counts as recent.
 */
import { AppError } from "../errors";
import type { Caller } from "./caller";

export const RECENT_AUTH_WINDOW_S = 600;

export function requireRecentAuth(caller: Caller, nowMs: number): void {
  if (caller.authTime === undefined || Math.floor(nowMs / 1000) - caller.authTime > RECENT_AUTH_WINDOW_S) throw new AppError("REAUTHENTICATION_REQUIRED");
}
