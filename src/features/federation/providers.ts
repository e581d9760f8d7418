/**
 * The relying party's side of each configured provider, through openid-client 6 (loaded on the
 * first sign-in: a server with no provider never evaluates it). OpenID Connect providers are
 * discovered on first use (and again after a failure, so an issuer that was down is retried);
 * the library checks state, PKCE, the ID token (signature by the provider's JWKS, iss, aud, exp,
 * nonce, auth_time against max_age) and userinfo's `sub`. GitHub is OAuth 2 without OpenID Connect:
 * the same library's authorization code grant, then its user and e-mail APIs.
 */
import type { ProviderConfig } from "../../config";
import { AppError } from "../../errors";

type OpenIdClient = typeof import("openid-client");
type Configuration = import("openid-client").Configuration;
let library: OpenIdClient | undefined;
const openIdClient = (): OpenIdClient => {
  library ??= require("openid-client") as OpenIdClient;
  return library;
};

/** What a provider said about who signed in. */
export interface ProviderIdentity {
  issuer: string;
  subject: string;
  email: string | null;
  /** Only an explicit true: a missing claim counts as unverified. */
  emailVerified: boolean;
  name: string | null;
  /** The provider's sign-in time (an ID token's auth_time), seconds. */
  authTime?: number;
  /** OIDC_<NAME>_KEEP_TOKENS=on: the provider's tokens, sealed by the data cipher (flow.ts), to keep with the identity. */
  tokensSealed?: string;
}

/** The provider's tokens of a sign-in, as OIDC_<NAME>_KEEP_TOKENS keeps them (sealed). */
export interface ProviderTokens {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  scope?: string;
  /** When the access token expires (ms), when the provider said. */
  expiresAt?: number;
}

/** The token endpoint's answer as kept; `at`: when it was received (ms). */
const keptTokens = (tokens: { access_token: string; refresh_token?: string; id_token?: string; scope?: string; expires_in?: number }, at: number): ProviderTokens => ({
  accessToken: tokens.access_token,
  ...(tokens.refresh_token && { refreshToken: tokens.refresh_token }),
  ...(tokens.id_token && { idToken: tokens.id_token }),
  ...(tokens.scope && { scope: tokens.scope }),
  ...(tokens.expires_in !== undefined && { expiresAt: at + tokens.expires_in * 1000 }),
});

/** What a flow keeps between start and callback to check the provider's answer. */
export interface FlowChecks {
  state: string;
  nonce: string;
  /** The PKCE verifier of our request to the provider (not the page's). */
  verifier: string;
  /** A step-up asks for a fresh sign-in: its auth_time must be this recent (seconds). */
  maxAge?: number;
}

export interface Connection {
  authorizationUrl(redirectUri: string, checks: FlowChecks): Promise<URL>;
  /** The identity from the callback's URL (its query as the provider sent it, on the registered redirect URI), and the provider's tokens. */
  identityOf(callbackUrl: URL, checks: FlowChecks): Promise<{ identity: ProviderIdentity; tokens: ProviderTokens }>;
}

const LOOPBACK_HTTP = (url: string) => url.startsWith("http://");

/** The provider's failure as the page's error: cancelled, unreachable, or an answer that did not pass the checks. */
export function providerFailure(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const { AuthorizationResponseError, ClientError, ResponseBodyError, WWWAuthenticateChallengeError } = openIdClient();
  if (error instanceof AuthorizationResponseError) return new AppError(error.error === "access_denied" ? "PROVIDER_DENIED" : "PROVIDER_REJECTED");
  if (error instanceof ResponseBodyError || error instanceof WWWAuthenticateChallengeError) return new AppError(error.status >= 500 ? "PROVIDER_UNAVAILABLE" : "PROVIDER_REJECTED");
  if (error instanceof ClientError) {
    const status = (error.cause as { status?: number } | undefined)?.status ?? 0;
    return new AppError(status >= 500 ? "PROVIDER_UNAVAILABLE" : "PROVIDER_REJECTED");
  }
  // fetch's own failures: refused, reset, timed out.
  return new AppError("PROVIDER_UNAVAILABLE");
}

function oidcConnection(provider: ProviderConfig): Connection {
  let discovered: Promise<Configuration> | undefined;
  const configuration = () => {
    const client = openIdClient();
    discovered ??= client
      .discovery(new URL(provider.issuer), provider.clientId, provider.clientSecret, undefined, {
        timeout: 10,
        ...(LOOPBACK_HTTP(provider.issuer) && { execute: [client.allowInsecureRequests] }),
      })
      .then((config) => {
        // Without it the library trusts an ID token from the token endpoint on TLS alone; ours checks its signature by the JWKS too.
        client.enableNonRepudiationChecks(config);
        return config;
      })
      .catch((error) => {
        discovered = undefined;
        throw error;
      });
    return discovered;
  };
  return {
    async authorizationUrl(redirectUri, checks) {
      const client = openIdClient();
      return client.buildAuthorizationUrl(await configuration(), {
        redirect_uri: redirectUri,
        scope: provider.scopes,
        state: checks.state,
        nonce: checks.nonce,
        code_challenge: await client.calculatePKCECodeChallenge(checks.verifier),
        code_challenge_method: "S256",
        ...(checks.maxAge !== undefined && { prompt: "login", max_age: String(checks.maxAge) }),
      });
    },
    async identityOf(callbackUrl, checks) {
      const client = openIdClient();
      const config = await configuration();
      const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: checks.verifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
        maxAge: checks.maxAge,
      });
      const claims = tokens.claims();
      if (!claims) throw new AppError("PROVIDER_REJECTED");
      if (provider.tenants) checkTenant(provider, claims);
      let merged: Record<string, unknown> = claims;
      // Claims the ID token lacks come from userinfo, whose sub must be the ID token's (the library checks).
      if ((claims.email === undefined || claims.email_verified === undefined) && config.serverMetadata().userinfo_endpoint) {
        merged = { ...(await client.fetchUserInfo(config, tokens.access_token, claims.sub)), ...claims };
      }
      const identity = {
        issuer: claims.iss,
        subject: claims.sub,
        email: typeof merged.email === "string" ? merged.email : null,
        emailVerified: merged.email_verified === true,
        name: typeof merged.name === "string" ? merged.name : null,
        authTime: claims.auth_time,
      };
      return { identity, tokens: keptTokens(tokens, Date.now()) };
    },
  };
}

/**
 * Microsoft: a user of an allowed tenant only (the ID token's `tid`), whose `iss` is that tenant's
 * own issuer (`<origin>/<tid>/v2.0`): on the multi-tenant endpoint (`common`) the discovered issuer
 * is a template that any tenant's token fits, so the pair is ours to check, and a token of one
 * tenant that names another in `tid` is refused.
 */
function checkTenant(provider: ProviderConfig, claims: { iss: string; tid?: unknown }) {
  const tid = typeof claims.tid === "string" ? claims.tid : undefined;
  if (!tid || !provider.tenants?.includes(tid)) throw new AppError("PROVIDER_REJECTED");
  if (claims.iss !== `${new URL(provider.issuer).origin}/${tid}/v2.0`) throw new AppError("PROVIDER_REJECTED");
}

/** GitHub's answers the preset reads. */
interface GitHubUser {
  id: number;
  login: string;
  name: string | null;
}
interface GitHubEmail {
  email: string;
  primary: boolean;
  verified: boolean;
}

function gitHubConnection(provider: ProviderConfig): Connection {
  const apiUrl = provider.apiUrl ?? "https://api.github.com";
  let made: Configuration | undefined;
  const configuration = () => {
    const client = openIdClient();
    if (made) return made;
    made = new client.Configuration(
      { issuer: provider.issuer, authorization_endpoint: `${provider.issuer}/login/oauth/authorize`, token_endpoint: `${provider.issuer}/login/oauth/access_token` },
      provider.clientId,
      provider.clientSecret,
    );
    if (LOOPBACK_HTTP(provider.issuer) || LOOPBACK_HTTP(apiUrl)) client.allowInsecureRequests(made);
    return made;
  };
  const api = async <T>(accessToken: string, path: string): Promise<T> => {
    const response = await openIdClient().fetchProtectedResource(
      configuration(),
      accessToken,
      new URL(`${apiUrl}${path}`),
      "GET",
      undefined,
      new Headers({ accept: "application/vnd.github+json" }),
    );
    if (!response.ok) throw new AppError(response.status >= 500 ? "PROVIDER_UNAVAILABLE" : "PROVIDER_REJECTED");
    return (await response.json()) as T;
  };
  return {
    async authorizationUrl(redirectUri, checks) {
      const client = openIdClient();
      return client.buildAuthorizationUrl(configuration(), {
        redirect_uri: redirectUri,
        scope: provider.scopes,
        state: checks.state,
        code_challenge: await client.calculatePKCECodeChallenge(checks.verifier),
        code_challenge_method: "S256",
        ...(checks.maxAge !== undefined && { prompt: "select_account" }),
      });
    },
    async identityOf(callbackUrl, checks) {
      const tokens = await openIdClient().authorizationCodeGrant(configuration(), callbackUrl, { pkceCodeVerifier: checks.verifier, expectedState: checks.state });
      const [user, emails] = await Promise.all([api<GitHubUser>(tokens.access_token, "/user"), api<GitHubEmail[]>(tokens.access_token, "/user/emails")]);
      if (!Number.isSafeInteger(user.id)) throw new AppError("PROVIDER_REJECTED");
      const primary = Array.isArray(emails) ? emails.find((e) => e.primary) : undefined;
      const identity = {
        issuer: provider.issuer,
        subject: String(user.id),
        email: primary?.email ?? null,
        emailVerified: primary?.verified === true,
        name: user.name ?? user.login,
      };
      return { identity, tokens: keptTokens(tokens, Date.now()) };
    },
  };
}

/** Each configured provider's connection, made once per app. */
export function connectionsOf(providers: readonly ProviderConfig[]): Map<string, { provider: ProviderConfig; connection: Connection }> {
  return new Map(providers.map((provider) => [provider.name, { provider, connection: provider.kind === "github" ? gitHubConnection(provider) : oidcConnection(provider) }]));
}

/** Random values for a flow (the library's: 32 random bytes, base64url). */
export function flowRandoms() {
  const client = openIdClient();
  return { state: client.randomState(), nonce: client.randomNonce(), verifier: client.randomPKCECodeVerifier() };
}
