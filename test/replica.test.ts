/**
 * The program as an embedded replica of sqld (README, "Embedded replicas"), with sqld's JWT auth
 * on: from an empty folder (the first sync brings the database, the migrations run at the
 * primary), and again from the folder it left, migrating nothing twice. Reads come from the local
 * copy (no round trip: a user, a list, a search), a write is read back at once by the edge that made it, and a write made
 * at the primary by someone else arrives with the background pull.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, rmSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createClient, type Client } from "@libsql/client";
import { ADMIN, startLog, startServer, type ServerProcess } from "./server-process";
import { startSqld, type Sqld } from "./support/sqld";

const MIGRATIONS = readdirSync(resolve(import.meta.dir, "../drizzle")).filter((f) => f.endsWith(".sql")).length;
const PASSWORD = "Passw0rd!";

let sqld: Sqld;
let primary: Client;
let dataDir: string;
let edge: ServerProcess | undefined;

const startEdge = () =>
  startServer({
    DATA_DIR: dataDir,
    DATABASE_URL: `file:${dataDir}/usersvc.db`,
    DATABASE_SYNC_URL: sqld.url,
    DATABASE_AUTH_TOKEN: sqld.authToken,
    DATABASE_SYNC_INTERVAL: "200ms",
  });

const call = async (method: string, path: string, body?: unknown, token?: string) => {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${edge!.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { data?: Record<string, unknown> } & Record<string, unknown> };
};
const login = (email: string, password = PASSWORD) => call("POST", "/api/auth/login", { email, password });

beforeAll(async () => {
  sqld = await startSqld();
  primary = createClient({ url: sqld.url, authToken: sqld.authToken });
  dataDir = mkdtempSync(join(tmpdir(), "usersvc-replica-"));
});
afterAll(async () => {
  await edge?.stop();
  primary.close();
  await sqld.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test("from an empty folder: migrated at the primary, the ADMIN created there, the copy private to its owner", async () => {
  expect(readdirSync(dataDir)).toEqual([]);
  edge = await startEdge();
  const { rows } = await primary.execute("SELECT count(*) AS n FROM __drizzle_migrations");
  expect(Number(rows[0].n)).toBe(MIGRATIONS);
  expect((await primary.execute({ sql: "SELECT count(*) AS n FROM users WHERE email = ?", args: [ADMIN.email] })).rows[0].n).toBe(1);
  expect((await login(ADMIN.email, ADMIN.password)).status).toBe(200);
  for (const file of readdirSync(dataDir).filter((f) => f.startsWith("usersvc.db")))
    expect({ file, mode: statSync(join(dataDir, file)).mode & 0o777 }).toEqual({ file, mode: 0o600 });
}, 60_000);

test("a write is at the primary and read back at once by the edge that made it; reads take no round trip", async () => {
  const email = `edge-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const created = await call("POST", "/api/users", { name: "Edge Reader", email, password: PASSWORD }, edge!.token);
  expect(created.status).toBe(201);
  const id = created.body.id as number;
  expect((await primary.execute({ sql: "SELECT name FROM users WHERE id = ?", args: [id] })).rows[0].name).toBe("Edge Reader");
  const signedIn = await login(email);
  expect(signedIn.status).toBe(200);
  // The least of a few reads: the outbox sender and the index upkeep reach the primary now and then.
  for (const path of [`/api/users/${id}`, "/api/users?page=0&size=5", "/api/search/users?name=Edge"]) {
    let least = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 5 && least > 0; i++) {
      await sqld.reset();
      expect({ path, status: (await call("GET", path, undefined, edge!.token)).status }).toEqual({ path, status: 200 });
      least = Math.min(least, await sqld.roundTrips());
    }
    expect({ path, roundTrips: least }).toEqual({ path, roundTrips: 0 });
  }
  expect((await call("GET", `/api/users/${id}`, undefined, edge!.token)).body.name).toBe("Edge Reader");
}, 60_000);

test("a write made at the primary by someone else arrives with the background pull (DATABASE_SYNC_INTERVAL)", async () => {
  const email = `elsewhere-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const now = Date.now();
  const { lastInsertRowid } = await primary.execute({ sql: "INSERT INTO users (name, email, created_at, updated_at) VALUES ('Far Away', ?, ?, ?)", args: [email, now, now] });
  const started = performance.now();
  let status = 0;
  while (status !== 200 && performance.now() - started < 10_000) {
    status = (await call("GET", `/api/users/${lastInsertRowid}`, undefined, edge!.token)).status;
    if (status !== 200) await Bun.sleep(20);
  }
  expect(status).toBe(200);
}, 30_000);

test("started again on the folder it left: nothing migrated twice, every account still there", async () => {
  await edge!.stop();
  edge = undefined;
  expect(readdirSync(dataDir)).toContain("usersvc.db");
  edge = await startEdge();
  expect(Number((await primary.execute("SELECT count(*) AS n FROM __drizzle_migrations")).rows[0].n)).toBe(MIGRATIONS);
  expect((await login(ADMIN.email, ADMIN.password)).status).toBe(200);
}, 60_000);

test.each([
  ["an embedded replica", (dir: string) => ({ DATABASE_URL: `file:${dir}/usersvc.db`, DATABASE_SYNC_URL: sqld.url })],
  ["a remote primary", () => ({ DATABASE_URL: sqld.url })],
])(
  "%s with a folder FILE_STORAGE: the program warns once at start (files are not shared)",
  async (_, database) => {
    const warnings = (await startLog((dir) => ({ DATABASE_AUTH_TOKEN: sqld.authToken, ...database(dir) }))).filter((line) => line.includes("FILE_STORAGE is a folder"));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]).level).toBe("warn");
  },
  60_000,
);
