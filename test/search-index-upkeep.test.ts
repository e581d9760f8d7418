/**
 * The name-search index upkeep (src/features/search/index-upkeep.ts): users written one by one
 * leave users_name_fts in many segments; merge steps bring it to one, every search answers as
 * before, the index still matches users, and a step on a whole index changes nothing (nor waits
 * for the write lock).
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { sql } from "drizzle-orm";
import { mergeNameIndex, startNameIndexUpkeep } from "../src/features/search/index-upkeep";
import { seedUsers } from "./fixtures/users-dataset";
import { holdDatabaseLock, makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await makeTestApp();
  await seedUsers(t.database, { count: 1500, seed: 3 });
  token = (await t.admin()).token;
});
afterAll(() => t.close());

/** FTS5 keeps one %_idx entry per leaf page of each segment: its distinct segids are the segments. */
const segments = async () => (await t.database.all<{ n: number }>(sql`SELECT count(DISTINCT segid) AS n FROM users_name_fts_idx`))[0].n;
const indexPages = () => t.database.all<{ id: number; block: unknown }>(sql`SELECT id, block FROM users_name_fts_data ORDER BY id`);
const TERMS = ["ann", "li", "Wang", "an", "zzz", "é"];
const answers = async () => Promise.all(TERMS.map(async (name) => (await t.request("GET", `/api/search/users?name=${encodeURIComponent(name)}&size=100`, { token })).text));

describe("name index upkeep", () => {
  test("merge steps bring the index to one segment; every search answers as before", async () => {
    const before = await segments();
    expect(before).toBeGreaterThan(1);
    const expected = await answers();
    expect(expected.some((body) => JSON.parse(body).length > 0)).toBe(true);
    for (let step = 0; step < 20 && (await segments()) > 1; step++) await mergeNameIndex(t.database);
    expect(await segments()).toBe(1);
    expect(await answers()).toEqual(expected);
    // Checks the index against users, its content table: throws SQLITE_CORRUPT_VTAB if they differ.
    await t.database.write(async (tx) => {
      await tx.run(sql`INSERT INTO users_name_fts(users_name_fts, rank) VALUES ('integrity-check', 1)`);
    });
  });

  test("a step on an index in one piece changes nothing", async () => {
    expect(await segments()).toBe(1);
    const pages = await indexPages();
    expect(await mergeNameIndex(t.database)).toBe(0);
    expect(await indexPages()).toEqual(pages);
  });

  test("a step on an index in one piece takes no write unit: it answers while another connection holds the write lock", async () => {
    expect(await segments()).toBe(1);
    const other = await holdDatabaseLock(t.config);
    try {
      expect(await mergeNameIndex(t.database)).toBe(0);
    } finally {
      await other.release();
    }
  });

  test("a write after the merge is found at once, and the next step folds it in", async () => {
    const created = await t.request("POST", "/api/users", { token, body: { name: "Quillon Vexbright", email: "qv@example.com" } });
    expect(created.status).toBe(201);
    const find = async () => (await t.request("GET", "/api/search/users?name=vexbr", { token })).body.map((u: { id: number }) => u.id);
    expect(await find()).toEqual([created.body.id]);
    expect(await segments()).toBeGreaterThan(1);
    await mergeNameIndex(t.database);
    expect(await segments()).toBe(1);
    expect(await find()).toEqual([created.body.id]);
  });

  test("the primary's timer runs the steps on its own, and stops", async () => {
    expect((await t.request("POST", "/api/users", { token, body: { name: "Timer Merged", email: "tm@example.com" } })).status).toBe(201);
    expect(await segments()).toBeGreaterThan(1);
    const logged: unknown[] = [];
    const before = await segments();
    const merged = async () => (await t.metrics.searchIndexSegmentsMerged.get()).values[0]?.value ?? 0;
    const counted = await merged();
    const upkeep = startNameIndexUpkeep(t.database, { warn: (...args: unknown[]) => logged.push(args), debug: () => {} } as never, t.metrics, 20);
    try {
      for (let waited = 0; waited < 5000 && (await segments()) > 1; waited += 20) await Bun.sleep(20);
      expect(await segments()).toBe(1);
      // Its work in search_index_segments_merged_total: the segments folded away, once; later steps on the whole index add nothing.
      await Bun.sleep(100);
    } finally {
      await upkeep.stop();
    }
    expect(await merged()).toBe(counted + before - 1);
    expect(logged).toEqual([]);
  });
});
