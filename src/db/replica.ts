/**
 * An embedded replica (DATABASE_SYNC_URL with a file: DATABASE_URL): a local copy of the primary,
 * pulled every DATABASE_SYNC_INTERVAL by the client in the background, and after each write.
 *
 * - Reads (the Database itself, readAll) run on the local copy, outside any transaction: no round trip.
 * - Units of work and migrations run at the primary over a Hrana connection of their own (the
 *   remote Database of libsql.ts: one batch per list unit, retried on contention, a deadline per
 *   round trip), then one sync pulls them into the copy before the unit answers, so the edge that
 *   wrote reads its write at once (but for a unit whose rows nothing reads from the copy, `unread`:
 *   an address counter). The replica's own write forwarding would cost ~3 round trips
 *   per statement and block the event loop for each (the embedded engine is synchronous).
 *
 * - A read that missed on the copy (an unknown user, session, key, device) is read again at the
 *   primary before it answers 401 or 404 (miss.ts): the copy may lag another edge's write.
 *
 * - Without its primary, reads go on from the copy until DATABASE_MAX_STALENESS has passed since
 *   the edge last reached the primary (Freshness in database.ts); then the guard answers 503.
 *
 * The first sync brings the whole database; a folder left by an earlier run syncs what is new.
 */
import { createClient, type Client } from "@libsql/client";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/libsql";
import type { Database, DatabaseOptions, Db, Freshness } from "./database";
import { openLibsql } from "./libsql";
import { readSurface } from "./reads";
import * as schema from "./schema";
import { eachInOrder, runUnit } from "./units";

export async function openReplica(options: DatabaseOptions & { syncUrl: string }, busyTimeoutMs: number): Promise<Database> {
  const { url, syncUrl, authToken, syncIntervalMs = 1000, maxStalenessMs = 60_000 } = options;
  const primary = await openLibsql({ ...options, url: syncUrl, syncUrl: undefined }, busyTimeoutMs);
  let local: Client;
  try {
    // readYourWrites (stated so it never silently changes): a statement the replica forwards
    // itself (a one-off tool's write on `unguarded`) returns once the copy can read it back.
    local = createClient({ url, syncUrl, authToken, readYourWrites: true, syncInterval: syncIntervalMs / 1000 });
    await local.sync();
  } catch (error) {
    primary.close();
    throw error;
  }
  const db: Db = drizzle(local, { schema });
  const freshness = watchPrimary(primary, syncIntervalMs, maxStalenessMs);
  // One pull at a time: a unit that asks while one runs gets the next, which starts after its write
  // and is shared by every unit asking meanwhile (each pull holds the event loop for its round
  // trip, and 50 sign-ups at once made 50 of them; remote.test.ts).
  type Pulled = Awaited<ReturnType<Client["sync"]>>;
  let pulling: Promise<Pulled> | undefined;
  let nextPull: Promise<Pulled> | undefined;
  const pull = (): Promise<Pulled> => {
    if (!pulling) {
      const current = local.sync();
      pulling = current;
      const done = () => {
        if (pulling === current) pulling = undefined;
      };
      current.then(done, done);
      return current;
    }
    nextPull ??= pulling
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        nextPull = undefined;
        return pull();
      });
    return nextPull;
  };
  /** The unit's answer once the copy holds what it wrote (unless `needed` is false: nothing reads it there). */
  const pulled = async <T>(unit: Promise<T>, needed = true): Promise<T> => {
    const started = performance.now();
    const answer = await unit;
    if (needed) await pull();
    freshness.reached(started);
    return answer;
  };

  return {
    ...readSurface(db),
    driver: "libsql",
    unguarded: db,
    write: (work) => pulled(primary.write(work)),
    writeAll: (build, writeOptions) => pulled(primary.writeAll(build, writeOptions), !writeOptions?.unread),
    // One by one, as on the native driver: a replica hands any transaction, BEGIN READONLY too, to
    // its primary (a round trip, and a failure while the primary is away).
    readAll: (build) => runUnit(db, build, eachInOrder),
    migrate: (statements) => pulled(primary.migrate(statements)),
    // A miss on the copy is read again here (miss.ts): over Hrana, with a deadline, never a sync,
    // which would hold the event loop for its round trip (the embedded engine is synchronous).
    primary,
    freshness,
    async pull() {
      const started = performance.now();
      const pulled = await pull();
      freshness.reached(started);
      return { frameNo: pulled?.frame_no };
    },
    close() {
      freshness.stop();
      local.close();
      primary.close();
    },
  };
}

/**
 * The replica's Freshness: `select 1` at the primary every `intervalMs` (one at a time; a hung
 * primary's probe ends at the connection's deadline), the copy having just been pulled (the open's
 * first sync) at the start.
 */
function watchPrimary(primary: Database, intervalMs: number, maxStalenessMs: number): Freshness & { reached(at: number): void; stop(): void } {
  let reachedAt = performance.now();
  let up = true;
  let probing = false;
  const reached = (at: number) => {
    reachedAt = Math.max(reachedAt, at);
    up = true;
  };
  const probe = async () => {
    if (probing) return;
    probing = true;
    const started = performance.now();
    try {
      await primary.get(sql`select 1`);
      reached(started);
    } catch {
      up = false;
    } finally {
      probing = false;
    }
  };
  const timer = setInterval(probe, intervalMs);
  timer.unref();
  const stalenessMs = () => performance.now() - reachedAt;
  return {
    stalenessMs,
    primaryUp: () => up,
    tooStale: () => stalenessMs() > maxStalenessMs,
    reached,
    stop: () => clearInterval(timer),
  };
}
