/**
 * Secrets at rest (private signing keys, TOTP secrets): AES-256-GCM under DATA_ENCRYPTION_KEY,
 * never under JWT_SECRET. A sealed value names the key that sealed it, so values sealed under a
 * previous key (DATA_ENCRYPTION_KEY_PREVIOUS) still open while `usersvc keys rewrap` moves them to
 * the current one; on a remote primary the database holds only ciphertext.
 *
 * Format: `v1.<key id>.<12-byte IV>.<ciphertext and 16-byte tag>`, the last two in base64url.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

export interface DataCipher {
  /** The current key's id: what a sealed value names. */
  readonly keyId: string;
  seal(plain: string | Uint8Array): string;
  /** The plain bytes; throws for a value sealed under an unknown key, or altered. */
  open(sealed: string): Buffer;
  /** Whether a sealed value names a key other than the current one (rewrap moves it). */
  isStale(sealed: string): boolean;
}

const VERSION = "v1";
const TAG_BYTES = 16;

/** A key's public name: the first 8 bytes of its SHA-256, in hex (the key itself is never shown). */
export const dataKeyId = (key: Uint8Array) => createHash("sha256").update(key).digest("hex").slice(0, 16);

export function createDataCipher(current: Buffer, previous: readonly Buffer[] = []): DataCipher {
  const keys = new Map([...previous, current].map((key) => [dataKeyId(key), key]));
  const keyId = dataKeyId(current);
  return {
    keyId,
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", current, iv);
      // The key id is authenticated too: a value cannot be relabelled to another key.
      cipher.setAAD(Buffer.from(keyId));
      const body = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return [VERSION, keyId, iv.toString("base64url"), body.toString("base64url")].join(".");
    },
    open(sealed) {
      const [version, id, iv, body] = sealed.split(".");
      const key = id === undefined ? undefined : keys.get(id);
      if (version !== VERSION || !key || !iv || !body) throw new Error(`a sealed secret names an unknown key (${id ?? "none"}): set the DATA_ENCRYPTION_KEY it was sealed under`);
      const bytes = Buffer.from(body, "base64url");
      const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
      decipher.setAAD(Buffer.from(id!));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES)), decipher.final()]);
    },
    isStale: (sealed) => sealed.split(".", 2)[1] !== keyId,
  };
}
