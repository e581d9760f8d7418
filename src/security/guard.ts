/**
 * The one access guard. Routes declare who may call them with the `access` macro
 * (`{ access: { allow: "ADMIN", scope: "users:write" } }`, caller.ts `Access`); the guard turns the
 * bearer token into a `caller` or answers 401 / 403 through the errors plugin.
 * A token counts only if it verifies, its subject exists and is active, it carries the
 * user's current token version, and it was issued to that account. A session token (`sid`)
 * resolves through its session, which must be open (store/sessions.ts), to the user; a token
 * without one names its account by `uid`, or (naming none) was issued after the account's e-mail
 * last changed. Either way it is one read, which also tells whether the token's signing key was withdrawn.
 * An API key (`Bearer usk_…`) resolves through its row, which names its owner (security/api-keys.ts):
 * the owner narrowed to the key's scopes, also one read.
 */
import { Elysia } from "elysia";
import type { Database, Reader } from "../db/database";
import { foundOrAgain, type ReadSource } from "../db/miss";
import { AppError } from "../errors";
import { type AlsoUser, type TokenHolder, tokenHolder } from "../store/users";
import { andThen, type MaybePromise } from "../maybe-promise";
import { isOpen, type SessionHolder, sessionHolder } from "../store/sessions";
import { keyHolder } from "../store/api-keys";
import { clientAddress } from "../http/client-address";
import { authorizationOf } from "../http/authorization";
import { requestPath } from "../http/request-url";
import { routeSamples } from "../http/route-sample";
import type { Metrics } from "../metrics";
import type { TokenClaims, Tokens } from "./bearer-tokens";
import type { SessionActivity } from "./session-activity";
import { CLIENT_TOKEN_START, isKeyBearer, parseKey, secretMatches, setRateLimitHeaders, type KeyActivity, type KeyRateLimit } from "./api-keys";
import { satisfies, type Access, type Caller, type RoleName } from "./caller";

export const unauthorized = () => new AppError("UNAUTHORIZED", {}, { headers: { "www-authenticate": "Bearer" } });

/** The word after "Bearer " (any case), up to the next space: what `header.split(" ")`'s second part was, without the array. */
export function bearerToken(request: Request): string | undefined {
  const header = authorizationOf(request);
  if (!header) return undefined;
  const space = header.indexOf(" ");
  if (space !== 6) return undefined;
  const end = header.indexOf(" ", 7);
  const token = end < 0 ? header.slice(7) : header.slice(7, end);
  return token && header.slice(0, 6).toLowerCase() === "bearer" ? token : undefined;
}

export interface Authenticator {
  /**
   * The caller behind the request's bearer token, or undefined; with `also`, that user read in the
   * same statement. At once for a token already verified on the embedded driver (maybe-promise.ts).
   */
  callerOf(request: Request, also?: AlsoUser): MaybePromise<Caller | undefined>;
  /**
   * The caller of a client's access token (OpenID Provider), asked by the guard only when callerOf
   * found none: the routes that read callerOf themselves (bearer refresh, metrics) never take one.
   * With `also`, that user read in the grant's statement, as callerOf reads it.
   */
  clientCallerOf(request: Request, also?: AlsoUser): MaybePromise<Caller | undefined>;
}

const seconds = (instant: Date) => Math.floor(instant.getTime() / 1000);

const rolesOf = (roles: string | null) => (roles?.split(",") ?? []) as RoleName[];

export interface SessionRules {
  now: () => number;
  idleMs: number;
  activity: SessionActivity;
  /** Requests by how the caller authenticated (session, token, api_key). */
  metrics?: Pick<Metrics, "authenticated">;
  mfaRequiredRoles?: readonly string[];
  /** With OAUTH_SERVER=on: the caller of a client's access token (features/oauth-server), asked only of a bearer that is no token of ours. */
  clientCaller?: (token: string, also?: AlsoUser) => MaybePromise<Caller | undefined>;
}

/** The amr values of a second factor (a passkey alone counts: it is one). */
const SECOND_FACTORS = ["otp", "hwk", "rec"];

/** Where an enrol-only session may go: setting up a factor, its own sessions, and signing out or refreshing. */
const ENROLMENT_PATHS = ["/api/account/mfa", "/api/account/passkeys", "/api/account/sessions", "/api/auth/"];

/** MFA_REQUIRED_ROLES: a caller who must still enrol a second factor gets 403 MFA_ENROLMENT_REQUIRED anywhere but ENROLMENT_PATHS. */
function holdToEnrolment(caller: Caller, request: Request, basePath: string) {
  if (!caller.enrolOnly) return;
  const path = requestPath(request.url, basePath);
  if (!ENROLMENT_PATHS.some((allowed) => path.startsWith(allowed))) throw new AppError("MFA_ENROLMENT_REQUIRED");
}

/** A hash to compare an unknown prefix's secret with, so that an unknown key costs what a wrong secret does. */
const NO_KEY = "A".repeat(43);

/** A replica too long without its primary: it must not keep honouring credentials revoked elsewhere meanwhile. */
const tooStaleToTrust = () => new AppError("SERVICE_UNAVAILABLE", {}, { headers: { "retry-after": "1" } });

export function createAuthenticator(db: ReadSource & Pick<Database, "primary" | "freshness">, tokens: Tokens, sessions: SessionRules): Authenticator {
  /**
   * A caller's read on `db`; on an embedded replica read again at its primary when it found no
   * caller, or not the user asked along (db/miss.ts): a miss on the copy is never final.
   */
  const readOrAgain = db.primary
    ? (read: (source: Reader) => MaybePromise<Caller | undefined>, also?: AlsoUser) =>
        foundOrAgain(db, read, (caller) => caller === undefined || (also !== undefined && also.user === undefined))
    : (read: (source: Reader) => MaybePromise<Caller | undefined>) => read(db);
  const counted = (kind: "session" | "token" | "api_key", caller: Caller | undefined) => {
    if (caller) sessions.metrics?.authenticated(kind);
    return caller;
  };
  function keyCaller(bearer: string, also?: AlsoUser): MaybePromise<Caller | undefined> {
    const presented = parseKey(bearer);
    if (!presented) return undefined;
    return readOrAgain(
      (source) =>
        andThen(keyHolder(source, presented.prefix, also), (key) => {
          const verified = secretMatches(presented.secret, key?.secretHash ?? NO_KEY);
          if (!key || !verified || !key.active || (key.expiresAt !== null && key.expiresAt <= sessions.now())) return undefined;
          return {
            id: key.userId,
            email: key.email,
            roles: rolesOf(key.roles),
            tokenVersion: key.tokenVersion,
            apiKey: { id: key.id, scopes: key.scopes.split(","), lastUsedAt: key.lastUsedAt },
          };
        }),
      also,
    );
  }
  const keyWithdrawn = (kid: string) => {
    tokens.withdrawn(kid);
    return undefined;
  };
  function sessionCaller(claims: TokenClaims & { sid: string }, session: SessionHolder | undefined): Caller | undefined {
    const now = sessions.now();
    if (session?.keyRevoked) return keyWithdrawn(claims.kid!);
    if (!session || !isOpen(session, now, sessions.idleMs) || session.tokenVersion !== claims.ver) return undefined;
    sessions.activity.seen(claims.sid, session.lastSeenAt, now);
    const roles = rolesOf(session.roles);
    const amr = session.amr.split(",");
    const enrolOnly = roles.some((role) => sessions.mfaRequiredRoles?.includes(role)) && !amr.some((method) => SECOND_FACTORS.includes(method));
    return {
      id: session.userId,
      email: session.email,
      roles,
      ...(enrolOnly && { enrolOnly }),
      tokenVersion: session.tokenVersion,
      session: { id: claims.sid, expiresAt: session.expiresAt, amr },
      authTime: claims.authTime,
    };
  }
  /** The caller a verified token names: through its session, or (naming none) its account. */
  function tokenCaller(claims: TokenClaims, also?: AlsoUser): MaybePromise<Caller | undefined> {
    if (claims.sid !== undefined)
      return readOrAgain(
        (source) => andThen(sessionHolder(source, claims.sid!, claims.kid, also), (session) => counted("session", sessionCaller(claims as TokenClaims & { sid: string }, session))),
        also,
      );
    return readOrAgain((source) => andThen(tokenHolder(source, claims.sub, claims.kid, also), (user) => counted("token", accountCaller(claims, user))), also);
  }
  function accountCaller(claims: TokenClaims, user: TokenHolder | undefined): Caller | undefined {
    if (user?.keyRevoked) return keyWithdrawn(claims.kid!);
    if (!user?.active || user.tokenVersion !== claims.ver) return undefined;
    // A token issued before this account existed belonged to a deleted account with the same
    // e-mail (whose versions restarted at 0): it must not open the new one.
    if (claims.iat !== undefined && claims.iat < seconds(user.createdAt)) return undefined;
    // The address may have moved from another account to this one: a token names the account it
    // was issued to, or, naming none (another library's, an earlier release's), must be younger
    // than the move: iat counts whole seconds, so one of the move's own second may be older, and is refused.
    if (claims.uid === undefined ? user.emailChangedAt && (claims.iat === undefined || claims.iat <= seconds(user.emailChangedAt)) : claims.uid !== user.id) return undefined;
    return { id: user.id, email: user.email, roles: rolesOf(user.roles), tokenVersion: user.tokenVersion };
  }
  return {
    callerOf(request, also) {
      const token = bearerToken(request);
      if (!token) return undefined;
      if (db.freshness?.tooStale()) throw tooStaleToTrust();
      if (isKeyBearer(token)) return andThen(keyCaller(token, also), (caller) => counted("api_key", caller));
      // A client's access token is no user token: clientCallerOf reads it, with no verify tried here first.
      if (token.startsWith(CLIENT_TOKEN_START)) return undefined;
      // A token seen before is known without a signature check or a promise; a new one goes through verify.
      const known = tokens.remembered(token);
      if (known) return tokenCaller(known, also);
      return tokens.verify(token).then((claims) => claims && tokenCaller(claims, also));
    },
    clientCallerOf(request, also) {
      const token = bearerToken(request);
      return token && !isKeyBearer(token) ? sessions.clientCaller?.(token, also) : undefined;
    },
  };
}

/**
 * The caller of a route that reads its bearer itself (the bearer-only refresh, metrics with its
 * METRICS_TOKEN, health's details), held to what the guard holds every caller to on a route that
 * declares no scope: an API key is refused (403 API_KEY_NOT_ALLOWED), and a session that must
 * still enrol a second factor may only enrol (403 MFA_ENROLMENT_REQUIRED). Undefined: no valid bearer.
 */
export async function callerOutsideGuard(authenticator: Authenticator, request: Request, basePath: string): Promise<Caller | undefined> {
  const caller = await authenticator.callerOf(request);
  if (!caller) return undefined;
  if (caller.apiKey) throw new AppError("API_KEY_NOT_ALLOWED");
  holdToEnrolment(caller, request, basePath);
  return caller;
}

/** What the guard does with an API key's caller: its rate limit, and noting its use. */
export interface KeyRules {
  now: () => number;
  rateLimit: KeyRateLimit;
  activity: KeyActivity;
  trustProxy: number;
  /**
   * The listening server, for a key's client address. Not the request context's `server`, which
   * Elysia defines on every request's context of every route whose hooks name it (and on none in
   * the binary before the transform below was an arrow function: every key's address was "local").
   */
  server: () => Parameters<typeof clientAddress>[0];
}

/**
 * An API key's request, once its secret verified: counted in its rate limit (429 past it, with
 * Retry-After and RateLimit-*; those headers come from half the budget on), then
 * refused where the route declares no scope (403 API_KEY_NOT_ALLOWED), where the key lacks the
 * route's scope (403 INSUFFICIENT_SCOPE), and where its body sends a field the route keeps
 * from keys (403 API_KEY_NOT_ALLOWED). The owner's roles still apply after this.
 */
function admitKey(key: NonNullable<Caller["apiKey"]>, access: Access, context: KeyContext, keys: KeyRules) {
  const { request, set } = context;
  // One clock reading for both (Date.now costs ~0.1 µs here, a read of the system clock).
  const at = keys.now();
  const limit = keys.rateLimit.take(key.id, at);
  // A key well within its minute is not told (three more headers cost an answer ~10 µs of CPU, a
  // tenth of a user read); from half its budget on, every answer counts down to the 429.
  if (limit) setRateLimitHeaders(set.headers, limit);
  if (limit?.allowed === false)
    throw new AppError("TOO_MANY_REQUESTS", {}, { headers: setRateLimitHeaders({ "retry-after": String(limit.resetS) }, limit) as Record<string, string> });
  keys.activity.used(key.id, key.lastUsedAt, at, () => clientAddress(keys.server(), request, keys.trustProxy));
  admitScopes(key.scopes, access, context.body);
}

/**
 * A key's or a client token's scopes: the route must declare a scope (else 403 API_KEY_NOT_ALLOWED)
 * they hold (else 403 INSUFFICIENT_SCOPE), and the body may send no field the route keeps from
 * keys and clients (else 403 API_KEY_NOT_ALLOWED).
 */
function admitScopes(scopes: readonly string[], { scope, keysMayNotSend }: Access, body: unknown) {
  if (scope === undefined) throw new AppError("API_KEY_NOT_ALLOWED");
  if (!scopes.includes(scope)) throw new AppError("INSUFFICIENT_SCOPE");
  if (keysMayNotSend && sendsAny(body, keysMayNotSend)) throw new AppError("API_KEY_NOT_ALLOWED");
}
type KeyContext = { request: Request; set: { headers: Record<string, unknown> }; body: unknown };

/** Whether a (not yet validated) JSON body gives any of `fields` a value: null is "not given", as PUT and PATCH read it. */
const sendsAny = (body: unknown, fields: readonly string[]) =>
  typeof body === "object" && body !== null && fields.some((field) => (body as Record<string, unknown>)[field] != null);

/** The security requirements the OpenAPI document shows: the bearer, and an API key's scope where the route declares one. */
const securityOf = ({ scope }: Access): Record<string, string[]>[] => (scope === undefined ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { apiKey: [scope] }]);

/** What the guard leaves on the request's context (the same object from transform to handler). */
type Guarded = { caller: Caller; userReadAlong?: AlsoUser };
/** What the guard's transform reads of the context, and writes onto it. */
type GuardContext = KeyContext & { params?: Record<string, string | undefined> } & Partial<Guarded>;

/** The `:id` segment as a user id, when it is one; the route's own params check still decides. */
const idOf = (segment: string | undefined) => {
  const id = Number(segment);
  return Number.isSafeInteger(id) && id >= 1 ? id : undefined;
};

/**
 * The check runs in `transform`, before body and query validation, so an anonymous or
 * unprivileged request is answered 401/403 whatever its body (as a security filter would),
 * and leaves the caller on the context for the handler.
 */
export const authPlugin = (authenticator: Authenticator, keys: KeyRules, basePath = "") =>
  new Elysia({ name: "auth" }).use(routeSamples).macro({
    // Called once per route, when it is registered: the request below reads only what this closes over.
    access: (access: Access) => {
      const { allow, readsUser } = access;
      return {
        // Left on the route's hooks as declared: the whole-surface tests read every route's declaration there.
        declaredAccess: access,
        // The OpenAPI document (features/docs/spec.ts) shows the bearer requirement exactly where the guard applies,
        // and the API-key scope the route asks for.
        detail: { security: securityOf(access) },
        // An arrow function, not a method: Elysia reads a hook's source to see what it uses, and could
        // not read the minified method (the binary printed a "[Sucrose] warning" with its code to stdout).
        transform: async (context: GuardContext) => {
          const { request, set } = context;
          const pathId = context.params?.id;
          const id = readsUser ? idOf(pathId) : undefined;
          const userReadAlong = id === undefined ? undefined : { id };
          const found = authenticator.callerOf(request, userReadAlong);
          let caller = found instanceof Promise ? await found : found;
          if (!caller) {
            // As callerOf: a client token seen before is answered without a promise on the embedded driver.
            const client = authenticator.clientCallerOf(request, userReadAlong);
            caller = client instanceof Promise ? await client : client;
          }
          if (!caller) throw unauthorized();
          if (caller.apiKey) admitKey(caller.apiKey, access, { request, set, body: context.body }, keys);
          else if (caller.client) {
            admitScopes(caller.client.scopes, access, context.body);
            if (caller.client.withoutUser && !access.withoutUser) throw new AppError("CLIENT_WITHOUT_USER");
          }
          if (!satisfies(caller, allow, pathId)) throw new AppError("ACCESS_DENIED");
          holdToEnrolment(caller, request, basePath);
          // Straight onto the context: an object from resolve, which Elysia copies onto it, cost the
          // served GET /api/users/{id} ~1.5 µs of its ~50 (wrk, server CPU per request).
          context.caller = caller;
          context.userReadAlong = userReadAlong;
        },
        // For the handler's types only (Elysia types a macro's additions by what resolve returns): the
        // transform above ran first, put them there, and threw unless it found a caller.
        resolve: () => undefined as unknown as Guarded,
      };
    },
  });
