/**
 * src/db/embedded-tuning.ts: every connection the @libsql/client pool opens gets the
 * PRAGMAs, however late it is opened, and cached statements stay correct after failures.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/db/client";

const dir = mkdtempSync(join(tmpdir(), "usersvc-tuning-"));
const database = await openDatabase({ url: `file:${join(dir, "t.db")}` });
const { client } = database;
afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

test("connections opened later by the pool get synchronous=NORMAL and the checkpoint size too", async () => {
  // Read transactions each hold a connection of their own, so the pool has to open more.
  const transactions = await Promise.all(Array.from({ length: 4 }, () => client.transaction("read")));
  try {
    for (const tx of transactions) {
      expect(Number((await tx.execute("PRAGMA synchronous")).rows[0][0])).toBe(1);
      expect(Number((await tx.execute("PRAGMA wal_autocheckpoint")).rows[0][0])).toBe(10_000);
    }
  } finally {
    for (const tx of transactions) await tx.commit();
  }
});

test("a cached statement that failed runs again correctly", async () => {
  await client.execute("create table t (k text primary key, v integer not null)");
  const insert = (k: string, v: number) => client.execute({ sql: "insert into t (k, v) values (?, ?)", args: [k, v] });
  await insert("a", 1);
  await expect(insert("a", 2)).rejects.toMatchObject({ code: "SQLITE_CONSTRAINT" });
  await insert("b", 3);
  const tx = await client.transaction("write");
  await tx.execute({ sql: "insert into t (k, v) values (?, ?)", args: ["c", 4] });
  await tx.commit();
  const rows = (await client.execute("select k, v from t order by k")).rows.map((r) => [r.k, r.v]);
  expect(rows).toEqual([["a", 1], ["b", 3], ["c", 4]]);
});
