/**
 * TOTP computed independently of the service's library: RFC 4226's HOTP (node:crypto HMAC-SHA1,
 * dynamic truncation) over RFC 6238's 30-second steps, with a base32 decoder of its own.
 */
import { createHmac } from "node:crypto";

export const STEP_MS = 30_000;

export function base32Decode(text: string): Buffer {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const char of text.replace(/=+$/, "").toUpperCase()) bits += alphabet.indexOf(char).toString(2).padStart(5, "0");
  return Buffer.from(bits.match(/.{8}/g)?.map((byte) => Number.parseInt(byte, 2)) ?? []);
}

export function hotp(key: Buffer, counter: number, digits = 6): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac("sha1", key).update(message).digest();
  const offset = mac[19] & 15;
  const binary = ((mac[offset] & 0x7f) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) | mac[offset + 3];
  return String(binary % 10 ** digits).padStart(digits, "0");
}

/** The 6-digit code of a base32 secret at an instant (ms). */
export const totpAt = (secret: string, ms: number) => hotp(base32Decode(secret), Math.floor(ms / STEP_MS));

/**
 * Codes of one secret that the service accepts one after another: each from a step after the last
 * one used (a used step is refused as a replay) and no further ahead than the ±1 step it accepts,
 * so a test that signs in many times within a minute waits for the clock instead of failing.
 */
export function codeSequence(secret: string, firstStep = Math.floor(Date.now() / STEP_MS) - 1): () => Promise<string> {
  let lastStep = firstStep - 1;
  return async () => {
    const step = Math.max(lastStep + 1, Math.floor(Date.now() / STEP_MS) - 1);
    const wait = (step - 1) * STEP_MS - Date.now();
    if (wait > 0) await Bun.sleep(wait + 50);
    lastStep = step;
    return hotp(base32Decode(secret), step);
  };
}
