/**
 * The OpenID Provider's flows (OpenID Connect Core, RFC 6749, RFC 7636, RFC 9207): authorize with
 * the authorization code and PKCE S256, the token endpoint (code, rotating refresh tokens with the
 * sessions' reuse grace, client_credentials), userinfo, revocation, introspection, end-session.
 * Protocol errors are OAuthErrors (`error`, `error_description`), never the API's envelope.
 */
import { sha256Base64url } from "../../digest";
import type { AppContext } from "../../context";
import { AppError } from "../../errors";
import {
  browserSession,
  type ClientRow,
  clientByClientId,
  consentOf,
  endSessionById,
  grantFound,
  insertCodeStatement,
  insertGrantStatement,
  insertRefreshStatement,
  refreshTokenRow,
  revokeGrantStatement,
  rotateRefresh,
  saveConsentStatement,
  takeCode,
  userClaims,
  withdrawConsent,
} from "../../store/oauth";
import { isOpen } from "../../store/sessions";
import { SCOPES } from "../../security/caller";
import { accessKid, type ProviderTokens } from "./tokens";

export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }
}

/** Open to every client; a client's `scopes` lists what else it may ask for. */
export const OPEN_SCOPES = ["openid", "profile", "email"];
/** What a client may be allowed beyond the open scopes. */
export const GRANTABLE_SCOPES = ["offline_access", ...SCOPES];
const CODE_TTL_MS = 60_000;

export interface ProviderDeps {
  ctx: AppContext;
  tokens: ProviderTokens;
}

/** DELETE /api/account/apps/{clientId}: the caller withdraws their consent to a client (404 OAUTH_CLIENT_NOT_FOUND when they gave none). */
export async function withdrawAppConsent(ctx: Pick<AppContext, "db" | "now">, userId: number, clientId: string) {
  if (!(await withdrawConsent(ctx.db, userId, clientId, new Date(ctx.now())))) throw new AppError("OAUTH_CLIENT_NOT_FOUND");
}

const random = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url");
const secondsOf = (instant: Date | number) => Math.floor((typeof instant === "number" ? instant : instant.getTime()) / 1000);

/** Exact match; a loopback redirect (native apps, RFC 8252) matches on any port. */
export function redirectMatches(registered: readonly string[], given: string): boolean {
  if (registered.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (url.protocol !== "http:" || !["127.0.0.1", "[::1]"].includes(url.hostname)) return false;
  return registered.some((uri) => {
    const known = new URL(uri);
    return known.protocol === "http:" && known.hostname === url.hostname && known.pathname === url.pathname && known.search === url.search;
  });
}

// ── Authorize ──

export interface AuthorizeRequest {
  client: ClientRow;
  redirectUri: string;
  state?: string;
  scopes: string[];
  nonce?: string;
  codeChallenge?: string;
  prompt: Set<string>;
  maxAge?: number;
  loginHint?: string;
}

/**
 * The request's client and redirect URI, checked first: until both are known and registered,
 * errors are shown as a page (OAuthError with status 400), never redirected.
 */
export async function checkedClient(deps: ProviderDeps, query: Record<string, string | undefined>): Promise<{ client: ClientRow; redirectUri: string }> {
  const client = query.client_id ? await clientByClientId(deps.ctx.db, query.client_id) : undefined;
  if (!client) throw new OAuthError("invalid_client", "unknown client_id");
  if (!query.redirect_uri || !redirectMatches(client.redirectUris, query.redirect_uri)) throw new OAuthError("invalid_request", "redirect_uri is not registered for this client");
  return { client, redirectUri: query.redirect_uri };
}

/** The rest of the request, once the redirect is known: errors here go back to the client (RedirectError). */
export function checkedRequest(client: ClientRow, redirectUri: string, query: Record<string, string | undefined>): AuthorizeRequest {
  if (query.response_type !== "code") throw new OAuthError("unsupported_response_type", "only response_type=code is supported");
  if (!client.grantTypes.includes("authorization_code")) throw new OAuthError("unauthorized_client", "this client may not use the authorization code");
  const scopes = [...new Set((query.scope ?? "").split(" ").filter(Boolean))];
  const refused = scopes.filter((scope) => !OPEN_SCOPES.includes(scope) && !client.scopes.includes(scope));
  if (refused.length > 0) throw new OAuthError("invalid_scope", `this client may not ask for ${refused.join(" ")}`);
  if (query.code_challenge_method !== undefined && query.code_challenge_method !== "S256") throw new OAuthError("invalid_request", "code_challenge_method must be S256");
  if (query.code_challenge !== undefined && !/^[A-Za-z0-9_-]{43}$/.test(query.code_challenge))
    throw new OAuthError("invalid_request", "code_challenge must be a base64url SHA-256");
  if (query.code_challenge !== undefined && query.code_challenge_method === undefined) throw new OAuthError("invalid_request", "code_challenge_method must be S256");
  if (client.secretHash === null && query.code_challenge === undefined) throw new OAuthError("invalid_request", "a public client must use PKCE (code_challenge, S256)");
  const prompt = new Set((query.prompt ?? "").split(" ").filter(Boolean));
  if ([...prompt].some((p) => !["none", "login", "consent"].includes(p)) || (prompt.has("none") && prompt.size > 1))
    throw new OAuthError("invalid_request", "prompt must be none, login or consent");
  const maxAge = query.max_age === undefined ? undefined : Number(query.max_age);
  if (maxAge !== undefined && !(Number.isInteger(maxAge) && maxAge >= 0)) throw new OAuthError("invalid_request", "max_age must be a number of seconds");
  return {
    client,
    redirectUri,
    state: query.state,
    scopes,
    nonce: query.nonce,
    codeChallenge: query.code_challenge,
    prompt,
    maxAge,
    loginHint: query.login_hint,
  };
}

/** The redirect back to the client (RFC 9207: always with `iss`). */
export function redirectBack(issuer: string, redirectUri: string, params: Record<string, string | undefined>) {
  const url = new URL(redirectUri);
  for (const [key, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(key, value);
  url.searchParams.set("iss", issuer);
  return url.toString();
}

/** The open session a provider cookie names, or undefined. */
export async function signedInSession(deps: ProviderDeps, sessionId: string | undefined) {
  if (!sessionId) return undefined;
  const session = await browserSession(deps.ctx.db, sessionId);
  if (!session) return undefined;
  const open = isOpen(
    { ...session, endedAt: session.endedAt?.getTime() ?? null, expiresAt: session.expiresAt.getTime(), lastSeenAt: session.lastSeenAt.getTime() },
    deps.ctx.now(),
    deps.ctx.config.sessionIdleTimeoutMs,
  );
  return open ? { id: sessionId, ...session } : undefined;
}
export type SignedIn = NonNullable<Awaited<ReturnType<typeof signedInSession>>>;

/** What authorize must do next for a signed-in user: sign in again (prompt=login, max_age), ask consent, or issue. */
export async function nextStep(deps: ProviderDeps, request: AuthorizeRequest, session: SignedIn | undefined, freshLogin: boolean): Promise<"login" | "consent" | "issue"> {
  if (!session) return "login";
  if (request.prompt.has("login") && !freshLogin) return "login";
  if (request.maxAge !== undefined && secondsOf(deps.ctx.now()) - secondsOf(session.createdAt) > request.maxAge) return "login";
  if (request.client.firstParty) return "issue";
  if (request.prompt.has("consent") || request.client.dynamic) return "consent";
  const given = await consentOf(deps.ctx.db, session.userId, request.client.id);
  return given && request.scopes.every((scope) => given.includes(scope)) ? "issue" : "consent";
}

/** Issues a code for the signed-in user (recording consent when given): the redirect back. */
export async function issueCode(deps: ProviderDeps, request: AuthorizeRequest, session: SignedIn, consented: boolean): Promise<string> {
  const { ctx } = deps;
  const at = new Date(ctx.now());
  const code = random(32);
  const grantId = random(16);
  // Without offline_access the grant ends with the sign-in's session; with it, it outlives it.
  const offline = request.scopes.includes("offline_access");
  await ctx.db.writeAll((tx) => [
    insertGrantStatement(tx, {
      id: grantId,
      clientId: request.client.id,
      userId: session.userId,
      sessionId: offline ? null : session.id,
      tokenVersion: session.tokenVersion,
      scopes: request.scopes.join(","),
      authTime: session.createdAt,
      amr: session.amr,
      createdAt: at,
    }),
    insertCodeStatement(tx, {
      codeHash: sha256Base64url(code),
      grantId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge ?? null,
      nonce: request.nonce ?? null,
      expiresAt: new Date(at.getTime() + CODE_TTL_MS),
    }),
    ...(consented ? [saveConsentStatement(tx, session.userId, request.client.id, [...request.scopes].sort(), at)] : []),
  ]);
  return redirectBack(deps.tokens.issuer, request.redirectUri, { code, state: request.state });
}

// ── Client authentication ──

/** client_secret_basic, client_secret_post, or a public client's bare client_id. */
export async function authenticateClient(deps: ProviderDeps, authorization: string | null, form: URLSearchParams): Promise<ClientRow> {
  let clientId = form.get("client_id") ?? undefined;
  let secret = form.get("client_secret") ?? undefined;
  if (authorization?.toLowerCase().startsWith("basic ")) {
    const decoded = Buffer.from(authorization.slice(6).trim(), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) throw new OAuthError("invalid_client", "malformed Basic credentials", 401);
    try {
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "));
    } catch {
      throw new OAuthError("invalid_client", "malformed Basic credentials", 401);
    }
  }
  const client = clientId ? await clientByClientId(deps.ctx.db, clientId) : undefined;
  if (!client) throw new OAuthError("invalid_client", "unknown client", 401);
  if (client.secretHash === null) {
    if (secret !== undefined) throw new OAuthError("invalid_client", "a public client has no secret", 401);
    return client;
  }
  if (secret === undefined || !timingSafeEqualText(sha256Base64url(secret), client.secretHash)) throw new OAuthError("invalid_client", "wrong client credentials", 401);
  return client;
}

function timingSafeEqualText(a: string, b: string) {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}

// ── Token endpoint ──

export interface TokenAnswer {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  scope: string;
  id_token?: string;
  refresh_token?: string;
}

/** Access, ID and (with offline_access) refresh tokens of a live grant. */
async function tokensOf(deps: ProviderDeps, client: ClientRow, grantId: string, nonce: string | null, withRefresh: boolean): Promise<TokenAnswer> {
  const { tokens, ctx } = deps;
  const grant = await grantFound(ctx.db, grantId);
  if (!grant || grant.clientPk !== client.id || !tokens.grantLive(grant)) throw new OAuthError("invalid_grant", "the grant has ended");
  const sub = grant.userId === null ? client.clientId : String(grant.userId);
  const authTime = grant.authTime ? secondsOf(grant.authTime) : undefined;
  const access = await tokens.accessToken({ sub, clientId: client.clientId, scopes: grant.scopes, grantId, authTime });
  const answer: TokenAnswer = { access_token: access.token, token_type: "Bearer", expires_in: access.expiresIn, scope: grant.scopes.join(" ") };
  if (grant.userId !== null && grant.scopes.includes("openid")) {
    answer.id_token = await tokens.idToken(
      {
        sub,
        aud: client.clientId,
        auth_time: authTime,
        ...(grant.amr && { amr: grant.amr.split(",") }),
        ...(nonce && { nonce }),
        ...(grant.sessionId && { sid: grant.sessionId }),
      },
      client.idTokenSignedResponseAlg,
      access.token,
    );
  }
  if (withRefresh && grant.scopes.includes("offline_access") && client.grantTypes.includes("refresh_token")) {
    const refresh = random(32);
    await ctx.db.writeAll((tx) => [insertRefreshStatement(tx, grantId, sha256Base64url(refresh), new Date(ctx.now()))]);
    answer.refresh_token = refresh;
  }
  return answer;
}

export async function tokenRequest(deps: ProviderDeps, authorization: string | null, form: URLSearchParams): Promise<TokenAnswer> {
  const client = await authenticateClient(deps, authorization, form);
  const grantType = form.get("grant_type");
  if (grantType === "authorization_code") return codeGrant(deps, client, form);
  if (grantType === "refresh_token") return refreshGrant(deps, client, form);
  if (grantType === "client_credentials") return clientCredentialsGrant(deps, client, form);
  throw new OAuthError("unsupported_grant_type", "grant_type must be authorization_code, refresh_token or client_credentials");
}

async function codeGrant(deps: ProviderDeps, client: ClientRow, form: URLSearchParams) {
  const { ctx } = deps;
  const code = form.get("code");
  if (!code) throw new OAuthError("invalid_request", "code is missing");
  const at = ctx.now();
  const taken = await takeCode(ctx.db, sha256Base64url(code), new Date(at));
  if (!taken) throw new OAuthError("invalid_grant", "unknown code");
  if (taken.replayed) {
    // A code used twice: someone else may hold it, so what it issued ends (RFC 6749 §4.1.2).
    await ctx.db.writeAll((tx) => [revokeGrantStatement(tx, taken.grantId, new Date(at))]);
    throw new OAuthError("invalid_grant", "the code was already used");
  }
  if (taken.expiresAt.getTime() <= at) throw new OAuthError("invalid_grant", "the code has expired");
  const grant = await grantFound(ctx.db, taken.grantId);
  if (!grant || grant.clientPk !== client.id) throw new OAuthError("invalid_grant", "the code was issued to another client");
  if (form.get("redirect_uri") !== taken.redirectUri) throw new OAuthError("invalid_grant", "redirect_uri differs from the authorization request's");
  const verifier = form.get("code_verifier");
  if (taken.codeChallenge === null) {
    // A verifier for a code issued without a challenge: a PKCE downgrade (RFC 9700 §2.1.1).
    if (verifier !== null) throw new OAuthError("invalid_grant", "the code was issued without a code_challenge");
  } else if (verifier === null || !/^[A-Za-z0-9._~-]{43,128}$/.test(verifier) || sha256Base64url(verifier) !== taken.codeChallenge) {
    throw new OAuthError("invalid_grant", "code_verifier does not match the code_challenge");
  }
  return tokensOf(deps, client, taken.grantId, taken.nonce, true);
}

async function refreshGrant(deps: ProviderDeps, client: ClientRow, form: URLSearchParams) {
  const { ctx } = deps;
  const presented = form.get("refresh_token");
  if (!presented) throw new OAuthError("invalid_request", "refresh_token is missing");
  if (!client.grantTypes.includes("refresh_token")) throw new OAuthError("unauthorized_client", "this client may not use refresh tokens");
  const hash = sha256Base64url(presented);
  const row = await refreshTokenRow(ctx.db, hash);
  if (!row) throw new OAuthError("invalid_grant", "unknown refresh token");
  const grant = await grantFound(ctx.db, row.grantId);
  if (!grant || grant.clientPk !== client.id) throw new OAuthError("invalid_grant", "the refresh token was issued to another client");
  const at = ctx.now();
  const next = random(32);
  const rotate = async (state: typeof row) => {
    if (state.rotatedAt === null) return rotateRefresh(ctx.db, hash, row.grantId, sha256Base64url(next), new Date(at), false);
    // Within the grace: an answer lost on the way, accepted once more with a sibling successor.
    if (!state.graceUsed && at - state.rotatedAt.getTime() <= ctx.config.refreshReuseGraceS * 1000)
      return rotateRefresh(ctx.db, hash, row.grantId, sha256Base64url(next), new Date(at), true);
    return false;
  };
  let rotated = await rotate(row);
  // An edge's copy that did not know yet of a rotation at another edge: the primary's conditional
  // write refused it, so it is judged again on the primary's row.
  if (!rotated && ctx.db.primary) rotated = await rotate((await refreshTokenRow(ctx.db.primary, hash)) ?? row);
  if (!rotated) {
    // Replayed after its rotation (and grace): the chain may be stolen, so the whole grant ends.
    await ctx.db.writeAll((tx) => [revokeGrantStatement(tx, row.grantId, new Date(at))]);
    throw new OAuthError("invalid_grant", "the refresh token was already used");
  }
  const answer = await tokensOf(deps, client, row.grantId, null, false);
  return { ...answer, refresh_token: next };
}

async function clientCredentialsGrant(deps: ProviderDeps, client: ClientRow, form: URLSearchParams) {
  const { ctx } = deps;
  if (client.secretHash === null || !client.grantTypes.includes("client_credentials")) {
    throw new OAuthError("unauthorized_client", "this client was not created with the client_credentials grant");
  }
  const asked = (form.get("scope") ?? "").split(" ").filter(Boolean);
  const scopes = asked.length > 0 ? asked : client.scopes.filter((scope) => (SCOPES as string[]).includes(scope));
  const refused = scopes.filter((scope) => !client.scopes.includes(scope) || !(SCOPES as string[]).includes(scope));
  if (refused.length > 0) throw new OAuthError("invalid_scope", `this client may not ask for ${refused.join(" ")}`);
  const grantId = random(16);
  await ctx.db.writeAll((tx) => [insertGrantStatement(tx, { id: grantId, clientId: client.id, scopes: scopes.join(","), createdAt: new Date(ctx.now()) })]);
  return tokensOf(deps, client, grantId, null, false);
}

// ── Userinfo, revocation, introspection, end-session ──

export async function userinfo(deps: ProviderDeps, bearer: string | undefined) {
  const claims = bearer ? await deps.tokens.verifyAccess(bearer) : undefined;
  const grant = claims && (await grantFound(deps.ctx.db, claims.gid, accessKid(bearer!)));
  if (!claims || !grant || grant.userId === null || !deps.tokens.grantLive(grant)) throw new OAuthError("invalid_token", "the access token is not valid", 401);
  if (!grant.scopes.includes("openid")) throw new OAuthError("insufficient_scope", "userinfo needs the openid scope", 403);
  const user = await userClaims(deps.ctx.db, grant.userId);
  if (!user) throw new OAuthError("invalid_token", "the access token is not valid", 401);
  return {
    sub: String(grant.userId),
    ...(grant.scopes.includes("profile") && { name: user.name }),
    ...(grant.scopes.includes("email") && { email: user.email, email_verified: user.emailVerified }),
  };
}

/** The grant a token (refresh or access) of this client names, if any. */
async function grantOfToken(deps: ProviderDeps, client: ClientRow, token: string) {
  const row = await refreshTokenRow(deps.ctx.db, sha256Base64url(token));
  // An access token's grant is read with whether its key was withdrawn; a refresh token has no key.
  const access = row ? undefined : await deps.tokens.verifyAccess(token);
  const grantId = row?.grantId ?? access?.gid;
  const grant = grantId === undefined ? undefined : await grantFound(deps.ctx.db, grantId, access && accessKid(token));
  return grant && grant.clientPk === client.id ? grant : undefined;
}

/** RFC 7009: a token of this client ends its grant; anything else is answered the same. */
export async function revoke(deps: ProviderDeps, authorization: string | null, form: URLSearchParams) {
  const client = await authenticateClient(deps, authorization, form);
  const token = form.get("token");
  if (!token) throw new OAuthError("invalid_request", "token is missing");
  const grant = await grantOfToken(deps, client, token);
  if (grant) await deps.ctx.db.writeAll((tx) => [revokeGrantStatement(tx, grant.id, new Date(deps.ctx.now()))]);
}

/** RFC 7662, for confidential clients: whether a token of theirs is active, and what it is. */
export async function introspect(deps: ProviderDeps, authorization: string | null, form: URLSearchParams) {
  const client = await authenticateClient(deps, authorization, form);
  if (client.secretHash === null) throw new OAuthError("invalid_client", "introspection is for confidential clients", 401);
  const token = form.get("token");
  if (!token) throw new OAuthError("invalid_request", "token is missing");
  const grant = await grantOfToken(deps, client, token);
  if (!grant || !deps.tokens.grantLive(grant)) return { active: false };
  const access = await deps.tokens.verifyAccess(token);
  const refresh = await refreshTokenRow(deps.ctx.db, sha256Base64url(token));
  if (!access && (!refresh || refresh.rotatedAt !== null)) return { active: false };
  return {
    active: true,
    client_id: client.clientId,
    scope: grant.scopes.join(" "),
    sub: grant.userId === null ? client.clientId : String(grant.userId),
    iss: deps.tokens.issuer,
    token_type: access ? "Bearer" : "refresh_token",
    ...(access && { exp: access.exp, iat: access.iat }),
  };
}

/**
 * RP-initiated logout: the hint must be an ID token of ours, the redirect registered exactly. Ends
 * the cookie's session or, without the cookie (a cross-site form POST carries no SameSite=Lax
 * cookie), the session the hint names (`sid`): the app may end the sign-in its own ID token came from.
 */
export async function endSession(deps: ProviderDeps, params: Record<string, string | undefined>, sessionId: string | undefined): Promise<string | undefined> {
  const hint = params.id_token_hint ? await deps.tokens.verifyIdHint(params.id_token_hint) : undefined;
  if (params.id_token_hint && !hint) throw new OAuthError("invalid_request", "id_token_hint is not an ID token of this provider");
  const clientId = params.client_id ?? (typeof hint?.aud === "string" ? hint.aud : undefined);
  if (params.client_id && hint && hint.aud !== params.client_id) throw new OAuthError("invalid_request", "id_token_hint was issued to another client");
  let redirect: string | undefined;
  if (params.post_logout_redirect_uri) {
    const client = clientId ? await clientByClientId(deps.ctx.db, clientId) : undefined;
    if (!client?.postLogoutRedirectUris.includes(params.post_logout_redirect_uri)) throw new OAuthError("invalid_request", "post_logout_redirect_uri is not registered");
    const url = new URL(params.post_logout_redirect_uri);
    if (params.state) url.searchParams.set("state", params.state);
    redirect = url.toString();
  }
  const ending = sessionId ?? (typeof hint?.sid === "string" ? hint.sid : undefined);
  if (ending) await deps.ctx.db.writeAll((tx) => [endSessionById(tx, ending, new Date(deps.ctx.now()))]);
  return redirect;
}
