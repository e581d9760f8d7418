/**
 * Migrations at the edge (docs/data-layer.md, "Migrations"): edges that start together on an
 * empty primary migrate it once, and a build from before the last migration keeps serving on the
 * migrated schema (migrations only expand; a contraction comes a release later), as the current
 * build keeps serving on a schema a newer build has migrated.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
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
