/**
 * What both drivers need to run units of work: turn-taking inside the process, and retrying
 * a whole unit while another process holds the write lock.
 */
import { DatabaseBusyError, isBusy } from "./errors";

/** An async mutex: one unit at a time, in arrival order. */
export function createTurns() {
  let tail: Promise<unknown> = Promise.resolve();
  return function inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = tail.then(work, work);
    tail = run.catch(() => undefined);
    return run;
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
