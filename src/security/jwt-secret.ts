/** JWT_SECRET, or one generated once and kept beside the database (mode 0600) so tokens survive restarts. */
import { chmodSync, existsSync, linkSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { privateFolder } from "../storage/private-paths";
import type { Logger } from "pino";

function readKept(file: string, logger: Logger): string {
  if ((statSync(file).mode & 0o077) !== 0) {
    chmodSync(file, 0o600);
    logger.warn({ file }, "the kept JWT key was readable by others: its mode is now 0600");
  }
  const kept = readFileSync(file, "utf8").trim();
  // The file is ours, but a hand-edited or truncated one must not weaken HS512 silently.
  if (Buffer.byteLength(kept) < 64) throw new Error(`${file} holds fewer than 64 bytes: remove it to generate a new key, or set JWT_SECRET`);
  return kept;
}

export function resolveJwtSecret(configured: string | undefined, dataDir: string, logger: Logger): string {
  if (configured) return configured;
  const file = join(dataDir, "jwt.secret");
  if (existsSync(file)) return readKept(file, logger);
  privateFolder(dataDir);
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(64))).toString("base64url");
  // Written whole under a private name, then linked into place: a process starting at the same
  // moment (serve and `usersvc token`, or workers) either wins the link or reads the winner's key.
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${secret}\n`, { mode: 0o600 });
  try {
    linkSync(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return readKept(file, logger);
  } finally {
    rmSync(temp, { force: true });
  }
  logger.warn({ file }, "JWT_SECRET is not set: generated a random key and kept it in this file; set JWT_SECRET to share it between hosts");
  return secret;
}
