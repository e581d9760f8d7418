/**
 * Migrations at the edge (docs/data-layer.md, "Migrations"): edges that start together on an
 * empty primary migrate it once, and a build from before the last migration keeps serving on the
 * migrated schema (migrations only expand; a contraction comes a release later), as the current
 * build keeps serving on a schema a newer build has migrated.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Database } from "bun:sqlite";
import { createClient, type Client } from "@libsql/client";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { makeTestApp, validRegistration, type TestApp } from "./helpers";
import { startServer, type ServerProcess } from "./server-process";
import { startSqld, type Sqld } from "./support/sqld";

const ROOT = resolve(import.meta.dir, "..");
const MIGRATIONS = readMigrationFiles({ migrationsFolder: join(ROOT, "drizzle") });

let sqld: Sqld;
let primary: Client;
const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};

/** An app as an edge of `sqld`: an embedded replica in a folder of its own, every log line kept. */
async function edge(on: Sqld, logs: string[]): Promise<TestApp> {
  const dir = tempDir("usersvc-edge-");
  return makeTestApp(
    { DATABASE_URL: `file:${dir}/usersvc.db`, DATABASE_SYNC_URL: on.url, DATABASE_AUTH_TOKEN: on.authToken, LOG_LEVEL: "info" },
    { logs: { write: (line) => logs.push(line) } },
  );
}

const journal = async (client: Client) => (await client.execute("SELECT hash, created_at FROM __drizzle_migrations ORDER BY created_at")).rows.map((r) => Number(r.created_at));

beforeAll(async () => {
  sqld = await startSqld();
  primary = createClient({ url: sqld.url, authToken: sqld.authToken });
});
afterAll(async () => {
  primary.close();
  await sqld.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("edges starting together", () => {
  test("three edges on one empty primary at the same moment: each migration journaled once, all three serve, nothing logged as an error", async () => {
    // Three rounds, each on a fresh primary: a race that one round happens to miss shows in another.
    for (let round = 0; round < 3; round++) {
      const empty = await startSqld();
      const client = createClient({ url: empty.url, authToken: empty.authToken });
      const logs: string[] = [];
      try {
        const settled = await Promise.allSettled([0, 1, 2].map(() => edge(empty, logs)));
        const failures = settled.flatMap((s) => (s.status === "rejected" ? [String(s.reason)] : []));
        expect({ round, failures }).toEqual({ round, failures: [] });
        const edges = settled.map((s) => (s as PromiseFulfilledResult<TestApp>).value);
        expect(await journal(client)).toEqual(MIGRATIONS.map((m) => m.folderMillis));
        // Each serves: a registration at one is read at the others once they have pulled it.
        const email = `round${round}@edge.example.com`;
        const registered = await edges[0].request("POST", "/api/auth/register", { body: validRegistration(email) });
        expect(registered.status).toBe(201);
        for (const other of edges) {
          const admin = await other.admin();
          const found = await other.request("GET", `/api/users/${registered.body.data.id}`, { token: admin.token });
          expect(found.status).toBe(200);
        }
        for (const app of edges) app.close();
        expect(logs.filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
      } finally {
        client.close();
        await empty.stop();
      }
    }
  }, 120_000);
});

/**
 * The build just before the newest migration: the parent of the commit that added it, from git
 * history (a CI clone has it), unpacked with `git archive` beside this checkout's node_modules.
 */
function olderBuild(): { dir: string; commit: string } | { skip: string } {
  const git = (...args: string[]) => Bun.spawnSync(["git", "-C", ROOT, ...args], { stderr: "pipe" });
  const added = git("log", "-1", "--format=%H", "--diff-filter=A", "--", "drizzle/*.sql");
  const commit = added.exitCode === 0 ? added.stdout.toString().trim() : "";
  if (!commit) return { skip: "no git history here to take the build before the newest migration from" };
  const parent = git("rev-parse", "--verify", "--quiet", `${commit}^`);
  if (parent.exitCode !== 0) return { skip: `the history is too shallow to hold the commit before ${commit.slice(0, 7)}` };
  const before = parent.stdout.toString().trim();
  const dir = tempDir("usersvc-older-build-");
  const unpacked = Bun.spawnSync(["sh", "-c", `git -C "${ROOT}" archive "${before}" | tar -x -C "${dir}"`], { stderr: "pipe" });
  if (unpacked.exitCode !== 0) throw new Error(`git archive ${before}: ${unpacked.stderr}`);
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(dir, "node_modules"));
  return { dir, commit: before };
}

describe("a build from before the newest migration, on the schema the current build migrated", () => {
  const older = olderBuild();
  if ("skip" in older) console.log(`skipped: ${older.skip}`);

  test.skipIf("skip" in older)(
    "registers, signs in and reads as before, beside a current edge; each reads what the other wrote",
    async () => {
      const { dir } = older as { dir: string };
      const logs: string[] = [];
      const current = await edge(sqld, logs);
      expect(await journal(primary)).toEqual(MIGRATIONS.map((m) => m.folderMillis));
      const fromCurrent = await current.request("POST", "/api/auth/register", { body: validRegistration("current@edge.example.com") });
      expect(fromCurrent.status).toBe(201);
      // The older build has no working replica (issue 41): it reaches the same primary as a remote database.
      let server: ServerProcess | undefined;
      try {
        server = await startServer({ DATABASE_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken }, [process.execPath, join(dir, "src/main.ts")]);
        const call = async (method: string, path: string, body?: unknown, token?: string) => {
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (token) headers.authorization = `Bearer ${token}`;
          const res = await fetch(`${server!.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
          return { status: res.status, body: (await res.json()) as { data: Record<string, never> } & Record<string, unknown> };
        };
        const registered = await call("POST", "/api/auth/register", validRegistration("older@edge.example.com"));
        expect(registered.status).toBe(201);
        const signedIn = await call("POST", "/api/auth/login", { email: "older@edge.example.com", password: "Passw0rd!" });
        expect(signedIn.status).toBe(200);
        const token = signedIn.body.data.token as string;
        expect((await call("GET", `/api/users/${registered.body.data.id}`, undefined, token)).body).toMatchObject({ email: "older@edge.example.com", name: "Mei Lin" });
        // What the current build wrote, read by the older one.
        expect((await call("POST", "/api/auth/login", { email: "current@edge.example.com", password: "Passw0rd!" })).status).toBe(200);
        const users = await call("GET", "/api/users?size=50", undefined, server.token);
        expect(users.status).toBe(200);
        expect(JSON.stringify(users.body)).toContain("current@edge.example.com");
        expect((await call("GET", `/api/users/${fromCurrent.body.data.id}`, undefined, server.token)).status).toBe(200);
        expect((await call("GET", "/actuator/health")).status).toBe(200);
        // And the other way: the older build's account signs in at the current edge.
        expect((await current.request("POST", "/api/auth/login", { body: { email: "older@edge.example.com", password: "Passw0rd!" } })).status).toBe(200);
        // The older build journaled nothing: it found the newest migration unknown to it, and served.
        expect(await journal(primary)).toEqual(MIGRATIONS.map((m) => m.folderMillis));
      } finally {
        await server?.stop();
        current.close();
      }
      expect(logs.filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
    },
    120_000,
  );
});

describe("the current build on a database a newer build migrated", () => {
  /** A migrated file, with `ahead` journal entries newer than every migration this build knows. */
  async function migratedAhead(ahead: number): Promise<string> {
    const dir = tempDir("usersvc-ahead-");
    const first = await makeTestApp({ DATABASE_URL: `file:${dir}/usersvc.db`, DATABASE_DRIVER: "native" });
    first.close();
    const db = new Database(`${dir}/usersvc.db`);
    const newest = MIGRATIONS[MIGRATIONS.length - 1].folderMillis;
    for (let i = 1; i <= ahead; i++) db.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('newer', ?)", [newest + i * 86_400_000]);
    db.close();
    return dir;
  }

  test("one migration ahead (an unknown journal entry): it migrates nothing and serves", async () => {
    const dir = await migratedAhead(1);
    const app = await makeTestApp({ DATABASE_URL: `file:${dir}/usersvc.db`, DATABASE_DRIVER: "native" });
    try {
      expect((await app.request("POST", "/api/auth/register", { body: validRegistration("ahead@edge.example.com") })).status).toBe(201);
      expect((await app.request("POST", "/api/auth/login", { body: { email: "ahead@edge.example.com", password: "Passw0rd!" } })).status).toBe(200);
    } finally {
      app.close();
    }
    const db = new Database(`${dir}/usersvc.db`, { readonly: true });
    expect(db.query("SELECT count(*) AS n FROM __drizzle_migrations").get()).toEqual({ n: MIGRATIONS.length + 1 });
    db.close();
  }, 30_000);

  test("two ahead: `serve` refuses to start, with one line", async () => {
    const dir = await migratedAhead(2);
    await expect(startServer({ DATABASE_URL: `file:${dir}/usersvc.db` })).rejects.toThrow(
      /usersvc: the database is 2 migrations ahead of this build \(at most 1 is served\): run a newer build\n?$/,
    );
  }, 30_000);
});
