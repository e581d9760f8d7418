/**
 * One real app per test file: a fresh temp folder with a real file database, opened with
 * this run's driver (test/legs.ts) and migrated by the production migrator, a real upload folder, its own metrics registry.
 * Requests go through app.handle, the same path Bun.serve takes, and every answer is checked
 * against the app's OpenAPI document.
 */
import { expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { createApp } from "../src/app";
import { loadConfig, type Env } from "../src/config";
import type { Lifecycle } from "../src/context";
import { openDatabase } from "../src/db/open";
import { driver, onSqld } from "./legs";
import { holdRemoteWriteLock, openRemoteTestDatabase } from "./support/remote-db";
import type { Sqld } from "./support/sqld";
import { migrate } from "../src/db/migrate";
import { roles, userRoles, users } from "../src/db/schema";
import { configuredTokens } from "../src/security/bearer-tokens";
import { createDataCipher } from "../src/security/data-encryption";
import { resolveDataEncryptionKey } from "../src/security/kept-secrets";
import { hashPassword } from "../src/security/passwords";
import { createLogging } from "../src/logging/logger";
import { createMetrics } from "../src/metrics";
import { createSimulatedGateway } from "../src/features/orders/payment-gateway";
import type { PaymentGateway } from "../src/payment-gateway";
import { createFileStore } from "../src/storage/files";
import type { Tracing } from "../src/tracing";
import { conformanceOf, type Conformance } from "./openapi-conformance";
import type { Answer, TestResponse } from "./answers";

export { answerOf, jsonOf, type Answer, type TestResponse } from "./answers";

let emails = 0;
/** An e-mail no other test has used (`prefix` says which file made it, when reading a log). */
export const uniqueEmail = (prefix = "user") => `${prefix}${++emails}-${crypto.randomUUID().slice(0, 8)}@example.com`;

/** An answer without its timestamp, for comparing two answers (an unknown e-mail answers as a known one). */
export const timeless = ({ timestamp: _timestamp, ...rest }: Record<string, unknown>) => rest;

/** An ISO 8601 UTC timestamp as the service writes them (Date#toISOString). */
export const ISO_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The whole User a just-created account reads as; a test overrides what it set. */
export const freshUser = (fields: Record<string, unknown>) => ({
  id: expect.any(Number),
  name: "Test User",
  department: null,
  phone: null,
  active: true,
  createdAt: expect.stringMatching(ISO_Z),
  updatedAt: expect.stringMatching(ISO_Z),
  lastLogin: null,
  version: 0,
  roles: ["USER"],
  emailVerified: false,
  ...fields,
});

/** A registration that passes every rule, for the given e-mail. */
export const validRegistration = (email: string) => ({
  name: "Mei Lin",
  email,
  password: "Passw0rd!",
  confirmPassword: "Passw0rd!",
  age: 30,
  birthDate: "1995-04-01",
  phone: "+886 2 1234-5678",
  salary: 52000.5,
  address: { city: "台北市", district: "大安區", detail: "復興南路一段 390 號", zipCode: "10617" },
  skills: ["TypeScript", "SQL"],
});

/** What an empty registration body is refused with: every required field, in order. */
export const EMPTY_REGISTRATION_ERRORS = [
  "name: must not be blank",
  "email: must not be blank",
  "password: must not be blank",
  "confirmPassword: must not be blank",
  "age: must not be null",
  "address: must not be null",
  "skills: must have at least 1 entry",
];

/** The built-in payment simulator, counting its charges; `pauseMs` widens the window a double charge would need. */
export function countingGateway(pauseMs = 0) {
  const simulator = createSimulatedGateway();
  let charges = 0;
  const gateway: PaymentGateway = {
    async charge(request) {
      charges++;
      if (pauseMs > 0) await Bun.sleep(pauseMs);
      return simulator.charge(request);
    },
  };
  return { gateway, charges: () => charges };
}

export const TEST_SECRET = "test-secret-".padEnd(80, "x");

export interface RequestOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
  /** Sent as-is instead of JSON-encoding `body`. */
  raw?: RequestInit["body"];
}

/** `logs` receives every log line (JSON), for tests about logging; `tracing` is wired as main.ts wires it. */
export async function makeTestApp(env: Env = {}, options: { now?: () => number; logs?: { write(line: string): void }; paymentGateway?: PaymentGateway; tracing?: Tracing } = {}) {
  const { tracing } = options;
  const dir = mkdtempSync(join(tmpdir(), "usersvc-test-"));
  // On a remote leg the database is a server of the leg's (unless the suite names its own).
  const remote = onSqld && env.DATABASE_URL === undefined ? await openRemoteTestDatabase(dir) : undefined;
  const config = loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_SECRET, LOG_LEVEL: "silent", DATABASE_DRIVER: driver, ...remote?.env, ...env });
  const opened = await openDatabase({
    url: config.databaseUrl,
    authToken: config.databaseAuthToken,
    syncUrl: config.databaseSyncUrl,
    syncIntervalMs: config.databaseSyncIntervalMs,
    maxStalenessMs: config.databaseMaxStalenessMs,
    driver: config.databaseDriver,
    busyTimeoutMs: config.databaseBusyTimeoutMs,
    onRoundTrip: tracing?.roundTrip,
  });
  const database = tracing ? tracing.database(opened) : opened;
  await migrate(database);
  const now = options.now ?? Date.now;
  const cipher = createDataCipher(resolveDataEncryptionKey(config.dataEncryptionKey, config.dataDir, createLogging("silent", "json").root), config.dataEncryptionKeysPrevious);
  const tokens = configuredTokens(config, config.jwtSecret!, database, cipher, now);
  const metrics = createMetrics({ defaultMetrics: false });
  const logging = createLogging(config.logLevel, "json", options.logs, tracing?.logFields);
  const lifecycle: Lifecycle = { ready: true };
  // FILE_STORAGE defaults to an uploads folder in the temp dir; an s3:// one (env) uses the S3 settings there.
  const files = await createFileStore(config.fileStorage, config.s3);
  const app = createApp({ config, db: database, metrics, logging, tokens, cipher, lifecycle, now, files, paymentGateway: options.paymentGateway, tracing });
  const base = `http://localhost${config.basePath}`;
  let conformance: Conformance | undefined;

  /** Every answer is checked against the OpenAPI document (test/openapi-conformance.ts): a mismatch fails the test. */
  function conform(method: string, url: string, answer: TestResponse) {
    conformance ??= conformanceOf(app);
    const problems = conformance.check(method, url, answer);
    if (problems.length > 0) throw new Error(`the answer does not conform to the OpenAPI document:\n${problems.join("\n")}`);
  }
  const parse = (text: string): unknown => {
    try {
      return text ? JSON.parse(text) : undefined;
    } catch {
      return text; // not JSON: keep the text
    }
  };

  /** app.handle for a request built by the test (multipart, raw bodies), checked like request(); the Response comes back unread. */
  async function handle(req: Request): Promise<Response> {
    const response = await app.handle(req);
    // Only JSON (or a body said to be empty) is checked beyond its media type: a download is not copied.
    const type = response.headers.get("content-type") ?? "";
    const text = type === "" || type.includes("json") ? await response.clone().text() : "(not read)";
    conform(req.method, req.url, { status: response.status, headers: response.headers, body: parse(text), text });
    return response;
  }

  async function request<T = Answer>(method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: RequestInit["body"] | undefined = opts.raw;
    if (opts.body !== undefined && body === undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await app.handle(new Request(base + path, { method, headers, body }));
    const text = await response.text();
    const answer = { status: response.status, headers: response.headers, body: parse(text) as T, text };
    conform(method, base + path, answer);
    return answer;
  }

  /**
   * A user written straight to the database (with a password and roles), and a token for it.
   * Raw, not through the API: a user with no role is a state no route produces, and seeding
   * through POST /api/users would add USER_CREATED audit entries and WELCOME notifications to
   * every test's database, which the audit and outbox tests read.
   */
  async function createUser(opts: { email?: string; name?: string; password?: string; roles?: ("USER" | "ADMIN")[] } = {}) {
    const email = (opts.email ?? uniqueEmail()).toLowerCase();
    const at = new Date(now());
    const [{ id }] = await database.unguarded
      .insert(users)
      .values({
        name: opts.name ?? "Test User",
        email,
        passwordHash: opts.password ? await hashPassword(opts.password) : null,
        createdAt: at,
        updatedAt: at,
      })
      .returning({ id: users.id });
    for (const name of opts.roles ?? ["USER"]) {
      const [role] = await database.select().from(roles).where(eq(roles.name, name));
      await database.unguarded.insert(userRoles).values({ userId: id, roleId: role.id });
    }
    return { id, email, token: await tokens.issue(email, 0, id) };
  }

  return {
    app,
    config,
    dir,
    /** The app's database: reads, units of work. */
    database,
    /** The writer's own handle, for fixtures and checks between requests (never while a unit runs). */
    db: database.unguarded,
    tokens,
    cipher,
    metrics,
    files,
    logging,
    lifecycle,
    request,
    handle,
    createUser,
    admin: () => createUser({ roles: ["USER", "ADMIN"] }),
    /** The leg's sqld (its round trips, its faults), on the remote and replica legs. */
    primary: remote?.sqld,
    async close() {
      database.close();
      await remote?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof makeTestApp>>;

/** An embedded replica edge of `primary` (a sqld of the kit's), its copy in a folder of its own, with `env` on top. */
export const replicaEdge = (primary: Pick<Sqld, "url" | "authToken">, env: Env = {}) =>
  makeTestApp({ DATABASE_URL: `file:${mkdtempSync(join(tmpdir(), "usersvc-edge-"))}/usersvc.db`, DATABASE_SYNC_URL: primary.url, DATABASE_AUTH_TOKEN: primary.authToken, ...env });

/**
 * Another process holding the database's write lock (as a --workers sibling would) until
 * released. A process: two SQLite libraries in one process (bun:sqlite, libsql) do not see
 * each other's POSIX locks.
 */
export async function holdWriteLock(path: string) {
  const holder = Bun.spawn(
    [
      process.execPath,
      "-e",
      `const db = new (require("bun:sqlite").Database)(${JSON.stringify(path)}); db.run("PRAGMA busy_timeout = 5000"); db.run("BEGIN IMMEDIATE"); console.log("locked"); for await (const _ of console) break; db.run("ROLLBACK"); db.close();`,
    ],
    { stdin: "pipe", stdout: "pipe", stderr: "inherit" },
  );
  const reader = holder.stdout.getReader();
  const { value } = await reader.read();
  if (!new TextDecoder().decode(value).includes("locked")) throw new Error("the lock holder did not start");
  return {
    async release() {
      holder.stdin.write("\n");
      await holder.stdin.end();
      await holder.exited;
    },
  };
}

/** Another connection's write lock on the app's database: a process on the file, or another stream of a remote server (a replica's primary). */
export function holdDatabaseLock(config: { databaseUrl: string; databaseSyncUrl?: string; databaseAuthToken?: string }) {
  if (config.databaseSyncUrl) return holdRemoteWriteLock(config.databaseSyncUrl, config.databaseAuthToken);
  return config.databaseUrl.startsWith("file:") ? holdWriteLock(config.databaseUrl.slice("file:".length)) : holdRemoteWriteLock(config.databaseUrl, config.databaseAuthToken);
}

/** Bytes stored with no row recording them, as a crash between storing and recording leaves them; returns the stored name. */
export async function storeOrphan(t: TestApp, text: string): Promise<string> {
  const name = `${crypto.randomUUID()}.bin`;
  await t.files.put(
    name,
    (async function* () {
      yield new TextEncoder().encode(text);
    })(),
    1000,
  );
  return name;
}
