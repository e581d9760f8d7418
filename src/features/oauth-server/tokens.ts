/**
 * The provider's tokens, signed RS256 by its own ring of keys (security/signing-keys.ts, the same
 * table and the same JWKS as the user tokens' keys): ID tokens (`typ: JWT`, `aud` the client) and
 * access tokens in the RFC 9068 profile (`typ: at+jwt`, `aud` the issuer). Only the latter is a
 * bearer: the guard asks `clientCaller`, which checks the type and audience, then the token's grant
 * (revoked, its user, its session) in one read.
 */
import type { JWTPayload } from "jose";
import type { Database } from "../../db/database";
import type { DataCipher } from "../../security/data-encryption";
import { createKeyring, type Keyring, loadJose } from "../../security/signing-keys";
import { isOpen } from "../../store/sessions";
import { type GrantState, grantState } from "../../store/oauth";
import type { Caller, RoleName } from "../../security/caller";
import { SCOPES } from "../../security/caller";

export const ACCESS_TOKEN_TYPE = "at+jwt";
/** How long an ID token may be used as a hint after it expired (end-session takes expired ones). */
const ID_TOKEN_TTL_S = 600;

export interface ProviderTokens {
  readonly issuer: string;
  readonly keyring: Keyring;
  accessToken(claims: { sub: string; clientId: string; scopes: string[]; grantId: string; authTime?: number }): Promise<{ token: string; expiresIn: number }>;
  idToken(claims: Record<string, unknown> & { sub: string; aud: string }, accessToken?: string): Promise<string>;
  /** The claims of a valid access token of ours (type, audience, issuer, signature, expiry); undefined for anything else. */
  verifyAccess(token: string): Promise<AccessClaims | undefined>;
  /** An ID token of ours, expired or not (end-session's id_token_hint). */
  verifyIdHint(token: string): Promise<JWTPayload | undefined>;
  /** The caller a client's access token stands for, with its grant still good. */
  clientCaller(token: string): Promise<Caller | undefined>;
  /** Whether the grant's tokens still count: not revoked, its user active on the same token version, its sign-in session open. */
  grantLive(grant: GrantState): boolean;
}

export interface ProviderTokenOptions {
  db: Database;
  cipher: DataCipher;
  issuer: string;
  accessTokenTtlS: number;
  rotationDays: number;
  idleMs: number;
  now: () => number;
}

const seconds = (ms: number) => Math.floor(ms / 1000);

type AccessClaims = JWTPayload & { client_id: string; scope: string; gid: string; sub: string };
/**
 * Access tokens verified, remembered until they expire (as security/bearer-tokens.ts does for user
 * tokens): RS256's check was most of a client's read. Only the signature and claims are kept; the
 * grant (revoked, its user, its session) is read on every request, so revocation stays immediate.
 */
const VERIFIED_CACHE_SIZE = 10_000;
/** The kid of a token that verified (so its header parses). */
const decodeProtectedHeaderKid = (token: string) => (JSON.parse(Buffer.from(token.slice(0, token.indexOf(".")), "base64url").toString("utf8")) as { kid: string }).kid;

/** OIDC's at_hash: the left half of the access token's SHA-256, base64url. */
const atHash = (token: string) => Buffer.from(new Bun.CryptoHasher("sha256").update(token).digest().subarray(0, 16)).toString("base64url");

export function createProviderTokens(options: ProviderTokenOptions): ProviderTokens {
  const { db, issuer, now } = options;
  const verified = new Map<string, { claims: AccessClaims; exp: number; kid: string }>();
  const keyring = createKeyring({
    db,
    cipher: options.cipher,
    alg: "RS256",
    rotationDays: options.rotationDays,
    tokenTtlS: Math.max(options.accessTokenTtlS, ID_TOKEN_TTL_S),
    now,
  });

  async function sign(payload: Record<string, unknown>, typ: string, ttlS: number) {
    const signer = await keyring.signer();
    if (!signer) throw new Error("the provider has no signing key");
    const { SignJWT } = await loadJose();
    const iat = seconds(now());
    return (
      new SignJWT(payload)
        // In this order: an access token's header then begins as security/api-keys.ts CLIENT_TOKEN_START says.
        .setProtectedHeader({ alg: "RS256", typ, kid: signer.kid })
        .setIssuer(issuer)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttlS)
        .sign(signer.key)
    );
  }

  async function verify(token: string, typ: string, audience: string | undefined, expired: boolean) {
    const { decodeProtectedHeader, jwtVerify } = await loadJose();
    try {
      const header = decodeProtectedHeader(token);
      if (header.alg !== "RS256" || header.typ !== typ || typeof header.kid !== "string") return undefined;
      const key = await keyring.verifier(header.kid, "RS256");
      if (!key) return undefined;
      const { payload } = await jwtVerify(token, key, {
        algorithms: ["RS256"],
        typ,
        issuer,
        ...(audience !== undefined && { audience }),
        // An expired hint still names who signs out; a bearer must be current.
        currentDate: new Date(expired ? 0 : now()),
        requiredClaims: ["sub", "exp"],
      });
      return payload;
    } catch {
      return undefined;
    }
  }

  const grantLive = (grant: GrantState) => {
    if (grant.revokedAt !== null) return false;
    if (grant.userId === null) return true;
    if (!grant.active || grant.userVersion !== grant.grantVersion) return false;
    if (grant.sessionId === null) return true;
    return isOpen(
      {
        active: true,
        tokenVersion: grant.userVersion!,
        sessionVersion: grant.sessionVersion ?? -1,
        endedAt: grant.sessionEndedAt?.getTime() ?? null,
        expiresAt: grant.sessionExpiresAt?.getTime() ?? 0,
        lastSeenAt: grant.sessionLastSeenAt?.getTime() ?? 0,
      },
      now(),
      options.idleMs,
    );
  };

  const tokens: ProviderTokens = {
    issuer,
    keyring,
    grantLive,
    async accessToken({ sub, clientId, scopes, grantId, authTime }) {
      const jti = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64url");
      const token = await sign(
        { sub, aud: issuer, client_id: clientId, scope: scopes.join(" "), gid: grantId, jti, ...(authTime !== undefined && { auth_time: authTime }) },
        ACCESS_TOKEN_TYPE,
        options.accessTokenTtlS,
      );
      return { token, expiresIn: options.accessTokenTtlS };
    },
    idToken(claims, accessToken) {
      return sign({ ...claims, azp: claims.aud, ...(accessToken && { at_hash: atHash(accessToken) }) }, "JWT", ID_TOKEN_TTL_S);
    },
    async verifyAccess(token) {
      const known = verified.get(token);
      if (known) {
        // Remembered: still unexpired, and its key still one the ring verifies with (not withdrawn).
        if (known.exp > seconds(now()) && (await keyring.verifier(known.kid, "RS256"))) return known.claims;
        verified.delete(token);
        return undefined;
      }
      const payload = await verify(token, ACCESS_TOKEN_TYPE, issuer, false);
      if (!payload || typeof payload.client_id !== "string" || typeof payload.scope !== "string" || typeof payload.gid !== "string") return undefined;
      const claims = payload as AccessClaims;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      verified.set(token, { claims, exp: claims.exp!, kid: decodeProtectedHeaderKid(token) });
      return claims;
    },
    verifyIdHint: (token) => verify(token, "JWT", undefined, true),
    async clientCaller(token) {
      const claims = await tokens.verifyAccess(token);
      if (!claims) return undefined;
      const grant = await grantState(db, claims.gid);
      if (!grant || grant.clientId !== claims.client_id || !grantLive(grant)) return undefined;
      const scopes = claims.scope.split(" ").filter((scope) => (SCOPES as string[]).includes(scope));
      // client_credentials: the client itself, acting as USER at most (never ADMIN).
      if (grant.userId === null) return { id: 0, email: grant.clientId, roles: ["USER"], tokenVersion: 0, client: { clientId: grant.clientId, scopes, withoutUser: true } };
      return {
        id: grant.userId,
        email: grant.email!,
        roles: (grant.roles?.split(",") ?? []) as RoleName[],
        tokenVersion: grant.userVersion!,
        client: { clientId: grant.clientId, scopes },
      };
    },
  };
  return tokens;
}
