/**
 * Password hashing: argon2id through @node-rs/argon2's async API (it runs on libuv's pool,
 * never on the event loop). BCrypt hashes written by the Spring service still verify; the
 * caller rehashes them to argon2id after a successful login (`needsRehash`).
 */
import type { Algorithm } from "@node-rs/argon2";

/**
 * Loaded on the first hash or verification, not at start: its native addon is unpacked from
 * the binary and mapped (~2.5 MiB of idle RSS, npm run bench), and a process that only serves
 * reads never needs it.
 */
let argon2: Promise<typeof import("@node-rs/argon2")> | undefined;
const loadArgon2 = () => (argon2 ??= import("@node-rs/argon2"));

/**
 * OWASP's baseline argon2id profile: 19 MiB, 2 passes, 1 lane. Measured on the 2-core build
 * machine (busy): ~45 ms a hash, ~20-40 verifications/s in all. RFC 9106's 64 MiB / 3 passes
 * / 4 lanes took ~250 ms and would cap logins near 6/s; 19 MiB also keeps the worker pool's
 * four concurrent hashes under 80 MiB.
 */
const ARGON2_OPTIONS = { algorithm: 2 as Algorithm.Argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
/** How a hash made with ARGON2_OPTIONS begins; any other hash is upgraded at the next login. */
const CURRENT_PREFIX = `$argon2id$v=19$m=${ARGON2_OPTIONS.memoryCost},t=${ARGON2_OPTIONS.timeCost},p=${ARGON2_OPTIONS.parallelism}$`;

export async function hashPassword(password: string): Promise<string> {
  return (await loadArgon2()).hash(password, ARGON2_OPTIONS);
}

const BCRYPT_PREFIX = /^\$2[aby]\$/;
/** BCrypt reads at most 72 bytes; Spring's encoder dropped the rest, while Bun would pre-hash a longer input. */
const BCRYPT_MAX_BYTES = 72;

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    if (BCRYPT_PREFIX.test(stored)) {
      const bytes = new TextEncoder().encode(password).subarray(0, BCRYPT_MAX_BYTES);
      return await Bun.password.verify(bytes, stored.replace(/^\$2y\$/, "$2b$"), "bcrypt");
    }
    return await (await loadArgon2()).verify(stored, password);
  } catch {
    return false;
  }
}

/** BCrypt, or argon2 with other parameters than today's. */
export const needsRehash = (stored: string) => !stored.startsWith(CURRENT_PREFIX);
