/**
 * Secrets kept beside the database when not configured: JWT_SECRET (the HS512 key) and
 * DATA_ENCRYPTION_KEY (secrets at rest). Each is generated once into the data folder (mode 0600,
 * carried in backups) so tokens and sealed secrets survive restarts.
 */
import { chmodSync, existsSync, linkSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { privateFolder } from "../storage/private-paths";
import type { Logger } from "pino";

export const JWT_SECRET_FILE = "jwt.secret";
export const ENCRYPTION_KEY_FILE = "encryption.key";

interface KeptSecret {
  file: string;
  /** A fresh value, as the file holds it (one line). */
  generate: () => string;
  /** Why a kept value is unusable, or undefined: a hand-edited or truncated file must not weaken anything silently. */
  problem: (kept: string) => string | undefined;
  /** Logged once when the value is generated. */
  generated: string;
}

function readKept(file: string, secret: KeptSecret, logger: Logger): string {
  if ((statSync(file).mode & 0o077) !== 0) {
    chmodSync(file, 0o600);
    logger.warn({ file }, "a kept key was readable by others: its mode is now 0600");
  }
  const kept = readFileSync(file, "utf8").trim();
  const problem = secret.problem(kept);
  if (problem) throw new Error(`${file} ${problem}`);
  return kept;
}

function resolveKept(dataDir: string, secret: KeptSecret, logger: Logger): string {
  const file = join(dataDir, secret.file);
  if (existsSync(file)) return readKept(file, secret, logger);
  privateFolder(dataDir);
  const value = secret.generate();
  // Written whole under a private name, then linked into place: a process starting at the same
  // moment (serve and `usersvc token`, or workers) either wins the link or reads the winner's key.
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${value}\n`, { mode: 0o600 });
  try {
    linkSync(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return readKept(file, secret, logger);
  } finally {
    rmSync(temp, { force: true });
  }
  logger.warn({ file }, secret.generated);
  return value;
}

const randomBase64 = (bytes: number, encoding: BufferEncoding) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString(encoding);

export function resolveJwtSecret(configured: string | undefined, dataDir: string, logger: Logger): string {
  if (configured) return configured;
  return resolveKept(
    dataDir,
    {
      file: JWT_SECRET_FILE,
      generate: () => randomBase64(64, "base64url"),
      problem: (kept) => (Buffer.byteLength(kept) < 64 ? "holds fewer than 64 bytes: remove it to generate a new key, or set JWT_SECRET" : undefined),
      generated: "JWT_SECRET is not set: generated a random key and kept it in this file; set JWT_SECRET to share it between hosts",
    },
    logger,
  );
}

/** DATA_ENCRYPTION_KEY's 32 bytes, from the configuration (base64) or the kept file. */
export function resolveDataEncryptionKey(configured: Buffer | undefined, dataDir: string, logger: Logger): Buffer {
  if (configured) return configured;
  const kept = resolveKept(
    dataDir,
    {
      file: ENCRYPTION_KEY_FILE,
      generate: () => randomBase64(32, "base64"),
      problem: (value) => (Buffer.from(value, "base64").length !== 32 ? "does not hold 32 bytes in base64: restore it from a backup, or set DATA_ENCRYPTION_KEY" : undefined),
      generated:
        "DATA_ENCRYPTION_KEY is not set: generated a random key and kept it in this file; set DATA_ENCRYPTION_KEY to share it between hosts, and keep a copy: sealed secrets cannot be read without it",
    },
    logger,
  );
  return Buffer.from(kept, "base64");
}
