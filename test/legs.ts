/**
 * The database legs. `npm test` (scripts/test.ts) runs every test file that takes its test
 * functions from here once per leg, with DATABASE_DRIVER (file legs) or TEST_LEG (remote legs)
 * set for the run (and inherited by the servers a test starts); each test's name ends with its leg, so CI's JUnit report counts
 * both legs and neither overwrites the other. Everything else is bun:test's own.
 */
import * as bun from "bun:test";

export const LEGS = ["native", "libsql", "remote-http", "remote-ws", "replica"] as const;
export type Leg = (typeof LEGS)[number];
/**
 * The sqld legs (TEST_LEG=remote-http / remote-ws / replica) give every makeTestApp a fresh sqld
 * of its own (test/support/sqld.ts), with JWT auth on: reached over http:// or ws://, or (replica)
 * through an embedded replica, a file in the app's folder synced from it.
 */
export const leg: Leg = LEGS.find((l) => l === process.env.TEST_LEG) ?? LEGS.find((l) => l === process.env.DATABASE_DRIVER) ?? "native";
/** The database is reached over the network: suites about the local file do not apply. */
export const remote = leg === "remote-http" || leg === "remote-ws";
/** An embedded replica of sqld: reads from a local copy, writes at the primary. */
export const replica = leg === "replica";
/** The app's database lives in a sqld (remote or replica legs). */
export const onSqld = remote || replica;
/** The file driver of a file leg; remote URLs always use @libsql/client. */
export const driver = leg === "native" ? "native" : "libsql";

/** A test function whose test names get the leg; `test.each(…)`, `test.if(…)` and the like hand back one too. */
function named<F extends (...args: never[]) => unknown>(fn: F): F {
  return new Proxy(fn, {
    apply(target, self, args) {
      if (typeof args[0] === "string") return Reflect.apply(target, self, [`${args[0]} [${leg}]`, ...args.slice(1)]);
      const result = Reflect.apply(target, self, args);
      return typeof result === "function" ? named(result) : result;
    },
    get(target, property) {
      const value = Reflect.get(target, property);
      return typeof value === "function" ? named(value.bind(target)) : value;
    },
  });
}

export const test = named(bun.test);
export const it = test;
export { afterAll, afterEach, beforeAll, beforeEach, describe, expect, mock, setDefaultTimeout, spyOn } from "bun:test";
