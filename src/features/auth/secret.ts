/** JWT_SECRET, or one generated once and kept beside the database (mode 0600) so tokens survive restarts. */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";

export function resolveJwtSecret(configured: string | undefined, dataDir: string, logger: Logger): string {
  if (configured) return configured;
  const file = join(dataDir, "jwt.secret");
  if (existsSync(file)) {
    const kept = readFileSync(file, "utf8").trim();
    // The file is ours, but a hand-edited or truncated one must not weaken HS512 silently.
    if (Buffer.byteLength(kept) < 64) throw new Error(`${file} holds fewer than 64 bytes: remove it to generate a new key, or set JWT_SECRET`);
    return kept;
  }
  mkdirSync(dataDir, { recursive: true });
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(64))).toString("base64url");
  writeFileSync(file, secret + "\n", { mode: 0o600, flag: "wx" });
  chmodSync(file, 0o600);
  logger.warn({ file }, "JWT_SECRET is not set: generated a random key and kept it in this file; set JWT_SECRET to share it between hosts");
  return secret;
}
