/**
 * No answer of any route ever carries a private column: password hashes, salaries, token
 * versions. TypeScript types do not stop a spread database row from reaching an answer, so
 * this walks every route the app registers (test/support/route-walk.ts: a real ADMIN token and
 * real data behind it) and reads every answer's text.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { mfaRecoveryCodes, mfaTotp, passkeys, users } from "../src/db/schema";
import { makeTestApp, type TestApp } from "./helpers";
import { prepareRouteWalk } from "./support/route-walk";

const PRIVATE = [
  "passwordHash",
  "password_hash",
  "salaryCents",
  "salary_cents",
  "tokenVersion",
  "token_version",
  "tokenHash",
  "token_hash",
  "secretHash",
  "secret_hash",
  // Second factors: the sealed TOTP secret, recovery-code hashes, a passkey's public key.
  "secretSealed",
  "secret_sealed",
  "codeHash",
  "code_hash",
  "publicKey",
  "public_key",
];
const privateFieldsIn = (text: string) => PRIVATE.filter((name) => text.includes(name));

let t: TestApp;
let routeWalk: Awaited<ReturnType<typeof prepareRouteWalk>>;

beforeAll(async () => {
  // PUBLIC_URL: the passkey routes answer for real.
  t = await makeTestApp({ PUBLIC_URL: "https://id.example.test" });
  routeWalk = await prepareRouteWalk(t);
}, 60_000);

afterAll(() => t?.close());

describe("no answer carries a private field", () => {
  test("the check finds each name in a spread users row", async () => {
    // What a handler returning `select *` would send: the check must catch it.
    const [row] = await t.db.select().from(users).where(eq(users.email, routeWalk.registered.email));
    expect(privateFieldsIn(JSON.stringify(row)).sort()).toEqual(["passwordHash", "salaryCents", "tokenVersion"]);
  });

  test("the check finds the second factors' secrets in spread rows: TOTP secret, recovery-code hash, passkey public key", async () => {
    const rows = [...(await t.db.select().from(mfaTotp)), ...(await t.db.select().from(mfaRecoveryCodes)), ...(await t.db.select().from(passkeys))];
    expect(privateFieldsIn(JSON.stringify(rows)).sort()).toEqual(["codeHash", "publicKey", "secretSealed"]);
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
