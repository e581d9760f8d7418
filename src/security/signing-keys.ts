/**
 * Asymmetric token signing (TOKEN_SIGNING=EdDSA|ES256): the keys live in the database
 * (store/signing-keys.ts) so every instance on one primary signs and verifies with the same set,
 * their private halves sealed with DATA_ENCRYPTION_KEY. The keyring keeps the set in memory and
 * reads it again at most once a minute (and at once for a kid it does not know).
 *
 * Rotation never signs anyone out: a key is published (in the JWKS) at least PUBLISH_AHEAD_MS
 * (twice the JWKS cache age) before it signs, and stays published until the last token it signed
 * has expired. Creating, rotating and pruning keys happen under one lease, so instances starting
 * together create one key. Withdrawing a key (`usersvc keys rotate --revoke KID`) refuses its
 * tokens at once: the guard's one read checks the kid (store/sessions.ts, store/users.ts).
 */
import type { CryptoKey, JWK } from "jose";
import type { Database } from "../db/database";
import { acquireLease } from "../store/leases";
import type { DataCipher } from "./data-encryption";
import { addSigningKeys, allSigningKeys, deleteSigningKeys, HS512_SWITCH_KID, resealSigningKeys, revokeSigningKey, type SigningKeyRow } from "../store/signing-keys";

/** RS256 is the OpenID Provider's (features/oauth-server), as are its own ES256 and EdDSA keys: rings of their own over the same table, never a user token's. */
export type SigningAlg = "HS512" | "EdDSA" | "ES256" | "RS256";
export type AsymmetricAlg = Exclude<SigningAlg, "HS512">;

/** How long a key is in the JWKS before it signs: twice JWKS_MAX_AGE_S, so a verifier's cached set always has it. */
export const PUBLISH_AHEAD_MS = 10 * 60_000;
export const JWKS_MAX_AGE_S = 300;
const RELOAD_EVERY_MS = 60_000;
/** A kid we do not know is looked up again at most this often (a flood of made-up kids costs one read a second). */
const UNKNOWN_KID_RELOAD_MS = 1_000;
/** An instance reads the set once a minute: it may sign with the previous key that long after the next took over. */
const PRUNE_MARGIN_MS = 2 * RELOAD_EVERY_MS;
export const SIGNING_KEYS_LEASE = "signing-keys";
const LEASE_WAIT_MS = 100;
const LEASE_ATTEMPTS = 300;
const DAY_MS = 86_400_000;

const KEY_OPTIONS: Record<AsymmetricAlg, { crv?: string; modulusLength?: number }> = { EdDSA: { crv: "Ed25519" }, ES256: { crv: "P-256" }, RS256: { modulusLength: 2048 } };
/**
 * The rings: the user tokens' keys and the provider's share the table, each ring minding (and pruning)
 * its own. A row names its ring; one from before rings were named is the provider's if RS256.
 */
export type Ring = "tokens" | "provider";
const ringOfRow = (k: SigningKeyRow): Ring => (k.ring as Ring | null) ?? (k.alg === "RS256" ? "provider" : "tokens");
const ASYMMETRIC = new Set<string>(["EdDSA", "ES256", "RS256"]);

export interface SigningKey {
  kid: string;
  alg: AsymmetricAlg;
  key: CryptoKey;
}

export interface Keyring {
  /** The key that signs now; undefined under HS512. */
  signer(): Promise<SigningKey | undefined>;
  /** The public key of `kid` for `alg`; undefined for a kid unknown, withdrawn or of another algorithm. */
  verifier(kid: string, alg: string): Promise<CryptoKey | undefined>;
  /** Whether an HS512 token issued at `iat` (seconds) still counts: always under HS512; after a switch, only one from before it, and only for the token lifetime after it. */
  acceptsHs512(iat: number | undefined): Promise<boolean>;
  /** acceptsHs512's answer when it needs no read (under TOKEN_SIGNING=HS512: yes), else undefined. */
  acceptsHs512Now(): boolean | undefined;
  /** The published public keys (GET /.well-known/jwks.json). */
  jwks(): Promise<{ keys: JWK[] }>;
  /**
   * `usersvc keys rotate`: publishes the next key, which signs PUBLISH_AHEAD_MS from now (one already
   * waiting is kept). With `revoke`, withdraws that key first; if it was signing, the new key signs at once.
   */
  rotate(revoke?: string): Promise<{ kid: string; signsFrom: number; revoked?: string }>;
  /** The guard found `kid` withdrawn (by another process): the set is read again before the next use, so this instance stops signing with it. */
  withdrawn(kid: string): void;
  /** `usersvc keys rewrap`: seals every private half under the current DATA_ENCRYPTION_KEY; the number moved. */
  rewrap(): Promise<number>;
}

export interface KeyringOptions {
  db: Database;
  cipher: DataCipher;
  alg: SigningAlg;
  /**
   * Whose keys: the user tokens' (the default; one sequence, whatever its algorithm, so a switch of
   * TOKEN_SIGNING retires the old keys) or the provider's (a sequence per algorithm, all signing at once).
   */
  ring?: Ring;
  rotationDays: number;
  /** ACCESS_TOKEN_TTL: how long after a key stops signing its last token may still be valid. */
  tokenTtlS: number;
  now: () => number;
}

export class UnknownKeyError extends Error {}

/**
 * `usersvc keys rotate [--revoke KID]` over every ring in use (the user tokens' and the OpenID
 * Provider's RS256): without `revoke`, each publishes its next key; with it, the ring that holds
 * KID withdraws it (its tokens refused at once) and publishes a key of its own algorithm.
 */
export async function rotateRings(rings: Keyring[], revoke?: string) {
  if (revoke === undefined) {
    const rotated = [];
    for (const ring of rings) rotated.push(await ring.rotate());
    return rotated;
  }
  for (const ring of rings) {
    const rotated = await ring.rotate(revoke).catch((error) => {
      if (error instanceof UnknownKeyError) return undefined;
      throw error;
    });
    if (rotated) return [rotated];
  }
  throw new UnknownKeyError(`no signing key ${revoke}`);
}

let jose: Promise<typeof import("jose")> | undefined;
/** jose is loaded by the first token signed or checked (or key made), not at start: an idle process never holds it. */
export const loadJose = () => (jose ??= import("jose"));

const asymmetric = (row: SigningKeyRow) => row.kid !== HS512_SWITCH_KID && row.publicJwk !== null;
const ms = (instant: Date | null) => instant?.getTime() ?? null;

async function newKey(ring: Ring, alg: AsymmetricAlg, cipher: DataCipher, now: number, signsFrom: number): Promise<SigningKeyRow> {
  const { exportJWK, generateKeyPair } = await loadJose();
  const pair = await generateKeyPair(alg, { ...KEY_OPTIONS[alg], extractable: true });
  const kid = Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString("base64url");
  const publicJwk: JWK = { ...(await exportJWK(pair.publicKey)), kid, alg, use: "sig" };
  return {
    kid,
    alg,
    publicJwk: JSON.stringify(publicJwk),
    privateJwk: cipher.seal(JSON.stringify(await exportJWK(pair.privateKey))),
    createdAt: new Date(now),
    signsFrom: new Date(signsFrom),
    revokedAt: null,
    ring,
  };
}

export function createKeyring(options: KeyringOptions): Keyring {
  const { db, cipher, alg, now, ring = "tokens" } = options;
  const rotationMs = options.rotationDays * DAY_MS;
  const mine = (k: SigningKeyRow) => ringOfRow(k) === ring && (ring === "tokens" || k.alg === alg);
  const ttlMs = options.tokenTtlS * 1000;
  let rows: SigningKeyRow[] = [];
  let loadedAt = Number.NEGATIVE_INFINITY;
  let loading: Promise<void> | undefined;
  const publicKeys = new Map<string, Promise<CryptoKey>>();
  const privateKeys = new Map<string, Promise<CryptoKey>>();

  /** The instant (ms) each key stopped signing: when the next key of the sequence began, if it has. */
  function retiredAt(list: SigningKeyRow[], at: number) {
    const keys = list.filter((k) => asymmetric(k) && mine(k));
    return new Map(
      keys.map((k, i) => [
        k.kid,
        keys
          .slice(i + 1)
          .find((later) => later.signsFrom.getTime() <= at)
          ?.signsFrom.getTime() ?? null,
      ]),
    );
  }

  /** Keys whose every token has expired: retired (or withdrawn) longer ago than a token lives. */
  function expired(list: SigningKeyRow[], at: number) {
    const retired = retiredAt(list, at);
    return list.filter((k) => {
      const end = ms(k.revokedAt) ?? retired.get(k.kid);
      return asymmetric(k) && mine(k) && end != null && end + ttlMs + PRUNE_MARGIN_MS < at;
    });
  }

  const signing = (list: SigningKeyRow[], at: number) =>
    list.filter((k) => asymmetric(k) && mine(k) && k.alg === alg && k.revokedAt === null && k.signsFrom.getTime() <= at).at(-1);

  /** What the set needs now: the switch record, a first key, the next key when rotation is due, and the expired to drop. */
  async function plan(list: SigningKeyRow[], at: number) {
    if (alg === "HS512") return { add: [], drop: [] };
    const add: SigningKeyRow[] = [];
    if (ring === "tokens" && !list.some((k) => k.kid === HS512_SWITCH_KID)) {
      add.push({ kid: HS512_SWITCH_KID, alg: "HS512", publicJwk: null, privateJwk: null, createdAt: new Date(at), signsFrom: new Date(at), revokedAt: null, ring });
    }
    const current = signing(list, at);
    const waiting = list.some((k) => asymmetric(k) && mine(k) && k.alg === alg && k.revokedAt === null && k.signsFrom.getTime() > at);
    if (!current) add.push(await newKey(ring, alg, cipher, at, at));
    else if (!waiting && at >= current.signsFrom.getTime() + rotationMs - PUBLISH_AHEAD_MS) {
      add.push(await newKey(ring, alg, cipher, at, Math.max(at + PUBLISH_AHEAD_MS, current.signsFrom.getTime() + rotationMs)));
    }
    return { add, drop: expired(list, at).map((k) => k.kid) };
  }

  async function load() {
    rows = await allSigningKeys(db);
    loadedAt = now();
  }

  /** Runs `step` holding the lease (waiting for another holder), on the set as read under it; then reads the set. */
  async function underLease<T>(step: (list: SigningKeyRow[], at: number) => Promise<T>): Promise<T> {
    for (let attempt = 0; attempt < LEASE_ATTEMPTS; attempt++) {
      const lease = await acquireLease(db, SIGNING_KEYS_LEASE, now);
      if (lease) {
        try {
          return await step(await allSigningKeys(db), now());
        } finally {
          await lease.release();
          await load();
        }
      }
      await Bun.sleep(LEASE_WAIT_MS);
    }
    throw new Error("the signing keys' lease stayed taken");
  }

  /** Reads the set and brings it up to date: under the lease only when something is to change. */
  async function refresh() {
    await load();
    const needed = await plan(rows, now());
    if (needed.add.length === 0 && needed.drop.length === 0) return;
    await underLease(async (list, at) => {
      const { add, drop } = await plan(list, at);
      await addSigningKeys(db, add);
      await deleteSigningKeys(db, drop);
    });
  }

  /** The set, read again when older than a minute (one refresh at a time). */
  function current(maxAgeMs = RELOAD_EVERY_MS): Promise<void> {
    if (now() - loadedAt < maxAgeMs && now() >= loadedAt) return Promise.resolve();
    loading ??= refresh().finally(() => {
      loading = undefined;
    });
    return loading;
  }

  const importOnce = (cache: Map<string, Promise<CryptoKey>>, kid: string, jwk: () => JWK, keyAlg: string) => {
    let key = cache.get(kid);
    if (!key) {
      key = loadJose().then(({ importJWK }) => importJWK(jwk(), keyAlg) as Promise<CryptoKey>);
      cache.set(kid, key);
    }
    return key;
  };

  const findVerifiable = (kid: string, keyAlg: string) => rows.find((k) => k.kid === kid && k.alg === keyAlg && asymmetric(k) && mine(k) && k.revokedAt === null);

  return {
    async signer() {
      if (alg === "HS512") return undefined;
      await current();
      const key = signing(rows, now());
      if (!key) throw new Error(`no ${alg} signing key: the set could not be brought up to date`);
      return {
        kid: key.kid,
        alg: key.alg as AsymmetricAlg,
        key: await importOnce(privateKeys, key.kid, () => JSON.parse(cipher.open(key.privateJwk!).toString("utf8")), key.alg),
      };
    },
    async verifier(kid, keyAlg) {
      // A user token's ring never verifies the provider's keys (an ID or client token is no session token), nor the reverse.
      if (!ASYMMETRIC.has(keyAlg) || (ring === "tokens" && keyAlg === "RS256")) return undefined;
      await current();
      let key = findVerifiable(kid, keyAlg);
      if (!key && !rows.some((k) => k.kid === kid)) {
        await current(UNKNOWN_KID_RELOAD_MS);
        key = findVerifiable(kid, keyAlg);
      }
      return key && importOnce(publicKeys, kid, () => JSON.parse(key.publicJwk!), keyAlg);
    },
    acceptsHs512Now: () => (alg === "HS512" ? true : undefined),
    async acceptsHs512(iat) {
      if (alg === "HS512") return true;
      await current();
      const switched = ms(rows.find((k) => k.kid === HS512_SWITCH_KID)?.createdAt ?? null);
      if (switched === null) return true;
      return iat !== undefined && (iat + 1) * 1000 <= switched && now() < switched + ttlMs;
    },
    async jwks() {
      await current();
      const gone = new Set(expired(rows, now()).map((k) => k.kid));
      return { keys: rows.filter((k) => asymmetric(k) && mine(k) && k.revokedAt === null && !gone.has(k.kid)).map((k) => JSON.parse(k.publicJwk!) as JWK) };
    },
    async rotate(revoke) {
      if (alg === "HS512") throw new Error("TOKEN_SIGNING is HS512: there are no keys to rotate (set TOKEN_SIGNING=EdDSA or ES256)");
      return underLease(async (list, at) => {
        if (revoke !== undefined) {
          // Only a key of this ring: the other ring's withdrawal must publish a key of its own algorithm (rotateRings).
          if (!list.some((k) => k.kid === revoke && asymmetric(k) && mine(k))) throw new UnknownKeyError(`no signing key ${revoke}`);
          await revokeSigningKey(db, revoke, at);
        }
        const remaining = list.map((k) => (k.kid === revoke ? { ...k, revokedAt: new Date(at) } : k));
        const waiting = remaining.find((k) => asymmetric(k) && mine(k) && k.alg === alg && k.revokedAt === null && k.signsFrom.getTime() > at);
        const needsNow = !signing(remaining, at);
        let next = waiting;
        if (needsNow || !waiting) {
          next = await newKey(ring, alg, cipher, at, needsNow ? at : at + PUBLISH_AHEAD_MS);
          await addSigningKeys(db, [next]);
        }
        // Withdrawing the signing key cannot wait for a published one: a new key signs at once.
        return { kid: next!.kid, signsFrom: next!.signsFrom.getTime(), ...(revoke !== undefined && { revoked: revoke }) };
      });
    },
    withdrawn(kid) {
      if (rows.some((k) => k.kid === kid && k.revokedAt === null)) loadedAt = Number.NEGATIVE_INFINITY;
    },
    async rewrap() {
      const list = await allSigningKeys(db);
      const stale = list.filter((k) => k.privateJwk !== null && cipher.isStale(k.privateJwk));
      await resealSigningKeys(
        db,
        stale.map((k) => ({ kid: k.kid, privateJwk: cipher.seal(cipher.open(k.privateJwk!)) })),
      );
      return stale.length;
    },
  };
}
