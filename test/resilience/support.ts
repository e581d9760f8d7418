/**
 * What every resilience test checks about an answer, and the state it must not have changed:
 * a 2xx, or a 4xx envelope with nothing internal in it; never a 5xx, never a hang.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { sql } from "drizzle-orm";
import type { Database, Statement } from "../../src/db/database";
import type { Envelope } from "../../src/envelope";
import type { TokenResponse } from "../../src/features/auth/model";
import { jsonOf } from "../answers";
import { SCHEMA_TABLES } from "../support/tables";

/**
 * Tables whose rows a refused (4xx) request must leave exactly as they were: every schema table but
 * the two throttles (a refused login or reset request is counted, by design), the workers' leases,
 * and mfa_challenges (a wrong code counts against its mfaToken; a refused passkey uses its challenge up).
 */
const CHANGED_BY_DESIGN = new Set(["login_throttle", "reset_throttle", "leases", "mfa_challenges"]);
const DOMAIN_TABLES = SCHEMA_TABLES.filter((table) => !CHANGED_BY_DESIGN.has(table));

/**
 * One digest per table: the rows in rowid order, so any changed, added or removed row shows. Read
 * as one unit (readAll): one snapshot, and one round trip on a remote primary, not one a table.
 */
export async function snapshot(db: Database, tables: readonly string[] = DOMAIN_TABLES): Promise<Record<string, string>> {
  const rows = await readEach(db, tables, (table) => `SELECT * FROM ${table} ORDER BY rowid`);
  return Object.fromEntries(tables.map((table, i) => [table, createHash("sha1").update(JSON.stringify(rows[i])).digest("hex")]));
}

export async function counts(db: Database, tables: readonly string[] = DOMAIN_TABLES): Promise<Record<string, number>> {
  const rows = await readEach(db, tables, (table) => `SELECT count(*) AS n FROM ${table}`);
  return Object.fromEntries(tables.map((table, i) => [table, Number((rows[i][0] as { n: number }).n)]));
}

/** One raw query a table, as one read unit; drizzle types a raw `all` as either driver's result, a unit's statement it is. */
const readEach = (db: Database, tables: readonly string[], query: (table: string) => string) =>
  db.readAll((r) => tables.map((table) => r.all(sql.raw(query(table))) as unknown as Statement<unknown[]>));

/**
 * Text that must never reach a client: a driver's or ORM's error, a stack frame, a source or
 * binary path. Specific enough that a client's own input echoed back (a name, a code) never matches.
 */
const LEAKS: RegExp[] = [
  /Failed query/i,
  /SQLITE_[A-Z]/,
  /LibsqlError|DrizzleError|SqliteError/,
  /near "[^"]*": syntax error/,
  /no such (table|column)/,
  /\n\s+at\s+\S+\s+\(/,
  /\.(ts|js):\d+:\d+/,
  /node_modules|\/\$bunfs\//,
];

/** A data folder path: fine in an ADMIN's health details (as Spring shows it), never in an error. */
const DATA_PATH = /usersvc-(test|server|crash|load)-/;

export function leakIn(text: string, isError = true): RegExp | undefined {
  return LEAKS.find((pattern) => pattern.test(text)) ?? (isError && DATA_PATH.test(text) ? DATA_PATH : undefined);
}

/**
 * Why an answer is unacceptable, or undefined when it is a 2xx or a proper 4xx envelope (or, with
 * `page`, for an HTML page's answer, a 4xx page: the setup link's 404 and 410 say why in HTML).
 */
export function problemWith(status: number, text: string, options: { allow5xx?: number[]; page?: boolean } = {}): string | undefined {
  const leak = leakIn(text, status >= 400);
  if (leak) return `leaks ${leak}: ${text.slice(0, 300)}`;
  if (status >= 200 && status < 300) {
    if (status === 204 || text === "") return undefined;
    try {
      JSON.parse(text);
      return undefined;
    } catch {
      return status === 200 || status === 206 ? undefined : `2xx body is not JSON: ${text.slice(0, 100)}`; // downloads
    }
  }
  if (status >= 500 && !options.allow5xx?.includes(status)) return `status ${status}: ${text.slice(0, 300)}`;
  if (status < 400) return `unexpected status ${status}`;
  if (options.page && status < 500 && text.startsWith("<!DOCTYPE html>")) return undefined;
  let body: Partial<Envelope> | null;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} without a JSON envelope: ${text.slice(0, 200)}`;
  }
  if (body?.success !== false) return `${status} envelope without success:false`;
  if (typeof body.message !== "string" || body.message === "") return `${status} envelope without a message`;
  if (typeof body.timestamp !== "string" || Number.isNaN(Date.parse(body.timestamp))) return `${status} envelope without a timestamp`;
  return undefined;
}

/** Rejects when `work` takes longer than `ms`: a hang is a failure, not a slow test. */
export async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Keys whose presence on Object.prototype would mean a body polluted it. */
const POLLUTION_KEYS = ["roles", "isAdmin", "admin", "polluted", "active", "version", "role"];

export function prototypeIsClean(): string | undefined {
  const probe: Record<string, unknown> = {};
  return POLLUTION_KEYS.find((key) => probe[key] !== undefined || Object.hasOwn(Object.prototype, key));
}

/** Heavy suites (real processes, kills, load) run only under `npm run test:resilience`. */
export const HEAVY = process.env.RESILIENCE_HEAVY === "1";

// ---- the compiled binary as a real process (crash and load suites) ---------------------------

const ROOT = new URL("../..", import.meta.url).pathname;
export const BINARY = `${ROOT}dist/usersvc`;
export const ADMIN = { email: "admin@resilience.example.com", password: "Resil1ence!Admin" };

/** dist/usersvc, built first when missing (`bun scripts/build.ts`). */
export function ensureBinary(): string {
  if (!Bun.file(BINARY).size) {
    const built = Bun.spawnSync([process.execPath, "scripts/build.ts"], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (built.exitCode !== 0) throw new Error("bun scripts/build.ts failed");
  }
  return BINARY;
}

export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

export interface Service {
  url: string;
  proc: Bun.Subprocess;
  /** Resident set size now, in bytes (from /proc). */
  rss(): number;
}

/** Starts the binary in `dir` (its data folder, a fresh temp folder the first time) and waits until it serves. */
export async function startBinary(dir: string, port: number, env: Record<string, string> = {}): Promise<Service> {
  const proc = Bun.spawn([ensureBinary(), "serve"], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      DATA_DIR: dir,
      JWT_SECRET: "resilience-secret-".padEnd(80, "r"),
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
      // Bursts of registrations from the one loopback address are what these suites send; the
      // per-address limits have their own tests (auth-register.test.ts).
      REGISTER_MAX_PER_IP: "1000000",
      EMAIL_CHECK_MAX_PER_IP: "1000000",
      PASSKEY_OPTIONS_MAX_PER_IP: "1000000",
      ...env,
    },
    stdout: "ignore",
    stderr: "pipe",
  });
  const url = `http://127.0.0.1:${port}`;
  await untilAnswering(`${url}/actuator/health/readiness`, proc, "usersvc", 300);
  const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${proc.pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
  return { url, proc, rss };
}

/**
 * Polls `url` every 50 ms until it answers 2xx; after `tries`, or when `proc` exits first, kills it
 * and throws with the end of its stderr and of `log` (a file it wrote), if any.
 */
export async function untilAnswering(url: string, proc: Bun.Subprocess, what: string, tries: number, log?: string) {
  for (let i = 0; ; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    if (i > tries || proc.exitCode !== null) {
      proc.kill("SIGKILL");
      const stderr = proc.stderr instanceof ReadableStream ? await new Response(proc.stderr).text() : "";
      const written = log && existsSync(log) ? readFileSync(log, "utf8") : "";
      throw new Error(`${what} did not start: ${stderr.slice(-800)} ${written.slice(-800)}`);
    }
    await Bun.sleep(50);
  }
}

export async function loginToken(url: string, email = ADMIN.email, password = ADMIN.password): Promise<string> {
  const res = await fetch(`${url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email, password }) });
  if (res.status !== 200) throw new Error(`login ${res.status}: ${await res.text()}`);
  return (await jsonOf<{ data: TokenResponse }>(res)).data.token;
}
