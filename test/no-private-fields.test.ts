/**
 * No answer of any route ever carries a private column: password hashes, salaries, token
 * versions. TypeScript types do not stop a spread database row from reaching an answer, so
 * this walks every route the app registers (test/support/route-walk.ts: a real ADMIN token and
 * real data behind it) and reads every answer's text.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { users } from "../src/db/schema";
import { makeTestApp, type TestApp } from "./helpers";
import { prepareRouteWalk } from "./support/route-walk";

const PRIVATE = ["passwordHash", "password_hash", "salaryCents", "salary_cents", "tokenVersion", "token_version", "tokenHash", "token_hash"];
const privateFieldsIn = (text: string) => PRIVATE.filter((name) => text.includes(name));

let t: TestApp;
let routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;

beforeAll(async () => {
  t = await makeTestApp();
  routeWalk = await prepareRouteWalk(t);
}, 60_000);

afterAll(() => t?.close());

describe("no answer carries a private field", () => {
  test("the check finds each name in a spread users row", async () => {
    // What a handler returning `select *` would send: the check must catch it.
    const [row] = await t.db.select().from(users).where(eq(users.email, routeWalk.registered.email));
    expect(privateFieldsIn(JSON.stringify(row)).sort()).toEqual(["passwordHash", "salaryCents", "tokenVersion"]);
  });

  test("every route the app registers, with a real token and real data", async () => {
    const read: string[] = [];
    await routeWalk.walk(({ route, sample, text }) => {
      if (sample.holdsPrivateData) return;
      expect({ route, leaked: privateFieldsIn(text) }).toEqual({ route, leaked: [] });
      read.push(route);
    });
    expect(read.length).toBeGreaterThan(45);
  }, 60_000); // the walk takes a heap snapshot and a backup: seconds on a busy machine
});
