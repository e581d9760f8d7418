import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogging } from "../src/logging/logger";
import { createDataCipher, dataKeyId } from "../src/security/data-encryption";
import { resolveDataEncryptionKey } from "../src/security/kept-secrets";

const key = (fill: number) => Buffer.alloc(32, fill);
const logger = createLogging("silent", "json").root;

describe("secrets at rest (AES-256-GCM under DATA_ENCRYPTION_KEY)", () => {
  test("a sealed secret opens to its bytes, names its key, and never carries the plain text", () => {
    const cipher = createDataCipher(key(1));
    const sealed = cipher.seal("JBSWY3DPEHPK3PXP");
    expect(sealed.split(".").slice(0, 2)).toEqual(["v1", dataKeyId(key(1))]);
    expect(sealed).not.toContain("JBSWY3DPEHPK3PXP");
    expect(cipher.open(sealed).toString()).toBe("JBSWY3DPEHPK3PXP");
    // A fresh IV each time: the same secret never seals to the same text.
    expect(cipher.seal("JBSWY3DPEHPK3PXP")).not.toBe(sealed);
  });

  test("an altered body or a relabelled key id is refused", () => {
    const cipher = createDataCipher(key(1), [key(2)]);
    const [v, id, iv, body] = cipher.seal(new Uint8Array([1, 2, 3])).split(".");
    const flipped = Buffer.from(body!, "base64url");
    flipped[0]! ^= 1;
    expect(() => cipher.open([v, id, iv, flipped.toString("base64url")].join("."))).toThrow();
    expect(() => cipher.open([v, dataKeyId(key(2)), iv, body].join("."))).toThrow();
  });

  test("a previous key opens what it sealed, is stale, and a rewrap moves the value to the current key", () => {
    const before = createDataCipher(key(1)).seal("secret");
    const after = createDataCipher(key(3), [key(1)]);
    expect(after.isStale(before)).toBe(true);
    const rewrapped = after.seal(after.open(before));
    expect(after.isStale(rewrapped)).toBe(false);
    expect(createDataCipher(key(3)).open(rewrapped).toString()).toBe("secret");
    expect(() => createDataCipher(key(3)).open(before)).toThrow("unknown key");
  });

  test("unset, the key is generated once into the data folder (0600) and read back after; a damaged file stops the start", () => {
    const dir = mkdtempSync(join(tmpdir(), "usersvc-key-"));
    const first = resolveDataEncryptionKey(undefined, dir, logger);
    expect(first).toHaveLength(32);
    expect(statSync(join(dir, "encryption.key")).mode & 0o777).toBe(0o600);
    expect(resolveDataEncryptionKey(undefined, dir, logger)).toEqual(first);
    expect(resolveDataEncryptionKey(key(5), dir, logger)).toEqual(key(5));
    expect(readFileSync(join(dir, "encryption.key"), "utf8").trim()).toBe(first.toString("base64"));
    writeFileSync(join(dir, "encryption.key"), "c2hvcnQ=\n");
    expect(() => resolveDataEncryptionKey(undefined, dir, logger)).toThrow("32 bytes");
  });
});
