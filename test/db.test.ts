/**
 * src/db: the unit of work on this leg's driver (test/legs.ts): all or nothing, in turns,
 * retried while another process holds the lock; reads outside a unit see only commits; and
 * every driver's failures classified by the one table.
 */
import { afterAll, describe, expect, test } from "./legs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import type { Database, Reader } from "../src/db/database";
import { openDatabase } from "../src/db/open";
import { classifyDatabaseError, DatabaseBusyError } from "../src/db/errors";
import { migrate } from "../src/db/migrate";
import { departments, orders, products, roles } from "../src/db/schema";
import { holdWriteLock } from "./helpers";
import { driver, leg } from "./legs";

const dir = mkdtempSync(join(tmpdir(), "usersvc-db-"));
const path = join(dir, "t.db");
const open = (busyTimeoutMs = 5000) => openDatabase({ url: `file:${path}`, driver, busyTimeoutMs });
const database = await open();
await migrate(database);
afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

const named = (db: Reader, name: string) => db.select().from(departments).where(eq(departments.name, name));

describe("a unit of work", () => {
  test("a throw after an await inside the unit leaves nothing committed", async () => {
    const failure = new Error("after an await");
    await expect(
      database.write(async (tx) => {
        await tx.insert(departments).values({ name: "Rolled back" });
        await Bun.sleep(5);
        expect(await named(tx, "Rolled back")).toHaveLength(1);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await named(database, "Rolled back")).toEqual([]);
  });

  test("reads outside see only committed data, never an open unit's writes; the unit's reads see its own", async () => {
    let release!: () => void;
    const paused = new Promise<void>((resolve) => (release = resolve));
    let inside!: () => void;
    const started = new Promise<void>((resolve) => (inside = resolve));
    const unit = database.write(async (tx) => {
      await tx.insert(departments).values({ name: "Pending" });
      expect(await named(tx, "Pending")).toHaveLength(1);
      inside();
      await paused;
    });
    await started;
    expect(await named(database, "Pending")).toEqual([]);
    release();
    await unit;
    expect(await named(database, "Pending")).toHaveLength(1);
  });

  test("units of one process take turns: concurrent read-modify-writes lose no update", async () => {
    const [[{ id }]] = await database.writeAll((tx) => [tx.insert(departments).values({ name: "Counter", description: "0" }).returning({ id: departments.id })]);
    await Promise.all(
      Array.from({ length: 20 }, () =>
        database.write(async (tx) => {
          const [row] = await tx.select().from(departments).where(eq(departments.id, id));
          await Bun.sleep(1);
          await tx
            .update(departments)
            .set({ description: String(Number(row.description) + 1) })
            .where(eq(departments.id, id));
        }),
      ),
    );
    expect((await named(database, "Counter"))[0].description).toBe("20");
  });

  test("a list unit is all or nothing and answers each statement's result", async () => {
    const failure = await database.writeAll((tx) => [tx.insert(departments).values({ name: "List A" }), tx.insert(roles).values({ name: "USER" })]).catch((e) => e);
    expect(classifyDatabaseError(failure)).toBe("duplicate");
    expect(await named(database, "List A")).toEqual([]);
    const [inserted, counted] = await database.writeAll((tx) => [
      tx.insert(departments).values({ name: "List B" }).returning({ name: departments.name }),
      tx.select({ n: sql<number>`count(*)` }).from(departments).where(eq(departments.name, "List B")),
    ]);
    expect(inserted).toEqual([{ name: "List B" }]);
    expect(counted).toEqual([{ n: 1 }]);
  });

  test("concurrent list units: one failing midway or at once rolls back only itself, every other commits", async () => {
    // Arriving together (and queued behind another process's lock), the native driver commits them as one group.
    const other = await holdWriteLock(path);
    setTimeout(() => other.release(), 50);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        database.writeAll((tx) => [
          // Unit 5's first statement fails (unit 0 has that name); unit 3's second does.
          tx.insert(departments).values({ name: `Group ${i === 5 ? 0 : i}` }),
          ...(i === 3 ? [tx.insert(roles).values({ name: "USER" })] : []),
        ]),
      ),
    );
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled", "rejected", "fulfilled", "fulfilled"]);
    for (const i of [3, 5]) expect(classifyDatabaseError((outcomes[i] as PromiseRejectedResult).reason)).toBe("duplicate");
    const names = await database.select({ name: departments.name }).from(departments).where(sql`${departments.name} like 'Group %'`);
    expect(names.map((r) => r.name).sort()).toEqual(["Group 0", "Group 1", "Group 2", "Group 4", "Group 6", "Group 7"]);
  });

  test("a unit failing after its first statement leaves no row and costs the others of its group no re-run", async () => {
    // Issued in one tick, so the native driver commits them as one group (no lock held: a unit
    // retried while busy would be built again). How many times each unit's statements were
    // built to run: once, unless its group ran again.
    const runs = Array.from({ length: 6 }, () => 0);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        database.writeAll(
          (tx) => {
            runs[i]++;
            // Unit 2 writes, then fails (declared failsMidway). Unit 4's first statement finds unit 0's
            // row and changes nothing, then fails: it never wrote, so it needs no declaration.
            if (i === 2) return [tx.insert(departments).values({ name: "Isolated 2" }), tx.insert(roles).values({ name: "USER" })];
            if (i === 4) return [tx.insert(departments).values({ name: "Isolated 0" }).onConflictDoNothing(), tx.insert(roles).values({ name: "USER" })];
            return [tx.insert(departments).values({ name: `Isolated ${i}` }), tx.insert(departments).values({ name: `Isolated ${i} too` })];
          },
          { failsMidway: i === 2 },
        ),
      ),
    );
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled", "rejected", "fulfilled"]);
    for (const i of [2, 4]) expect(classifyDatabaseError((outcomes[i] as PromiseRejectedResult).reason)).toBe("duplicate");
    expect(runs).toEqual([1, 1, 1, 1, 1, 1]);
    const names = await database.select({ name: departments.name }).from(departments).where(sql`${departments.name} like 'Isolated %'`);
    expect(names.map((r) => r.name).sort()).toEqual([
      "Isolated 0",
      "Isolated 0 too",
      "Isolated 1",
      "Isolated 1 too",
      "Isolated 3",
      "Isolated 3 too",
      "Isolated 5",
      "Isolated 5 too",
    ]);
  });

  test("while another process holds the write lock, the unit waits, then commits", async () => {
    const other = await holdWriteLock(path);
    setTimeout(() => other.release(), 150);
    const started = performance.now();
    await database.writeAll((tx) => [tx.insert(departments).values({ name: "After the lock" })]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    expect(await named(database, "After the lock")).toHaveLength(1);
  });

  test("past DATABASE_BUSY_TIMEOUT_MS it gives up with DatabaseBusyError and nothing written; then recovers", async () => {
    const impatient = await open(200);
    const other = await holdWriteLock(path);
    try {
      const failure = await impatient.write(async (tx) => tx.insert(departments).values({ name: "Never" })).catch((e) => e);
      expect(failure).toBeInstanceOf(DatabaseBusyError);
      expect(classifyDatabaseError(failure)).toBe("busy");
    } finally {
      await other.release();
    }
    await impatient.write(async (tx) => tx.insert(departments).values({ name: "Later" }));
    await impatient.writeAll((tx) => [tx.insert(departments).values({ name: "Later still" })]);
    expect(await named(database, "Later")).toHaveLength(1);
    expect(await named(database, "Later still")).toHaveLength(1);
    expect(await named(database, "Never")).toEqual([]);
    impatient.close();
  });
});

describe("the error table", () => {
  const now = new Date();
  test.each([
    ["duplicate", (db: Database) => db.writeAll((tx) => [tx.insert(roles).values({ name: "USER" })])],
    ["foreignKey", (db: Database) => db.writeAll((tx) => [tx.insert(orders).values({ userId: 987654, status: "PENDING", totalCents: 1, createdAt: now, updatedAt: now })])],
    [
      "other",
      (db: Database) =>
        db.writeAll((tx) => [tx.insert(products).values({ name: "P", code: "NEGATIVE", priceCents: 100, stock: -1, status: "ACTIVE", createdAt: now, updatedAt: now })]),
    ],
  ] as const)("%s", async (kind, run) => {
    const error = await run(database).catch((e) => e);
    expect(classifyDatabaseError(error)).toBe(kind);
  });

  test("a remote server's primary codes and text are read too", () => {
    expect(classifyDatabaseError({ code: "SQLITE_CONSTRAINT", message: "SQLite error: UNIQUE constraint failed: users.email" })).toBe("duplicate");
    expect(classifyDatabaseError({ code: "SQLITE_CONSTRAINT", message: "SQLite error: CHECK constraint failed: stock" })).toBe("other");
    expect(classifyDatabaseError({ code: "SQLITE_BUSY", message: "database is locked" })).toBe("busy");
    expect(classifyDatabaseError(new Error("unrelated"))).toBeUndefined();
  });

  // What an embedded replica's sync throws when its primary is gone (the texts @libsql/client gave
  // with sqld killed: mid-pull, and on the next pull): the pull after a unit must answer 503, not 500.
  test("an embedded replica's pull cut off from its primary is unreachable", () => {
    const killedMidPull = 'Replication(Client(Status { code: Unknown, message: "connection closed before message completed", source: Some(hyper::Error(IncompleteMessage)) }))';
    expect(classifyDatabaseError(Object.assign(new Error(killedMidPull), { code: "" }))).toBe("unreachable");
    expect(classifyDatabaseError(Object.assign(new Error("Replication(PrimaryHandshakeTimeout)"), { code: "" }))).toBe("unreachable");
  });
});

test("every writing connection gets synchronous=NORMAL and the measured checkpoint policy", async () => {
  const pragmas = async (db: Reader) => [
    Number((await db.all<{ synchronous: number }>(sql`PRAGMA synchronous`))[0].synchronous),
    Number((await db.all<{ wal_autocheckpoint: number }>(sql`PRAGMA wal_autocheckpoint`))[0].wal_autocheckpoint),
  ];
  // On libsql the pool opens a connection per transaction in flight, lazily: several units check theirs.
  const units = await Promise.all(Array.from({ length: 3 }, () => database.write(pragmas)));
  expect(units).toEqual(Array.from({ length: 3 }, () => [1, 10_000]));
});

test.if(leg === "native")("the reader connection refuses writes: a write outside a unit cannot slip past the turns", async () => {
  expect(() => database.all(sql`INSERT INTO departments (name) VALUES ('sneaked in')`)).toThrow(/readonly/);
  expect(await named(database, "sneaked in")).toEqual([]);
});
