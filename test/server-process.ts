/**
 * usersvc as a real process on a real port (source via bun, or the compiled binary), with an
 * ADMIN token, its RSS read from /proc, and streamed multipart uploads that never hold the
 * file in the client either. Used by files.test.ts (streaming proof) and bench/files.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Env } from "../src/config";
import type { FileUploadResponse } from "../src/features/files/model";
import { jsonOf } from "./answers";

const ROOT = resolve(import.meta.dir, "..");
const SECRET = "server-process-secret-".padEnd(80, "s");
export const ADMIN = { email: "admin@files.example.com", password: "Files-Admin-1!" };

export interface ServerProcess {
  /** Where the service answers: the origin plus any BASE_PATH. */
  url: string;
  pid: number;
  token: string;
  /** Its DATA_DIR: a fresh temp folder (removed by stop), or the one `env` named. */
  dataDir: string;
  /** Resident set size now, in bytes. */
  rss(): number;
  stop(): Promise<void>;
}

/**
 * `command`: the binary's path (or a whole argv, e.g. another checkout's `bun src/main.ts`), or
 * undefined for `bun src/main.ts`. `env` may be a function of the server's origin (for settings
 * that name it, like PUBLIC_URL). `url` includes BASE_PATH.
 */
export async function startServer(env: Env | ((origin: string) => Env), command?: string | string[]): Promise<ServerProcess> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-server-"));
  const argv = Array.isArray(command) ? command : command ? [command] : [process.execPath, join(ROOT, "src/main.ts")];
  const port = freePort();
  const extra = typeof env === "function" ? env(`http://127.0.0.1:${port}`) : env;
  const fullEnv = {
    ...process.env,
    DATA_DIR: dir,
    JWT_SECRET: SECRET,
    LOG_LEVEL: "warn",
    PORT: String(port),
    HOST: "127.0.0.1",
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
    ...extra,
  };
  // Logs go to stdout (not read: an unread pipe could fill and stall the server); stderr only on a failed start.
  const proc = Bun.spawn([...argv, "serve"], { cwd: dir, env: fullEnv, stdout: "ignore", stderr: "pipe" });
  const url = `http://127.0.0.1:${port}${extra.BASE_PATH ?? ""}`;
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    if (
      await fetch(`${url}/actuator/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 200 || proc.exitCode !== null) {
      const log = await new Response(proc.stderr).text().catch(() => "");
      await stop();
      throw new Error(`usersvc did not start: ${log.slice(-500)}`);
    }
    await Bun.sleep(50);
  }
  const issued = Bun.spawnSync([...argv, "token", "--email", ADMIN.email], { cwd: dir, env: fullEnv });
  const token = issued.stdout.toString().trim();
  if (issued.exitCode !== 0 || !token) throw new Error(`usersvc token failed: ${issued.stderr}`);
  return { url, pid: proc.pid, token, dataDir: fullEnv.DATA_DIR ?? dir, rss: () => rssOf(proc.pid), stop };
}

/**
 * The log lines `bun src/main.ts serve` writes in a fresh DATA_DIR (port 0, LOG_LEVEL info, `env`
 * on top, a function of that folder where a setting names it) up to the one saying it listens;
 * the process is then stopped and the folder removed.
 */
export async function startLog(env: (dir: string) => Env): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-start-log-"));
  const server = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "serve"], {
    cwd: dir,
    env: { ...process.env, DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", JWT_SECRET: "w".repeat(64), ...env(dir) },
    stdout: "pipe",
    stderr: "ignore",
  });
  try {
    // A reader released, not a for-await left early: leaving one cancels the pipe, which can wait on the live process.
    const reader = server.stdout.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    while (!seen.includes('"usersvc listening"')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the server stopped before listening:\n${seen}`);
      seen += decoder.decode(value);
    }
    reader.releaseLock();
    return seen.split("\n");
  } finally {
    server.kill("SIGTERM");
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A port nothing listens on right now. */
export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

export function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) * 1024 : 0;
}

/** CPU time (user + system, every thread of the process) a process has used so far, in milliseconds, from /proc (10 ms ticks). */
export function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The highest RSS seen while `work` runs, sampled every 10 ms. */
export async function peakRss<T>(server: ServerProcess, work: () => Promise<T>): Promise<{ result: T; peak: number }> {
  let peak = server.rss();
  const timer = setInterval(() => {
    peak = Math.max(peak, server.rss());
  }, 10);
  try {
    const result = await work();
    return { result, peak: Math.max(peak, server.rss()) };
  } finally {
    clearInterval(timer);
  }
}

/** Deterministic bytes: chunk `i` of 256 KiB (every byte value, then i in its first 4 bytes), cheap to make. */
const CHUNK = 256 * 1024;
const PATTERN = Uint8Array.from({ length: CHUNK }, (_, j) => (j * 167 + (j >> 8)) & 0xff);
function chunkAt(i: number): Uint8Array {
  const chunk = PATTERN.slice();
  new DataView(chunk.buffer).setUint32(0, i);
  return chunk;
}

/** POSTs `size` bytes as the part `file`, generated while sent; returns the status, body and SHA-256 sent. */
export async function streamUpload(server: ServerProcess, size: number, filename = "big.bin") {
  const boundary = `----usersvc${crypto.randomUUID()}`;
  const hasher = new Bun.CryptoHasher("sha256");
  const encoder = new TextEncoder();
  let sent = 0;
  let stage: "head" | "data" | "tail" | "done" = "head";
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (stage === "head") {
        controller.enqueue(
          encoder.encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
        );
        stage = "data";
      } else if (stage === "data") {
        const chunk = chunkAt(sent / CHUNK).subarray(0, Math.min(CHUNK, size - sent));
        hasher.update(chunk);
        sent += chunk.length;
        controller.enqueue(chunk);
        if (sent >= size) stage = "tail";
      } else if (stage === "tail") {
        controller.enqueue(encoder.encode(`\r\n--${boundary}--\r\n`));
        stage = "done";
      } else controller.close();
    },
  });
  const res = await fetch(`${server.url}/api/files/upload`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": `multipart/form-data; boundary=${boundary}` },
    body,
  });
  return { status: res.status, body: await jsonOf<FileUploadResponse>(res), sha256: hasher.digest("hex") };
}

/** GETs a download without keeping it: its length and SHA-256. */
export async function streamDownload(server: ServerProcess, fileName: string) {
  const res = await fetch(`${server.url}/api/files/download/${fileName}`, { headers: { authorization: `Bearer ${server.token}` } });
  const hasher = new Bun.CryptoHasher("sha256");
  let size = 0;
  for await (const chunk of res.body!) {
    hasher.update(chunk);
    size += chunk.byteLength;
  }
  return { status: res.status, size, sha256: hasher.digest("hex") };
}
