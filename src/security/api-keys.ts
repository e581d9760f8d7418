/**
 * API keys: `usk_<prefix>_<secret>` (docs/security.md, "API keys"). The prefix (8 base62 characters)
 * finds the key; the secret (32 random bytes in base62, no `_` inside) exists only in the answer
 * that created it, the database keeping its SHA-256, compared in constant time. Secret scanners
 * find keys by KEY_PATTERN. Here too: the routes that refuse keys whatever they declare, the
 * per-instance rate limit per key, and lastUsedAt / lastUsedFrom written in batches.
 */
import { Elysia } from "elysia";
import type { Logger } from "pino";
import type { Database } from "../db/database";
import { sha256Base64url } from "../digest";
import { AppError } from "../errors";
import { touchKeysStatement } from "../store/api-keys";
import { authorizationOf } from "../http/authorization";
import { requestPath } from "../http/request-url";

/** What a secret scanner looks for (docs/security.md, "API keys"). */
export const KEY_PATTERN = /usk_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}/;
const PRESENTED = /^usk_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}$/;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SECRET_BYTES = 32;
/** 62^43 > 2^256: every 32-byte secret fits 43 digits (padded with leading zeros). */
const SECRET_DIGITS = 43;

function base62(bytes: Uint8Array, digits: number): string {
  let n = BigInt(`0x${Buffer.from(bytes).toString("hex") || "0"}`);
  let out = "";
  for (let i = 0; i < digits; i++) {
    out = BASE62[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

const randomBytes = (n: number) => crypto.getRandomValues(new Uint8Array(n));
/** The stored form of a secret: its SHA-256 in base64url (43 characters). */
export const secretHash = sha256Base64url;

/** A new key: the whole key (shown once), its prefix and the hash to store. */
export function newKey() {
  // The low 8 base62 digits of 6 random bytes: the unique index refuses a clash (62^8 ≈ 2·10^14 prefixes).
  const prefix = base62(randomBytes(6), 8);
  const secret = base62(randomBytes(SECRET_BYTES), SECRET_DIGITS);
  return { key: `usk_${prefix}_${secret}`, prefix, secretHash: secretHash(secret) };
}

/** The prefix and secret of a presented bearer that looks like a key; undefined for anything else. */
export function parseKey(bearer: string): { prefix: string; secret: string } | undefined {
  return PRESENTED.test(bearer) ? { prefix: bearer.slice(4, 12), secret: bearer.slice(13) } : undefined;
}

/**
 * Whether `secret` hashes to `stored`, in constant time: every character of the two digests is
 * compared whatever the first difference (their lengths, 43, are no secret). A key's request
 * pays for the hash and no more: node's timingSafeEqual wanted both digests as Buffers, and
 * decoding the stored one cost more than hashing (npm run bench, docs/performance.md "API keys").
 */
export function secretMatches(secret: string, stored: string): boolean {
  const given = secretHash(secret);
  if (given.length !== stored.length) return false;
  let difference = 0;
  for (let i = 0; i < given.length; i++) difference |= given.charCodeAt(i) ^ stored.charCodeAt(i);
  return difference === 0;
}

export const isKeyBearer = (bearer: string) => bearer.startsWith("usk_");

/**
 * Paths (below BASE_PATH) where a key is refused whatever the route: credentials (/api/auth),
 * administration (/api/account, /api/admin, /api/audit), operations (/actuator, but for its health
 * and info), each with what lies under it. One expression: the boundary asks it of every key's request.
 */
const REFUSED = /^\/(?:api\/(?:auth|account|admin|audit)|actuator(?!\/(?:health|info)(?:\/|$)))(?:\/|$)/;
export const refusesKeys = (path: string) => REFUSED.test(path);

/**
 * How a client's access token (OpenID Provider, features/oauth-server/tokens.ts) begins: its JWT
 * header is always {"alg":"RS256","typ":"at+jwt","kid":…}, whose first 30 characters encode to
 * these 40. It is narrowed as a key is, so the boundary knows it by them as it knows a key by `usk_`.
 */
export const CLIENT_TOKEN_START = Buffer.from('{"alg":"RS256","typ":"at+jwt",').toString("base64url");

/**
 * 403 API_KEY_NOT_ALLOWED for a key or a client's access token on a refused path, before any route
 * runs: open routes (login, refresh) read no caller, and either is refused there before it is even looked up.
 */
export const apiKeyBoundary = (basePath: string) =>
  new Elysia({ name: "api-key-boundary" }).onRequest(({ request }) => {
    const header = authorizationOf(request);
    // "Bearer " as clients send it, before folding any case: every key's request passes here.
    if (!header || !(header.startsWith("usk_", 7) || header.startsWith(CLIENT_TOKEN_START, 7))) return;
    if (!(header.startsWith("Bearer ") || header.slice(0, 7).toLowerCase() === "bearer ")) return;
    if (refusesKeys(requestPath(request.url, basePath))) throw new AppError("API_KEY_NOT_ALLOWED");
  });

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window ends. */
  resetS: number;
}

const WINDOW_MS = 60_000;

/**
 * API_KEY_RATE_LIMIT per key per minute, in this instance's memory (documented as per instance):
 * a fixed window from the key's first request in it. Only requests whose secret verified are taken.
 */
export function createKeyRateLimit(limit: number) {
  const windows = new Map<number, { start: number; used: number }>();
  return {
    /**
     * Counts one request of the key at `at` (the guard's one clock reading for the request). Within
     * half its budget nothing more (its answers are not told and nothing is built for them); past
     * that its state, `allowed` false past the limit.
     */
    take(keyId: number, at: number): (RateLimitState & { allowed: boolean }) | undefined {
      let window = windows.get(keyId);
      if (!window || at - window.start >= WINDOW_MS) {
        if (windows.size >= 100_000) for (const [id, w] of windows) if (at - w.start >= WINDOW_MS) windows.delete(id);
        window = { start: at, used: 0 };
        windows.set(keyId, window);
      }
      window.used++;
      if (window.used <= limit / 2) return undefined;
      const resetS = Math.max(1, Math.ceil((window.start + WINDOW_MS - at) / 1000));
      return { allowed: window.used <= limit, limit, remaining: Math.max(0, limit - window.used), resetS };
    },
  };
}
export type KeyRateLimit = ReturnType<typeof createKeyRateLimit>;

/** The RateLimit-* headers of a key's answer, written into `headers` (Elysia's set.headers, or an error's own). */
export function setRateLimitHeaders(headers: Record<string, unknown>, state: RateLimitState) {
  headers["ratelimit-limit"] = state.limit;
  headers["ratelimit-remaining"] = state.remaining;
  headers["ratelimit-reset"] = state.resetS;
  return headers;
}

const USED_EVERY_MS = 60_000;
const FLUSH_AFTER_MS = 2_000;

export interface KeyActivity {
  /** The key was used at `at` from the address `from()` gives (asked only when the use is noted); `lastUsedAt` is what the database holds. */
  used(keyId: number, lastUsedAt: number | null, at: number, from: () => string): void;
  /** Writes what is noted now (the timer does it a few seconds after the first note). */
  flush(): Promise<void>;
}

/** lastUsedAt / lastUsedFrom, written at most once a minute per key, the notes of a few seconds in one statement (as session-activity.ts does for sessions). */
export function createKeyActivity(db: Database, now: () => number, logger: Logger): KeyActivity {
  const pending = new Map<number, { at: number; from: string }>();
  const recent = new Map<number, number>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  async function flush() {
    timer = undefined;
    const at = now();
    for (const [id, usedAt] of recent) if (at - usedAt >= USED_EVERY_MS) recent.delete(id);
    if (pending.size === 0) return;
    const uses = Object.fromEntries(pending);
    pending.clear();
    try {
      await db.writeAll((tx) => [touchKeysStatement(tx, uses)]);
    } catch (error) {
      for (const id of Object.keys(uses)) recent.delete(Number(id));
      logger.warn({ err: error }, "API key use not written");
    }
  }
  return {
    used(keyId, lastUsedAt, at, from) {
      if (at - Math.max(lastUsedAt ?? 0, recent.get(keyId) ?? 0) < USED_EVERY_MS) return;
      recent.set(keyId, at);
      pending.set(keyId, { at, from: from() });
      timer ??= setTimeout(flush, FLUSH_AFTER_MS);
      timer.unref?.();
    },
    flush,
  };
}
