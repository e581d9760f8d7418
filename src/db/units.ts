/**
 * What both drivers need to run units of work: turn-taking inside the process, and retrying
 * a whole unit while another process holds the write lock.
 */
import type { Statement, Unit, UnitAnswers } from "./database";
import { DatabaseBusyError, isBusy } from "./errors";

type Entry = Statement | readonly Statement[] | undefined;
const isList = (value: unknown): value is readonly Statement[] => Array.isArray(value);

/** A unit's statements as one flat list, in the order written. */
function statementsOf(unit: Unit): readonly Statement[] {
  if (isList(unit)) return unit;
  return Object.values<Entry>(unit).flatMap((entry) => (entry === undefined ? [] : isList(entry) ? entry : [entry]));
}

/** The flat list's results back in the unit's shape: a tuple, or the same names. */
function answersOf<U extends Unit>(unit: U, results: readonly unknown[]): UnitAnswers<U> {
  if (isList(unit)) return results as UnitAnswers<U>;
  let next = 0;
  const answers: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries<Entry>(unit)) {
    if (entry === undefined) answers[name] = undefined;
    else if (isList(entry)) {
      answers[name] = results.slice(next, next + entry.length);
      next += entry.length;
    } else answers[name] = results[next++];
  }
  return answers as UnitAnswers<U>;
}

/**
 * A list unit on a driver: `run` runs the flat list of statements `build` makes (it may build them
 * more than once, e.g. to run a group again) and answers their results, which come back in the unit's shape.
 */
export async function runUnit<H, U extends Unit>(
  handle: H,
  build: (handle: H) => U,
  run: (statements: () => readonly Statement[]) => Promise<readonly unknown[]>,
): Promise<UnitAnswers<U>> {
  let unit: U | undefined;
  const results = await run(() => {
    unit = build(handle);
    return statementsOf(unit);
  });
  return answersOf(unit as U, results);
}

/** A read unit's statements one after another on one connection, outside any transaction: `run` for runUnit. */
export async function eachInOrder(statements: () => readonly Statement[]): Promise<unknown[]> {
  const results = [];
  for (const statement of statements()) results.push(await statement);
  return results;
}

/** An async mutex: one unit at a time, in arrival order. */
export function createTurns() {
  let tail: Promise<unknown> = Promise.resolve();
  return function inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = tail.then(work, work);
    tail = run.catch(() => undefined);
    return run;
  };
}

/** The share of a unit's wait that must be left when its turn comes for it to be sent (createLimit). */
const SEND_MARGIN = 0.1;

/**
 * Like createTurns, but `atOnce` units at a time; a unit whose turn comes more than `maxWaitMs`
 * after it arrived is not run: it fails with a DatabaseBusyError (503), so a line longer than the
 * busy timeout drains at once instead of serving answers nobody waits for. Nor is one whose turn
 * leaves it less than SEND_MARGIN of that wait: the units ahead of it, which arrived a moment
 * earlier, free their places at their own deadlines, and one sent with a sliver left could not
 * get its answer in time, yet would still commit at the primary later.
 */
export function createLimit(atOnce: number, maxWaitMs: number) {
  const latestStart = maxWaitMs * (1 - SEND_MARGIN);
  let running = 0;
  const waiting: (() => void)[] = [];
  const acquire = () => {
    if (running < atOnce) {
      running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => waiting.push(resolve));
  };
  // A freed place goes straight to the next in line, so no newcomer slips in between.
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return function inTurn<T>(work: () => Promise<T>): Promise<T> {
    const arrived = performance.now();
    return acquire().then(async () => {
      try {
        const waited = performance.now() - arrived;
        if (waited > latestStart) throw new DatabaseBusyError(Math.round(waited));
        return await work();
      } finally {
        release();
      }
    });
  };
}

const FIRST_PAUSE_MS = 2;
const LONGEST_PAUSE_MS = 100;

/**
 * Runs `attempt` again while it fails busy (it must leave nothing behind when it throws),
 * pausing a random time up to a doubling ceiling so competing processes spread out; after
 * `busyTimeoutMs` the caller gets a DatabaseBusyError. `afterBusy` runs after each busy failure.
 */
export async function retryWhileBusy<T>(attempt: () => Promise<T>, busyTimeoutMs: number, afterBusy?: (error: unknown) => void): Promise<T> {
  const started = performance.now();
  for (let ceiling = FIRST_PAUSE_MS; ; ceiling = Math.min(ceiling * 2, LONGEST_PAUSE_MS)) {
    try {
      return await attempt();
    } catch (error) {
      if (!isBusy(error) || error instanceof DatabaseBusyError) throw error;
      afterBusy?.(error);
      const waited = performance.now() - started;
      if (waited >= busyTimeoutMs) throw new DatabaseBusyError(Math.round(waited), { cause: error });
      await Bun.sleep(Math.min(Math.random() * ceiling, busyTimeoutMs - waited));
    }
  }
}
