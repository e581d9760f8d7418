/**
 * Bearer tokens: claims sub (the e-mail), iat, exp = iat + ACCESS_TOKEN_TTL (18000 s by default,
 * never past the session's end), ver (the user's token version, so logout can revoke), uid (the
 * account's id: after an e-mail change the address may belong to another account), sid (the session
 * a sign-in opened; tokens of earlier releases carry none), auth_time (when that sign-in happened:
 * routes that need a recent one read it), iss (PUBLIC_URL, else `usersvc`) and,
 * with TOKEN_AUDIENCE, aud; the header names its `kid`. Signed with HS512 over the UTF-8 bytes of
 * JWT_SECRET (the default), or by the keyring's current EdDSA/ES256 key (security/signing-keys.ts).
 * jose signs (iat from the app's clock) and verifies with the algorithm pinned by the header's
 * kind, so alg:none, HS256 or RS* tokens never pass whatever their signature.
 */
import type { JWK, JWTVerifyOptions, ProtectedHeaderParameters } from "jose";
import type { Config } from "../config";
import type { Database } from "../db/database";
import type { DataCipher } from "./data-encryption";
import { createKeyring, type Keyring, loadJose } from "./signing-keys";

/** The kid of HS512 tokens: the one symmetric key, JWT_SECRET (never in the JWKS). */
export const HS512_KID = "HS512";

export const TOKEN_TTL_SECONDS = 18_000;

export interface TokenClaims {
  sub: string;
  ver: number;
  exp: number;
  /** Issued-at (seconds), when the token carries one. */
  iat?: number;
  /** The account the token was issued to; tokens of other libraries and earlier releases carry none. */
  uid?: number;
  /** The session the token belongs to (store/sessions.ts); tokens of other libraries and earlier releases carry none. */
  sid?: string;
  /** The asymmetric key that signed the token (the guard refuses a withdrawn one); none for HS512. */
  kid?: string;
  /** When the sign-in behind the token happened (seconds; OpenID Connect's auth_time). */
  authTime?: number;
}

/** Beyond HS512: the keyring (TOKEN_SIGNING=EdDSA|ES256, or to verify tokens after a switch), iss and aud. */
export interface TokenSigning {
  keyring?: Keyring;
  issuer: string;
  audience?: string;
}

/** A session token's session, the instant (seconds) no token of it may outlive, and when its sign-in happened (seconds). */
export interface TokenSession {
  sid: string;
  notAfter: number;
  authTime: number;
  /** How the session signed in (RFC 8176 method names: pwd, otp, hwk; rec for a recovery code). */
  amr?: string[];
}

export interface Tokens {
  /** `userId` is always given by the service; without it the token is like one minted by another JWT library. */
  issue(email: string, tokenVersion: number, userId?: number, session?: TokenSession): Promise<string>;
  /** The exp a token issued now gets (seconds), within the session's lifetime. */
  expiryOf(session?: TokenSession): number;
  /** The claims of a valid, unexpired token (HS512 while it counts, or signed by a published key); undefined for anything else. */
  verify(token: string): Promise<TokenClaims | undefined>;
  /** verify's answer from the tokens already verified, when it needs nothing else (no read, no crypto); else undefined, for verify to decide. */
  remembered(token: string): TokenClaims | undefined;
  /** The guard found the token's key withdrawn: stop signing with it (signing-keys.ts). */
  withdrawn(kid: string): void;
  /** The published public keys (none under HS512 before any switch). */
  jwks(): Promise<{ keys: JWK[] }>;
}

const MAX_TOKEN_LENGTH = 4096;
/**
 * Verified tokens, remembered until they expire: the HMAC check and jose's claim parsing were
 * the largest cost of an authenticated request after the database (CPU profile, npm run bench).
 * Only the signature and claims are remembered; whether the user still exists, is active and
 * has this token version is read on every request (guard.ts), so revocation stays immediate.
 */
const VERIFIED_CACHE_SIZE = 10_000;

/** `now`: the clock of iat, exp and expiry checks (the app's; a CLI passes the system's). */
export function createTokens(secret: string, now: () => number, ttlSeconds = TOKEN_TTL_SECONDS, signing: TokenSigning = { issuer: "usersvc" }): Tokens {
  const { keyring, issuer, audience } = signing;
  // JWT_SECRET as an HMAC key, imported once: given the raw bytes, jose imports them anew on every sign and verify.
  let hmac: Promise<CryptoKey> | undefined;
  const hmacKey = () => (hmac ??= crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-512" }, false, ["sign", "verify"]));
  const verified = new Map<string, TokenClaims>();
  const expiryOf = (session?: TokenSession) => Math.min(Math.floor(now() / 1000) + ttlSeconds, session?.notAfter ?? Number.POSITIVE_INFINITY);
  /** HS512 tokens count only while the keyring says so (before a switch to EdDSA/ES256); others need its key. */
  const stillAccepted = (claims: TokenClaims) => (claims.kid === undefined ? (keyring?.acceptsHs512(claims.iat) ?? true) : true);
  /** stillAccepted's answer when the keyring can give it without a read. */
  const stillAcceptedNow = (claims: TokenClaims) => (claims.kid === undefined ? (keyring ? keyring.acceptsHs512Now() : true) : true);
  /** A remembered token still unexpired (jose's rule: expired once exp <= now, in whole seconds). */
  const unexpired = (claims: TokenClaims) => claims.exp > Math.floor(now() / 1000);

  async function verifyKey(token: string): Promise<{ alg: string; key: Uint8Array | CryptoKey } | undefined> {
    const { decodeProtectedHeader } = await loadJose();
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return undefined;
    }
    if (header.alg === "HS512") return { alg: "HS512", key: await hmacKey() };
    if (typeof header.alg !== "string" || typeof header.kid !== "string" || !keyring) return undefined;
    const key = await keyring.verifier(header.kid, header.alg);
    return key && { alg: header.alg, key };
  }

  return {
    expiryOf,
    jwks: async () => (keyring ? keyring.jwks() : { keys: [] }),
    withdrawn: (kid) => keyring?.withdrawn(kid),
    async issue(email, tokenVersion, userId, session) {
      const iat = Math.floor(now() / 1000);
      const signer = await keyring?.signer();
      const { SignJWT } = await loadJose();
      // The claims in @elysiajs/jwt's order (sub, ver, uid, sid, auth_time, amr, exp, iat), so tokens look as before.
      const jwt = new SignJWT({
        sub: email,
        ver: tokenVersion,
        ...(userId === undefined ? {} : { uid: userId }),
        ...(session && { sid: session.sid, auth_time: session.authTime }),
        ...(session?.amr && { amr: session.amr }),
      })
        .setProtectedHeader({ alg: signer?.alg ?? "HS512", typ: "JWT", kid: signer?.kid ?? HS512_KID })
        .setIssuer(issuer)
        .setExpirationTime(expiryOf(session))
        .setIssuedAt(iat);
      if (audience !== undefined) jwt.setAudience(audience);
      return jwt.sign(signer?.key ?? (await hmacKey()));
    },
    remembered(token) {
      const known = verified.get(token);
      return known && unexpired(known) && stillAcceptedNow(known) === true ? known : undefined;
    },
    async verify(token) {
      if (token.length > MAX_TOKEN_LENGTH) return undefined;
      const known = verified.get(token);
      if (known) {
        if (unexpired(known) && (await stillAccepted(known))) return known;
        verified.delete(token);
        return undefined;
      }
      const key = await verifyKey(token);
      if (!key) return undefined;
      const options: JWTVerifyOptions = {
        algorithms: [key.alg],
        // iat is not required: a token minted elsewhere with sub and exp is enough (test/auth-tokens.test.ts, "only sub and exp").
        requiredClaims: ["sub", "exp"],
        currentDate: new Date(now()),
        // Only we hold the asymmetric keys: their tokens name us. Another library's HS512 token may name no issuer.
        ...(key.alg !== "HS512" && { issuer }),
        ...(audience !== undefined && { audience }),
      };
      const { jwtVerify } = await loadJose();
      const { protectedHeader, payload: claims } = await jwtVerify(token, key.key, options).catch(() => ({ protectedHeader: undefined, payload: undefined }));
      if (!claims || typeof claims.sub !== "string" || typeof claims.exp !== "number") return undefined;
      // A token minted elsewhere without ver counts as version 0: the user's first logout revokes it.
      const ver = typeof claims.ver === "number" ? claims.ver : 0;
      const result: TokenClaims = { sub: claims.sub, ver, exp: claims.exp };
      if (typeof claims.iat === "number") result.iat = claims.iat;
      if (typeof claims.uid === "number") result.uid = claims.uid;
      if (typeof claims.sid === "string") result.sid = claims.sid;
      if (typeof claims.auth_time === "number") result.authTime = claims.auth_time;
      // Whatever kid an HS512 header names, JWT_SECRET signed it: its claims name none.
      if (key.alg !== "HS512") result.kid = protectedHeader?.kid as string;
      if (!(await stillAccepted(result))) return undefined;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      verified.set(token, result);
      return result;
    },
  };
}

/**
 * The tokens TOKEN_SIGNING configures, with the keyring of the database's signing keys: under
 * HS512 it verifies the tokens of keys used before (switching back signs no one out) and reads
 * nothing until such a token arrives.
 */
export function configuredTokens(
  config: Pick<Config, "tokenSigning" | "tokenKeyRotationDays" | "accessTokenTtlS" | "publicUrl" | "tokenAudience">,
  secret: string,
  db: Database,
  cipher: DataCipher,
  now: () => number,
): Tokens & { keyring: Keyring } {
  const keyring = createKeyring({ db, cipher, alg: config.tokenSigning, rotationDays: config.tokenKeyRotationDays, tokenTtlS: config.accessTokenTtlS, now });
  return { ...createTokens(secret, now, config.accessTokenTtlS, { keyring, issuer: config.publicUrl ?? "usersvc", audience: config.tokenAudience }), keyring };
}
