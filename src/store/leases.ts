/**
 * Leases: "who holds what" across worker processes, the CLI and the schedule, in the database
 * they share. A holder renews its row while it works; a holder killed with -9 stops renewing and
 * its row expires after LEASE_TTL_MS, so the next taker simply takes it over.
 */
import { and, eq, gt, like, lt, or, sql } from "drizzle-orm";
import type { Database, Reader } from "../db/database";
import { leases } from "../db/schema";

/** How long a lease outlives its holder's last renewal. */
export const LEASE_TTL_MS = 10_000;
/** Renewals come well inside the TTL, so one slow (busy) renewal does not lose the lease. */
const RENEW_EVERY_MS = LEASE_TTL_MS / 4;

export const SERVE_LEASE_PREFIX = "serve:";
export const BACKUP_LEASE = "backup";
export const RESTORE_LEASE = "restore";

export interface Lease {
  readonly name: string;
  readonly holder: string;
  /** Stops renewing and deletes the row (only if it is still ours). */
  release(): Promise<void>;
}

/**
 * One statement: inserts the row, or takes it over when it expired (or is already ours).
 * On its own (without acquireLease's renewals) it marks a short step for LEASE_TTL_MS.
 */
export async function claimLease(db: Database, name: string, holder: string, now: number): Promise<boolean> {
  const expiresAt = new Date(now + LEASE_TTL_MS);
  const [taken] = await db.writeAll((tx) => [
    tx
      .insert(leases)
      .values({ name, holder, expiresAt })
      .onConflictDoUpdate({
        target: leases.name,
        set: { holder, expiresAt },
        where: or(lt(leases.expiresAt, new Date(now)), eq(leases.holder, holder)),
      })
      .returning({ holder: leases.holder }),
  ]);
  return taken.length === 1;
}

/**
 * Takes the lease `name` and keeps it renewed until released; undefined when someone else holds it.
 * `onLost` hears when a renewal found the row taken over (a holder stalled past the TTL). `now`: the
 * holder's clock, read at every renewal.
 */
export async function acquireLease(
  db: Database,
  name: string,
  now: () => number,
  options: { onRenewError?: (error: unknown) => void; onLost?: () => void } = {},
): Promise<Lease | undefined> {
  const holder = `${process.pid}-${crypto.randomUUID()}`;
  if (!(await claimLease(db, name, holder, now()))) return undefined;
  let released = false;
  const timer = setInterval(() => {
    claimLease(db, name, holder, now()).then(
      (kept) => !kept && !released && options.onLost?.(),
      (error) => options.onRenewError?.(error),
    );
  }, RENEW_EVERY_MS);
  // A lease must not keep a CLI process alive on its own.
  timer.unref();
  return {
    name,
    holder,
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      await db.writeAll((tx) => [tx.delete(leases).where(and(eq(leases.name, name), eq(leases.holder, holder)))]);
    },
  };
}

/** Unexpired leases whose name starts with `prefix` (a fixed name: no LIKE wildcards), with how long each still runs (ms). */
export async function liveLeases(db: Database, prefix: string, now: number): Promise<{ name: string; remainingMs: number }[]> {
  const rows = await db
    .select({ name: leases.name, expiresAt: leases.expiresAt })
    .from(leases)
    .where(and(like(leases.name, `${prefix}%`), gt(leases.expiresAt, new Date(now))));
  return rows.map((r) => ({ name: r.name, remainingMs: r.expiresAt.getTime() - now }));
}

/** Whether the database has the leases table at all (a database from before it, e.g. one being restored). */
export async function hasLeaseTable(db: Reader) {
  return (await db.all(sql`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'leases'`)).length > 0;
}
