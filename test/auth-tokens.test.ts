/**
 * Which bearer tokens the guard accepts: tokens minted here with jose (another JWT library)
 * and the same secret are; every other algorithm, a bad signature, a wrong or missing exp,
 * a deleted or inactive subject and a stale token version are 401 UNAUTHORIZED with
 * WWW-Authenticate: Bearer.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { SignJWT, generateKeyPair, jwtVerify } from "jose";
import { users } from "../src/db/schema";
import { makeTestApp, TEST_SECRET, type TestApp } from "./helpers";
import { expectFailure, scenarios, UNAUTHORIZED } from "./scenario";

const KEY = new TextEncoder().encode(TEST_SECRET);
const nowSeconds = () => Math.floor(Date.now() / 1000);

let t: TestApp;
let user: { id: number; email: string; token: string };
beforeAll(async () => {
  t = await makeTestApp();
  user = await t.createUser({ password: "Passw0rd!" });
});
afterAll(() => t.close());

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** A token signed by jose, HS512 and the service's secret unless told otherwise. */
function mint(
  claims: Record<string, unknown>,
  { alg = "HS512", key = KEY, iat = true, exp = 3600 }: { alg?: string; key?: Uint8Array; iat?: boolean | number; exp?: number | null } = {},
) {
  let jwt = new SignJWT(claims).setProtectedHeader({ alg, typ: "JWT" });
  if (iat !== false) jwt = jwt.setIssuedAt(iat === true ? undefined : iat);
  if (exp !== null) jwt = jwt.setExpirationTime(nowSeconds() + exp);
  return jwt.sign(key);
}

const profile = (token: string) => t.request("GET", "/api/search/profile", { token });

describe("accepted", () => {
  test("a jose-minted HS512 token with sub, iat, exp and the current version", async () => {
    const res = await profile(await mint({ sub: user.email, ver: 0 }));
    expect(res.status).toBe(200);
    expect(res.body.email).toBe(user.email);
  });

  test("a jose-minted HS512 token with only sub and exp (version 0 assumed)", async () => {
    expect((await profile(await mint({ sub: user.email }, { iat: false }))).status).toBe(200);
  });

  test("our login token verifies with jose: HS512, sub = e-mail, exp = iat + 18000", async () => {
    const res = await t.request("POST", "/api/auth/login", { body: { email: user.email, password: "Passw0rd!" } });
    const { payload, protectedHeader } = await jwtVerify(res.body.data.token, KEY, { algorithms: ["HS512"] });
    expect(protectedHeader.alg).toBe("HS512");
    expect(payload.sub).toBe(user.email);
    expect(payload.exp! - payload.iat!).toBe(18000);
    expect(payload.ver).toBe(0);
  });
});

describe("refused with 401", () => {
  const cases: [string, () => Promise<string>][] = [
    ["HS256 with the right secret", () => mint({ sub: user.email }, { alg: "HS256" })],
    ["HS384 with the right secret", () => mint({ sub: user.email }, { alg: "HS384" })],
    ["alg none", async () => `${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: user.email, iat: nowSeconds(), exp: nowSeconds() + 3600 })}.`],
    [
      "RS256 signed by a real RSA key",
      async () => {
        const { privateKey } = await generateKeyPair("RS256");
        return new SignJWT({ sub: user.email }).setProtectedHeader({ alg: "RS256" }).setIssuedAt().setExpirationTime("1h").sign(privateKey);
      },
    ],
    [
      "RS256 header over an HMAC signature (algorithm confusion)",
      async () => {
        const good = await mint({ sub: user.email });
        const [, payload, signature] = good.split(".");
        return `${b64({ alg: "RS256", typ: "JWT" })}.${payload}.${signature}`;
      },
    ],
    ["a different secret", () => mint({ sub: user.email }, { key: new TextEncoder().encode("another-secret-".padEnd(80, "y")) })],
    [
      "a bad signature",
      async () => {
        const good = await mint({ sub: user.email });
        const last = good.at(-2) === "A" ? "B" : "A";
        return good.slice(0, -2) + last + good.at(-1);
      },
    ],
    [
      "a tampered payload (subject swapped, signature kept)",
      async () => {
        const other = await t.admin();
        const [header, , signature] = (await mint({ sub: user.email })).split(".");
        return `${header}.${b64({ sub: other.email, iat: nowSeconds(), exp: nowSeconds() + 3600 })}.${signature}`;
      },
    ],
    ["an expired token", () => mint({ sub: user.email }, { exp: -10 })],
    ["no exp", () => mint({ sub: user.email }, { exp: null })],
    ["exp that is not a number", () => mint({ sub: user.email, exp: "tomorrow" }, { exp: null })],
    ["no sub", () => mint({ ver: 0 })],
    ["an unknown subject", () => mint({ sub: "nobody@example.com" })],
    ["a stale version", () => mint({ sub: user.email, ver: 7 })],
    ["garbage", async () => "not.a.token"],
  ];

  scenarios(cases.map(([name, token]) => ({ name, send: async () => profile(await token()), status: 401, failure: UNAUTHORIZED })));

  test.each([
    ["no Authorization header", undefined],
    ["a Basic scheme", "Basic dXNlcjpwYXNz"],
    ["Bearer without a token", "Bearer"],
  ])("%s", async (_, header) => {
    expectFailure(await t.request("GET", "/api/search/profile", { headers: header ? { authorization: header } : {} }), 401, UNAUTHORIZED);
  });

  test("a deleted subject", async () => {
    const doomed = await t.createUser();
    expect((await profile(doomed.token)).status).toBe(200);
    await t.db.delete(users).where(eq(users.id, doomed.id));
    expectFailure(await profile(doomed.token), 401, UNAUTHORIZED);
  });

  test("an inactive subject", async () => {
    const dormant = await t.createUser();
    // Raw write: inactive alone, which no route makes (POST /api/users/{id}/deactivate revokes the
    // tokens too, a case of its own in users-activation.test.ts).
    await t.db.update(users).set({ active: false }).where(eq(users.id, dormant.id));
    expectFailure(await profile(dormant.token), 401, UNAUTHORIZED);
  });

  test("a token of an older version (after logout)", async () => {
    const s = await t.createUser();
    expect((await t.request("POST", "/api/auth/logout", { token: s.token })).status).toBe(200);
    expectFailure(await profile(s.token), 401, UNAUTHORIZED);
    expectFailure(await profile(await mint({ sub: s.email, ver: 0 })), 401, UNAUTHORIZED);
    expect((await profile(await mint({ sub: s.email, ver: 1 }))).status).toBe(200);
  });
});

describe("a token is bound to the account it was issued to, not to its e-mail", () => {
  const signIn = async (email: string, password: string) => {
    const res = await t.request("POST", "/api/auth/login", { body: { email, password } });
    expect(res.status).toBe(200);
    return res.body.data as { token: string; user: { id: number } };
  };
  const moveEmail = async (token: string, id: number, email: string, currentPassword: string) => {
    const res = await t.request("PATCH", `/api/users/${id}`, { token, body: { email, currentPassword } });
    expect(res.status).toBe(200);
    return res.body as { updatedAt: string; version: number };
  };

  test("Mallory's token for newaddr@ opens neither her moved account nor the victim who takes newaddr@ (ours, and jose-minted ones)", async () => {
    const newaddr = `newaddr-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const mallory = await t.createUser({ email: newaddr, password: "Mall0ry!pw" });
    const victim = await t.createUser({ password: "Vict1m!pw" });
    const malloryToken = (await signIn(newaddr, "Mall0ry!pw")).token;
    // A token as the service issued them before it named the account (sub, ver, iat, exp), and one of another library (sub, iat, exp).
    const legacy = await mint({ sub: newaddr, ver: 0 });
    const bare = await mint({ sub: newaddr });

    await moveEmail(malloryToken, mallory.id, `gone-${newaddr}`, "Mall0ry!pw");
    const victimToken = (await signIn(victim.email, "Vict1m!pw")).token;
    const changed = await moveEmail(victimToken, victim.id, newaddr, "Vict1m!pw");
    // The victim's account now carries the token version Mallory's old tokens do, had it not been bumped: make it so.
    await t.db.update(users).set({ tokenVersion: 0 }).where(eq(users.id, victim.id));

    for (const token of [malloryToken, legacy, bare]) {
      expectFailure(await profile(token), 401, UNAUTHORIZED);
      expectFailure(await t.request("PATCH", `/api/users/${victim.id}`, { token, body: { name: "Mallory Was Here" } }), 401, UNAUTHORIZED);
      expectFailure(await t.request("GET", `/api/users/${victim.id}`, { token }), 401, UNAUTHORIZED);
    }
    expect((await t.db.select({ name: users.name }).from(users).where(eq(users.id, victim.id)))[0].name).toBe("Test User");
    // A token minted with the secret after the change (iat in a later second) is the victim's own, as any standard JWT's.
    const after = await mint({ sub: newaddr }, { iat: Math.floor(Date.parse(changed.updatedAt) / 1000) + 1 });
    expect((await profile(after)).body.id).toBe(victim.id);
    // The victim signs in again with the new address; the answer's token carries the account's id.
    const fresh = await signIn(newaddr, "Vict1m!pw");
    expect((await jwtVerify(fresh.token, KEY)).payload.uid).toBe(victim.id);
    expect((await profile(fresh.token)).body.id).toBe(victim.id);
  });

  test("a token naming another account's id is refused even when its e-mail and version match", async () => {
    const other = await t.createUser();
    expectFailure(await profile(await mint({ sub: user.email, ver: 0, uid: other.id })), 401, UNAUTHORIZED);
    expect((await profile(await mint({ sub: user.email, ver: 0, uid: user.id }))).status).toBe(200);
  });
});
