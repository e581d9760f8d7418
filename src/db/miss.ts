/**
 * A miss is never final on an embedded replica's copy: a user, session, API key or device made at
 * another edge a moment ago (or a token issued since the last pull) is not there yet. Before such
 * a miss becomes a 401 or a 404, the same read runs again at the primary (one round trip, on the
 * miss only: a hit costs what it did). Without its primary that read fails as any unreachable
 * primary does (503 with Retry-After), never a 401 that would make a client drop a good token.
 */
import type { MaybePromise } from "../maybe-promise";
import type { Database, Reader } from "./database";

/** What a read needs of a Database: its read surface, or its primary's. */
export type ReadSource = Pick<Database, "readAll" | keyof Reader>;

/** What a read answers when it found nothing: no row, no rows, no. */
const isMiss = (answer: unknown) => answer === undefined || answer === false || (Array.isArray(answer) && answer.length === 0);

/**
 * A store's or service's read of one thing by its id, token or key, on whatever `db` its caller
 * holds: when it finds nothing (`missed`: undefined, no rows, false) and `db` is an embedded
 * replica's Database, the same read again at its primary. A unit's `tx` (already at the primary)
 * and every other database have no primary: there the read is `read(db)` itself, and a hit costs
 * one property read anywhere.
 */
export function foundOrAgain<S extends Reader | Pick<Database, "readAll">, T>(
  db: S,
  read: (source: S | ReadSource) => MaybePromise<T> | PromiseLike<T>,
  missed: (answer: T) => boolean = isMiss,
): MaybePromise<T> {
  const first = read(db);
  const { primary } = db as Partial<Pick<Database, "primary">>;
  // Elsewhere the read itself: at once when it answers at once (the guard's hot path), awaited as it is otherwise.
  if (!primary) return first as MaybePromise<T>;
  // Promise.resolve: a drizzle query or a bound statement is a thenable, not a Promise.
  return Promise.resolve(first).then((answer) => (missed(answer) ? read(primary) : answer));
}

/**
 * What a change is judged on at its `attempt`: the first reads `db` as foundOrAgain does (an
 * answer `refused` says no to is read again at the primary: the copy may lag); a later one reads
 * at the primary at once, since the unit before it found the primary otherwise than that read.
 */
export function readForAttempt<T>(db: Database, attempt: number, read: (source: ReadSource) => Promise<T>, refused: (answer: T) => boolean): MaybePromise<T> {
  return attempt === 1 ? foundOrAgain(db, read, refused) : read(db.primary ?? db);
}
