/**
 * createApp(deps): the whole HTTP surface, with no environment reads and no I/O of its own.
 * Order matters: errors first (global), then request plumbing, then the features.
 */
import { Elysia, type AnyElysia } from "elysia";
import type { AppContext, AppDeps } from "./context";
import { successOn } from "./envelope";
import { errorsPlugin, escapedErrorAnswer } from "./errors";
import { authPlugin, createAuthenticator } from "./security/guard";
import { createSessionActivity } from "./security/session-activity";
import { apiKeyBoundary, createKeyActivity, createKeyRateLimit } from "./security/api-keys";
import { actuatorRoutes } from "./features/actuator/routes";
import { authRoutes, firstRunRoutes } from "./features/auth/routes";
import { accountRoutes } from "./features/account/routes";
import { outboxRoutes } from "./features/notifications/routes";
import { docsRoutes } from "./features/docs/routes";
import { consoleRoutes } from "./features/console/routes";
import { filesRoutes, UPLOAD_PATH } from "./features/files/routes";
import { usersRoutes } from "./features/users/routes";
import { sessionsRoutes } from "./features/sessions/routes";
import { keysRoutes } from "./features/keys/routes";
import { mfaRoutes } from "./features/mfa/routes";
import { productsRoutes } from "./features/products/routes";
import { ordersRoutes } from "./features/orders/routes";
import { auditRoutes } from "./features/audit/routes";
import { profileRoutes, searchRoutes } from "./features/search/routes";
import { peopleRoutes } from "./features/people/routes";
import { backupsRoutes } from "./features/backups/routes";
import { apiKeysRoutes } from "./features/api-keys/routes";
import { EXCHANGE_PATH, federationRoutes } from "./features/federation/routes";
import { federatedSignIn } from "./features/auth/federated-sign-in";
import { FORM_ROUTES, oauthServerRoutes } from "./features/oauth-server/routes";
import { createProviderTokens } from "./features/oauth-server/tokens";
import { bodyParser } from "./http/body-parser";
import { refinements } from "./http/refinements";
import { compression } from "./http/compression";
import { cors } from "./http/cors";
import { securityHeaders, securityHeadersPlugin } from "./http/security-headers";
import { noStore } from "./http/cache-control";
import { requestContext } from "./http/request-context";
import { routeTable } from "./http/route-table";

// Typed AnyElysia, not the chain's inferred type: every feature's routes add to that type, and two
// features more than today made TypeScript give up on it (TS2589, "excessively deep") wherever
// ReturnType<typeof createApp> is taken. Nothing reads the routes' types off the app; each
// feature's own Elysia instance still checks its handlers.
export function createApp(deps: AppDeps): AnyElysia {
  const now = deps.now ?? Date.now;
  const { config } = deps;
  // OAUTH_SERVER=on (with PUBLIC_URL, its issuer): the provider's RS256 keys and the guard's check of its access tokens.
  const provider = config.oauthServer
    ? createProviderTokens({
        db: deps.db,
        cipher: deps.cipher,
        issuer: config.publicUrl! + config.basePath,
        accessTokenTtlS: config.oauthAccessTokenTtlS,
        rotationDays: config.tokenKeyRotationDays,
        idleMs: config.sessionIdleTimeoutMs,
        now,
      })
    : undefined;
  const sessionActivity = createSessionActivity(deps.db, now, deps.config.sessionIdleTimeoutMs, deps.logging.get("sessions"));
  const authenticator = createAuthenticator(deps.db, deps.tokens, {
    now,
    idleMs: deps.config.sessionIdleTimeoutMs,
    activity: sessionActivity,
    metrics: deps.metrics,
    mfaRequiredRoles: deps.config.mfaRequiredRoles,
    clientCaller: provider?.clientCaller,
  });
  const keyActivity = createKeyActivity(deps.db, now, deps.logging.get("api-keys"));
  let self: AnyElysia | undefined;
  const keyRules = {
    now,
    rateLimit: createKeyRateLimit(deps.config.apiKeyRateLimit),
    activity: keyActivity,
    trustProxy: deps.config.trustProxy,
    server: () => self?.server,
  };
  const ctx: AppContext = {
    ...deps,
    // The JWKS publishes the provider's keys beside the user tokens' (each ring its own, fresh in this process).
    ...(provider && { tokens: { ...deps.tokens, jwks: async () => ({ keys: [...(await deps.tokens.jwks()).keys, ...(await provider.jwks()).keys] }) } }),
    now,
    ok: successOn(now),
    logger: deps.logging.root,
    authenticator,
    sessionActivity,
    keyActivity,
    auth: authPlugin(authenticator, keyRules, deps.config.basePath),
  };
  const routes = routeTable(() => self!);

  const app = new Elysia({
    prefix: config.basePath,
    // Elysia's t.Integer is a Transform, so every answer with an integer went through TypeBox's
    // generic Value.Encode walk (a quarter of /actuator/health in the CPU profile). No response
    // schema here transforms anything: answers are still checked and cleaned, just not encoded.
    encodeSchema: false,
    serve: {
      // Bun's own limit answers a bare 413 (no envelope, no X-Request-Id), so the limits are ours:
      // bodyParser holds JSON to MAX_BODY_BYTES (by Content-Length, before reading) and refuses any
      // other body unread (415); the upload stream stops at MAX_UPLOAD_BYTES.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      idleTimeout: 20,
      error: escapedErrorAnswer(deps.logging.get("http"), now, securityHeaders({ hstsMaxAge: config.hstsMaxAge })),
    },
    // Routing reads the path after "http://" and the host, whatever the host's length: Elysia's
    // default skips 11 characters first, so with `Host: a` it routed "/xx/api/auth/refresh" to
    // /api/auth/refresh while every check read the real path (http/request-url.ts reads it the same way).
    handler: { standardHostname: false },
  })
    .use(
      errorsPlugin({
        logger: deps.logging.get("http"),
        isAuthenticated: async (request) => (await authenticator.callerOf(request)) !== undefined,
        routes,
        now: ctx.now,
      }),
    )
    .use(securityHeadersPlugin({ hstsMaxAge: config.hstsMaxAge }))
    .use(noStore(config.basePath))
    .use(requestContext(deps.logging.get("http"), deps.metrics, config.basePath, deps.lifecycle, deps.tracing))
    .use(cors(config.corsOrigins, { path: `${config.basePath}${EXCHANGE_PATH}`, origins: [...new Set(config.oidcReturnUrls.map((url) => new URL(url).origin))] }))
    .use(apiKeyBoundary(config.basePath))
    .use(compression())
    .use(bodyParser(config.maxBodyBytes, routes, [config.basePath + UPLOAD_PATH, ...(provider ? FORM_ROUTES.map((path) => config.basePath + path) : [])]))
    .use(refinements(routes))
    .use(actuatorRoutes(ctx))
    .use(authRoutes(ctx))
    .use(firstRunRoutes(ctx))
    .use(profileRoutes(ctx))
    .use(accountRoutes(ctx))
    .use(docsRoutes(config.basePath, () => self!))
    .use(consoleRoutes(config.basePath))
    .use(usersRoutes(ctx))
    .use(sessionsRoutes(ctx))
    .use(keysRoutes(ctx))
    .use(mfaRoutes(ctx))
    .use(productsRoutes(ctx))
    .use(ordersRoutes(ctx))
    .use(auditRoutes(ctx))
    .use(outboxRoutes(ctx))
    .use(filesRoutes(ctx))
    .use(searchRoutes(ctx))
    .use(peopleRoutes(ctx))
    .use(backupsRoutes(ctx))
    .use(apiKeysRoutes(ctx))
    .use(federationRoutes(ctx, federatedSignIn(ctx)))
    .use(provider ? oauthServerRoutes(ctx, provider) : new Elysia({ name: "oauth-server-off" }));
  self = app;
  return app;
}

export type App = ReturnType<typeof createApp>;
