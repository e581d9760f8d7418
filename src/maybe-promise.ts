/**
 * A value now, or later. The embedded driver (bun:sqlite) answers a read at once and libSQL
 * answers with a promise: code on the hot path that takes either (the guard's caller read)
 * continues at once when it can, since each await of a value already there cost the served
 * GET /api/users/{id} ~2 µs of its ~53 (wrk, server CPU per request) in promise and queue work.
 */
export type MaybePromise<T> = T | Promise<T>;

/** `next(value)`, at once when `value` is there, after it otherwise. */
export const andThen = <T, U>(value: MaybePromise<T>, next: (value: T) => MaybePromise<U>): MaybePromise<U> => (value instanceof Promise ? value.then(next) : next(value));
