/**
 * Password hashing: argon2id through @node-rs/argon2's async API (it runs on libuv's pool,
 * never on the event loop). BCrypt hashes written by the Spring service still verify; the
 * caller rehashes them to argon2id after a successful login (`needsRehash`).
 */
import { hash, verify, Algorithm } from "@node-rs/argon2";

/** OWASP's second argon2id profile: 19 MiB, 2 passes, 1 lane — ~tens of ms on this class of machine. */
const ARGON2_OPTIONS = { algorithm: Algorithm.Argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

const BCRYPT_PREFIX = /^\$2[aby]\$/;

export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    if (BCRYPT_PREFIX.test(stored)) return await Bun.password.verify(password, stored.replace(/^\$2y\$/, "$2b$"), "bcrypt");
    return await verify(stored, password);
  } catch {
    return false;
  }
}

export const needsRehash = (stored: string) => !stored.startsWith("$argon2id$");
