/**
 * Bearer tokens: HS512 over the UTF-8 bytes of JWT_SECRET, claims sub (the e-mail), iat,
 * exp = iat + ACCESS_TOKEN_TTL (18000 s by default, never past the session's end), ver (the user's
 * token version, so logout can revoke), uid (the account's id: after an e-mail change the address
 * may belong to another account), sid (the session a sign-in opened; tokens of earlier releases
 * carry none) and auth_time (when that sign-in happened: routes that need a recent one read it). Signing is jose's SignJWT, so iat comes from the app's clock (@elysiajs/jwt's sign
 * stamps iat from the machine's); verifying is @elysiajs/jwt's, and pins the algorithm, so
 * alg:none, HS256 or RS* tokens never pass whatever their signature.
 */
import { jwt } from "@elysiajs/jwt";
import { SignJWT } from "jose";

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
  /** When the sign-in behind the token happened (seconds; OpenID Connect's auth_time). */
  authTime?: number;
}

/** A session token's session, the instant (seconds) no token of it may outlive, and when its sign-in happened (seconds). */
export interface TokenSession {
  sid: string;
  notAfter: number;
  authTime: number;
}

export interface Tokens {
  /** `userId` is always given by the service; without it the token is like one minted by another JWT library. */
  issue(email: string, tokenVersion: number, userId?: number, session?: TokenSession): Promise<string>;
  /** The exp a token issued now gets (seconds), within the session's lifetime. */
  expiryOf(session?: TokenSession): number;
  /** The claims of a valid, unexpired HS512 token; undefined for anything else. */
  verify(token: string): Promise<TokenClaims | undefined>;
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
export function createTokens(secret: string, now: () => number, ttlSeconds = TOKEN_TTL_SECONDS): Tokens {
  const codec = jwt({ name: "jwt", secret, alg: "HS512" }).decorator.jwt;
  const key = new TextEncoder().encode(secret);
  const verified = new Map<string, TokenClaims>();
  const expiryOf = (session?: TokenSession) => Math.min(Math.floor(now() / 1000) + ttlSeconds, session?.notAfter ?? Number.POSITIVE_INFINITY);
  return {
    expiryOf,
    issue(email, tokenVersion, userId, session) {
      const iat = Math.floor(now() / 1000);
      // The header and claims in @elysiajs/jwt's order (sub, ver, uid, sid, exp, iat), so tokens look as before.
      const claims = { sub: email, ver: tokenVersion, ...(userId === undefined ? {} : { uid: userId }), ...(session && { sid: session.sid, auth_time: session.authTime }) };
      return new SignJWT(claims).setProtectedHeader({ alg: "HS512", typ: "JWT" }).setExpirationTime(expiryOf(session)).setIssuedAt(iat).sign(key);
    },
    async verify(token) {
      if (token.length > MAX_TOKEN_LENGTH) return undefined;
      const known = verified.get(token);
      if (known) {
        // jose's rule: expired once exp <= now in whole seconds.
        if (known.exp > Math.floor(now() / 1000)) return known;
        verified.delete(token);
        return undefined;
      }
      const claims = await codec.verify(token, {
        algorithms: ["HS512"],
        // iat is not required: a token minted elsewhere with sub and exp is enough (decisions.md).
        requiredClaims: ["sub", "exp"],
        currentDate: new Date(now()),
      });
      if (!claims || typeof claims.sub !== "string" || typeof claims.exp !== "number") return undefined;
      // A token minted elsewhere without ver counts as version 0: the user's first logout revokes it.
      const ver = typeof claims.ver === "number" ? claims.ver : 0;
      const result: TokenClaims = { sub: claims.sub, ver, exp: claims.exp };
      if (typeof claims.iat === "number") result.iat = claims.iat;
      if (typeof claims.uid === "number") result.uid = claims.uid;
      if (typeof claims.sid === "string") result.sid = claims.sid;
      if (typeof claims.auth_time === "number") result.authTime = claims.auth_time;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      verified.set(token, result);
      return result;
    },
  };
}
