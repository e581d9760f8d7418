/**
 * The provider's tokens, signed by its own rings of keys (security/signing-keys.ts, the same table
 * and the same JWKS as the user tokens' keys): ID tokens (`typ: JWT`, `aud` the client) signed with
 * the algorithm the client registered (RS256, ES256 or EdDSA), and access tokens, always RS256, in
 * the RFC 9068 profile (`typ: at+jwt`, `aud` the issuer). Only the latter is a
 * bearer: the guard asks `clientCaller`, which checks the type and audience, then the token's grant
 * (revoked, its user, its session) in one read, with the user of GET /api/users/{id} when asked.
 */
import type { JWK, JWTPayload } from "jose";
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import type { DataCipher } from "../../security/data-encryption";
import { type AsymmetricAlg, createKeyring, type Keyring, loadJose } from "../../security/signing-keys";
import { isOpen } from "../../store/sessions";
import { type GrantHolder, grantHolderOf } from "../../store/oauth";
import type { AlsoUser } from "../../store/users";
import { andThen, type MaybePromise } from "../../maybe-promise";
import type { Caller, RoleName } from "../../security/caller";
import { SCOPES } from "../../security/caller";

export const ACCESS_TOKEN_TYPE = "at+jwt";
/** What a client may register as `id_token_signed_response_alg`: RS256 (OIDC Core's must, the default), ES256, EdDSA (Ed25519). */
export const ID_TOKEN_ALGS = ["RS256", "ES256", "EdDSA"] as const satisfies readonly AsymmetricAlg[];
export type IdTokenAlg = (typeof ID_TOKEN_ALGS)[number];
/** How long an ID token may be used as a hint after it expired (end-session takes expired ones). */
const ID_TOKEN_TTL_S = 600;

export interface ProviderTokens {
  readonly issuer: string;
  /** Its rings' published keys (the JWKS shows them beside the user tokens'); a ring with no key yet makes one first. */
  jwks(): Promise<{ keys: JWK[] }>;
  accessToken(claims: { sub: string; clientId: string; scopes: string[]; grantId: string; authTime?: number }): Promise<{ token: string; expiresIn: number }>;
  idToken(claims: Record<string, unknown> & { sub: string; aud: string }, alg: IdTokenAlg, accessToken?: string): Promise<string>;
  /** The claims of a valid access token of ours (type, audience, issuer, signature, expiry); undefined for anything else. */
  verifyAccess(token: string): Promise<AccessClaims | undefined>;
  /** An ID token of ours, expired or not (end-session's id_token_hint). */
  verifyIdHint(token: string): Promise<JWTPayload | undefined>;
  /** The caller a client's access token stands for, with its grant still good. */
  clientCaller(token: string, also?: AlsoUser): MaybePromise<Caller | undefined>;
  /** Whether the grant's tokens still count: not revoked, its user active on the same token version, its sign-in session open. */
  grantLive(grant: GrantHolder): boolean;
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
/** A verified access token as remembered: its claims, its key, and its API scopes parsed once (not on every request). */
type Verified = { claims: AccessClaims; exp: number; kid: string; scopes: string[] };
/**
 * Access tokens verified, remembered until they expire (as security/bearer-tokens.ts does for user
 * tokens): RS256's check was most of a client's read. Only the signature and claims are kept; the
 * grant (revoked, its user, its session) is read on every request, so revocation stays immediate.
 */
const VERIFIED_CACHE_SIZE = 10_000;
/** The kid of a token that verified (so its header parses): what a grant's read checks for withdrawal (store/oauth.ts grantState). */
export const accessKid = (token: string) => (JSON.parse(Buffer.from(token.slice(0, token.indexOf(".")), "base64url").toString("utf8")) as { kid: string }).kid;

/** OIDC's at_hash: the left half of the access token's hash by the ID token's alg (SHA-256; for EdDSA over Ed25519, SHA-512 as OIDC Core's errata says), base64url. */
const atHash = (token: string, alg: IdTokenAlg) => {
  const digest = new Bun.CryptoHasher(alg === "EdDSA" ? "sha512" : "sha256").update(token).digest();
  return Buffer.from(digest.subarray(0, digest.length / 2)).toString("base64url");
};

/** The provider's rings over the signing keys' table, one an algorithm in ID_TOKEN_ALGS' order: the server's, and `usersvc keys rotate`'s. */
export const providerKeyrings = (config: Pick<Config, "oauthAccessTokenTtlS" | "tokenKeyRotationDays">, db: Database, cipher: DataCipher, now: () => number) =>
  ID_TOKEN_ALGS.map((alg) =>
    createKeyring({ db, cipher, alg, ring: "provider", rotationDays: config.tokenKeyRotationDays, tokenTtlS: Math.max(config.oauthAccessTokenTtlS, ID_TOKEN_TTL_S), now }),
  );

export function createProviderTokens(options: ProviderTokenOptions): ProviderTokens {
  const { db, issuer, now } = options;
  const verified = new Map<string, Verified>();
  const rings = providerKeyrings({ oauthAccessTokenTtlS: options.accessTokenTtlS, tokenKeyRotationDays: options.rotationDays }, db, options.cipher, now);
  const ringOf = Object.fromEntries(ID_TOKEN_ALGS.map((alg, i) => [alg, rings[i]])) as Record<IdTokenAlg, Keyring>;
  /** Access tokens' ring. */
  const keyring = ringOf.RS256;

  async function sign(payload: Record<string, unknown>, typ: string, ttlS: number, alg: IdTokenAlg = "RS256") {
    const signer = await ringOf[alg].signer();
    if (!signer) throw new Error("the provider has no signing key");
    const { SignJWT } = await loadJose();
    const iat = seconds(now());
    return (
      new SignJWT(payload)
        // In this order: an access token's header then begins as security/api-keys.ts CLIENT_TOKEN_START says.
        .setProtectedHeader({ alg, typ, kid: signer.kid })
        .setIssuer(issuer)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ttlS)
        .sign(signer.key)
    );
  }

  /** `algs`: what the token may be signed with (an access token RS256 only; an ID token as its client chose). */
  async function verify(token: string, typ: string, audience: string | undefined, expired: boolean, algs: readonly IdTokenAlg[]) {
    const { decodeProtectedHeader, jwtVerify } = await loadJose();
    try {
      const header = decodeProtectedHeader(token);
      const alg = algs.find((a) => a === header.alg);
      if (!alg || header.typ !== typ || typeof header.kid !== "string") return undefined;
      const key = await ringOf[alg].verifier(header.kid, alg);
      if (!key) return undefined;
      const { payload } = await jwtVerify(token, key, {
        algorithms: [alg],
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

  const grantLive = (grant: GrantHolder) => {
    if (grant.revokedAt !== null || grant.keyRevoked) return false;
    if (grant.userId === null) return true;
    if (!grant.active || grant.userVersion !== grant.grantVersion) return false;
    if (grant.sessionId === null) return true;
    return isOpen(
      {
        active: true,
        tokenVersion: grant.userVersion!,
        sessionVersion: grant.sessionVersion ?? -1,
        endedAt: grant.sessionEndedAt,
        expiresAt: grant.sessionExpiresAt ?? 0,
        lastSeenAt: grant.sessionLastSeenAt ?? 0,
      },
      now(),
      options.idleMs,
    );
  };

  const tokens: ProviderTokens = {
    issuer,
    grantLive,
    async jwks() {
      return { keys: (await Promise.all(rings.map((ring) => ring.jwks()))).flatMap((set) => set.keys) };
    },
    async accessToken({ sub, clientId, scopes, grantId, authTime }) {
      const jti = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64url");
      const token = await sign(
        { sub, aud: issuer, client_id: clientId, scope: scopes.join(" "), gid: grantId, jti, ...(authTime !== undefined && { auth_time: authTime }) },
        ACCESS_TOKEN_TYPE,
        options.accessTokenTtlS,
      );
      return { token, expiresIn: options.accessTokenTtlS };
    },
    idToken(claims, alg, accessToken) {
      return sign({ ...claims, azp: claims.aud, ...(accessToken && { at_hash: atHash(accessToken, alg) }) }, "JWT", ID_TOKEN_TTL_S, alg);
    },
    async verifyAccess(token) {
      const known = rememberedAccess(token);
      // Remembered: still unexpired, and its key still one the ring verifies with (not withdrawn).
      if (known) return (await keyring.verifier(known.kid, "RS256")) ? known.claims : undefined;
      const payload = await verify(token, ACCESS_TOKEN_TYPE, issuer, false, ["RS256"]);
      if (!payload || typeof payload.client_id !== "string" || typeof payload.scope !== "string" || typeof payload.gid !== "string") return undefined;
      const claims = payload as AccessClaims;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      const scopes = claims.scope.split(" ").filter((scope) => (SCOPES as string[]).includes(scope));
      verified.set(token, { claims, exp: claims.exp!, kid: accessKid(token), scopes });
      return claims;
    },
    verifyIdHint: (token) => verify(token, "JWT", undefined, true, ID_TOKEN_ALGS),
    clientCaller(token, also) {
      // A token seen before costs no promise on the embedded driver: its key's withdrawal is read in the grant's statement.
      const known = rememberedAccess(token);
      if (known) return callerOfGrant(known, also);
      return tokens.verifyAccess(token).then((claims) => (claims ? callerOfGrant(verified.get(token)!, also) : undefined));
    },
  };

  /**
   * The caller of an access token whose signature checked: its grant still good, read with whether
   * its key was withdrawn. The client is the signed claim's: the grant was issued to it, and goes with it.
   */
  function callerOfGrant({ claims, kid, scopes }: Verified, also: AlsoUser | undefined): MaybePromise<Caller | undefined> {
    return andThen(grantHolderOf(db, claims.gid, kid, also), (grant) => {
      if (grant?.keyRevoked) keyring.withdrawn(kid);
      if (!grant || !grantLive(grant)) return undefined;
      const clientId = claims.client_id;
      // client_credentials: the client itself, acting as USER at most (never ADMIN).
      if (grant.userId === null) return { id: 0, email: clientId, roles: ["USER"], tokenVersion: 0, client: { clientId, scopes, withoutUser: true } };
      return {
        id: grant.userId,
        email: grant.email!,
        roles: (grant.roles?.split(",") ?? []) as RoleName[],
        tokenVersion: grant.userVersion!,
        client: { clientId, scopes },
      };
    });
  }

  /** A remembered access token while it is unexpired (forgotten once it expires). */
  function rememberedAccess(token: string): Verified | undefined {
    const known = verified.get(token);
    if (!known) return undefined;
    if (known.exp > seconds(now())) return known;
    verified.delete(token);
    return undefined;
  }
  return tokens;
}
