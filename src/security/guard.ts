/**
 * The one access guard. Routes declare who may call them with the `auth` macro
 * (`{ auth: "authenticated" | "USER" | "ADMIN" }`, usually on a group); the guard turns the
 * bearer token into a `caller` or answers 401 / 403 through the errors plugin.
 * A token counts only if it verifies, its subject exists and is active, it carries the
 * user's current token version, and it was issued to that account. A session token (`sid`)
 * resolves through its session, which must be open (store/sessions.ts), to the user; a token
 * without one names its account by `uid`, or (naming none) was issued after the account's e-mail
 * last changed. Either way it is one read.
 */
import { Elysia } from "elysia";
import type { Reader } from "../db/database";
import { AppError } from "../errors";
import { requestState } from "../http/request-state";
import { tokenHolder } from "../store/users";
import { isOpen, sessionHolder } from "../store/sessions";
import type { TokenClaims, Tokens } from "./bearer-tokens";
import type { SessionActivity } from "./session-activity";
import { satisfies, type AccessRule, type Caller, type RoleName } from "./caller";

export const unauthorized = () => new AppError("UNAUTHORIZED", {}, { headers: { "www-authenticate": "Bearer" } });

/** The word after "Bearer " (any case), up to the next space: what `header.split(" ")`'s second part was, without the array. */
export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get("authorization");
  if (!header) return undefined;
  const space = header.indexOf(" ");
  if (space !== 6) return undefined;
  const end = header.indexOf(" ", 7);
  const token = end < 0 ? header.slice(7) : header.slice(7, end);
  return token && header.slice(0, 6).toLowerCase() === "bearer" ? token : undefined;
}

export interface Authenticator {
  /** The caller behind the request's bearer token, or undefined. */
  callerOf(request: Request): Promise<Caller | undefined>;
}

const seconds = (instant: Date) => Math.floor(instant.getTime() / 1000);

const rolesOf = (roles: string | null) => (roles?.split(",") ?? []) as RoleName[];

export interface SessionRules {
  now: () => number;
  idleMs: number;
  activity: SessionActivity;
}

export function createAuthenticator(db: Reader, tokens: Tokens, sessions: SessionRules): Authenticator {
  async function sessionCaller(claims: TokenClaims & { sid: string }): Promise<Caller | undefined> {
    const session = await sessionHolder(db, claims.sid);
    const now = sessions.now();
    if (!session || !isOpen(session, now, sessions.idleMs) || session.tokenVersion !== claims.ver) return undefined;
    sessions.activity.seen(claims.sid, session.lastSeenAt, now);
    return {
      id: session.userId,
      email: session.email,
      roles: rolesOf(session.roles),
      tokenVersion: session.tokenVersion,
      session: { id: claims.sid, expiresAt: session.expiresAt },
      authTime: claims.authTime,
    };
  }
  return {
    async callerOf(request) {
      const token = bearerToken(request);
      if (!token) return undefined;
      const claims = await tokens.verify(token);
      if (!claims) return undefined;
      if (claims.sid !== undefined) return sessionCaller(claims as TokenClaims & { sid: string });
      const user = await tokenHolder(db, claims.sub);
      if (!user?.active || user.tokenVersion !== claims.ver) return undefined;
      // A token issued before this account existed belonged to a deleted account with the same
      // e-mail (whose versions restarted at 0): it must not open the new one.
      if (claims.iat !== undefined && claims.iat < seconds(user.createdAt)) return undefined;
      // The address may have moved from another account to this one: a token names the account it
      // was issued to, or, naming none (another library's, an earlier release's), must be younger
      // than the move: iat counts whole seconds, so one of the move's own second may be older, and is refused.
      if (claims.uid === undefined ? user.emailChangedAt && (claims.iat === undefined || claims.iat <= seconds(user.emailChangedAt)) : claims.uid !== user.id) return undefined;
      return { id: user.id, email: user.email, roles: rolesOf(user.roles), tokenVersion: user.tokenVersion };
    },
  };
}

/**
 * The check runs in `transform`, before body and query validation, so an anonymous or
 * unprivileged request is answered 401/403 whatever its body (as a security filter would);
 * `resolve` then hands the caller to the handler.
 */
export const authPlugin = (authenticator: Authenticator) =>
  new Elysia({ name: "auth" }).macro({
    auth: (rule: AccessRule) => ({
      // The OpenAPI document (features/docs/spec.ts) shows the bearer requirement exactly where the guard applies.
      detail: { security: [{ bearerAuth: [] }] },
      async transform({ request, params }) {
        const caller = await authenticator.callerOf(request);
        if (!caller) throw unauthorized();
        if (!satisfies(caller, rule, (params as Record<string, string> | undefined)?.id)) throw new AppError("ACCESS_DENIED");
        requestState(request).caller = caller;
      },
      // The transform above ran first and threw unless it found a caller.
      resolve: ({ request }) => ({ caller: requestState(request).caller as Caller }),
    }),
  });
