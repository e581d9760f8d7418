/**
 * Encrypted archives (BACKUP_ENCRYPTION_KEY): `….tar.gz.enc` is a clear header, then the whole
 * tar.gz under AES-256-GCM, then the 16-byte tag. The header names the key by id, so a restore
 * says which key it needs without trying any: MAGIC, the key id (the first 8 bytes of the key's
 * SHA-256, shown in hex), the 12-byte nonce. The header is the cipher's additional data: it cannot
 * be altered either. Streamed both ways; one random nonce per archive (GCM allows 64 GiB under one).
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { ArchiveRejected } from "./archive";

const MAGIC = Buffer.from("USVCENC1");
const ID_BYTES = 8;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = MAGIC.length + ID_BYTES + NONCE_BYTES;

const idBytes = (key: Uint8Array) => createHash("sha256").update(key).digest().subarray(0, ID_BYTES);
/** The key's public name, as the header and the messages give it. */
export const backupKeyId = (key: Uint8Array) => idBytes(key).toString("hex");

/** The archive's bytes, encrypted under `key`: the header first, the tag last. */
export async function* encryptArchive(key: Buffer, plain: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  const header = Buffer.concat([MAGIC, idBytes(key), randomBytes(NONCE_BYTES)]);
  const cipher = createCipheriv("aes-256-gcm", key, header.subarray(MAGIC.length + ID_BYTES));
  cipher.setAAD(header);
  yield header;
  for await (const chunk of plain) yield cipher.update(chunk);
  yield Buffer.concat([cipher.final(), cipher.getAuthTag()]);
}

export interface OpenedArchive {
  /** The BACKUP_ENCRYPTION_KEY id of an encrypted archive; undefined for a plain tar.gz. */
  keyId?: string;
  /** The tar.gz: decrypted as it is read (its tag checked after the last byte: read it to the end before trusting it). */
  bytes: AsyncIterable<Uint8Array>;
}

/**
 * An archive as read, encrypted or not (told by its first bytes, whatever its name). An encrypted
 * one needs `key`: without it, or with another key, ArchiveRejected naming the key it needs.
 */
export async function openArchive(source: AsyncIterable<Uint8Array>, key: Buffer | undefined): Promise<OpenedArchive> {
  const iterator = source[Symbol.asyncIterator]();
  let head = Buffer.alloc(0);
  while (head.length < HEADER_BYTES) {
    const next = await iterator.next();
    if (next.done) break;
    head = Buffer.concat([head, next.value]);
  }
  async function* rest(first: Buffer): AsyncIterable<Uint8Array> {
    try {
      if (first.length > 0) yield first;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    } finally {
      await iterator.return?.();
    }
  }
  if (head.length < HEADER_BYTES || !head.subarray(0, MAGIC.length).equals(MAGIC)) return { bytes: rest(head) };
  const header = head.subarray(0, HEADER_BYTES);
  const keyId = header.subarray(MAGIC.length, MAGIC.length + ID_BYTES).toString("hex");
  if (!key) throw new ArchiveRejected(`it is encrypted under BACKUP_ENCRYPTION_KEY id ${keyId}, and BACKUP_ENCRYPTION_KEY is not set`);
  if (backupKeyId(key) !== keyId) throw new ArchiveRejected(`it is encrypted under BACKUP_ENCRYPTION_KEY id ${keyId}, not under the one set (id ${backupKeyId(key)})`);
  const decipher = createDecipheriv("aes-256-gcm", key, header.subarray(MAGIC.length + ID_BYTES));
  decipher.setAAD(header);
  async function* decrypted(): AsyncIterable<Uint8Array> {
    // The last TAG_BYTES of the stream are the tag, not ciphertext: they are held back until the end.
    let held = Buffer.alloc(0);
    for await (const chunk of rest(head.subarray(HEADER_BYTES))) {
      held = Buffer.concat([held, chunk]);
      if (held.length <= TAG_BYTES) continue;
      yield decipher.update(held.subarray(0, held.length - TAG_BYTES));
      held = held.subarray(held.length - TAG_BYTES);
    }
    if (held.length < TAG_BYTES) throw new ArchiveRejected("it is cut short (no authentication tag)");
    decipher.setAuthTag(held);
    try {
      decipher.final();
    } catch {
      throw new ArchiveRejected("its encryption does not verify (altered or damaged)");
    }
  }
  return { keyId, bytes: decrypted() };
}
