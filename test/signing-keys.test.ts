/**
 * Signing keys (issue 26 item 4): TOKEN_SIGNING=EdDSA|ES256 signs with keys kept in the database
 * (private halves sealed), names the kid, and publishes the public keys at /.well-known/jwks.json;
 * a new key is published at least 10 minutes before it signs, an old one stays until its tokens
 * expire, one instance creates or rotates keys, `keys rotate --revoke` refuses a key's tokens at
 * once; after a switch from HS512 only HS512 tokens issued before it count. Verified by jose's
 * createRemoteJWKSet against the JWKS served on a real port.
 */
import { afterAll, describe, expect, remote, test } from "./legs";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/db/open";
import { eq, ne } from "drizzle-orm";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, generateKeyPair, jwtVerify, SignJWT } from "jose";
import { signingKeys } from "../src/db/schema";
import { configuredTokens } from "../src/security/bearer-tokens";
import { createDataCipher } from "../src/security/data-encryption";
import { makeTestApp, TEST_SECRET, type TestApp } from "./helpers";
import { startServer } from "./server-process";
import { migrateToBefore } from "./support/earlier-schema";

const PASSWORD = "Passw0rd!";
const MINUTE = 60_000;
const DAY = 86_400_000;
/** Apps on one database share its DATA_ENCRYPTION_KEY, as instances of one deployment do. */
const DATA_KEY = Buffer.alloc(32, 7).toString("base64");

let clock = Date.now();
const apps: TestApp[] = [];
afterAll(async () => {
  // Those sharing a database first: the first app's close stops a remote leg's server.
  for (const app of apps.reverse()) await app.close();
});

/** An app on the moved clock; `shared`: on that app's database. */
async function appOn(env: Record<string, string>, shared?: TestApp) {
  const database = shared ? { DATABASE_URL: shared.config.databaseUrl, ...(shared.config.databaseAuthToken ? { DATABASE_AUTH_TOKEN: shared.config.databaseAuthToken } : {}) } : {};
  const app = await makeTestApp({ DATA_ENCRYPTION_KEY: DATA_KEY, ...env, ...database }, { now: () => clock });
  apps.push(app);
  return app;
}

async function login(app: TestApp, email: string) {
  const res = await app.request("POST", "/api/auth/login", { body: { email, password: PASSWORD } });
  expect(res.status).toBe(200);
  return res.body.data.token as string;
}

const statusOf = async (app: TestApp, token: string) => (await app.request("GET", "/api/search/profile", { token })).status;
const kidOf = (token: string) => decodeProtectedHeader(token).kid as string;
const jwksOf = async (app: TestApp) => (await app.request<{ keys: Record<string, string>[] }>("GET", "/.well-known/jwks.json")).body.keys.map((k) => k.kid);
/** What `usersvc keys rotate [--revoke KID]` does: a keyring of its own on the app's database. */
const rotate = (app: TestApp, revoke?: string) => configuredTokens(app.config, TEST_SECRET, app.database, app.cipher, () => clock).keyring.rotate(revoke);
const hs512 = (claims: Record<string, unknown>, iat: number, exp: number) =>
  new SignJWT(claims).setProtectedHeader({ alg: "HS512", typ: "JWT" }).setIssuedAt(iat).setExpirationTime(exp).sign(new TextEncoder().encode(TEST_SECRET));

describe("EdDSA tokens", () => {
  test("name their kid, iss and aud; the JWKS serves the public key (open, cached 5 minutes) and the token verifies with it", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA", TOKEN_AUDIENCE: "api.example.com", PUBLIC_URL: "https://id.example.com" });
    const user = await app.createUser({ password: PASSWORD });
    const token = await login(app, user.email);
    const header = decodeProtectedHeader(token);
    expect(header).toEqual({ alg: "EdDSA", typ: "JWT", kid: expect.any(String) });
    expect(decodeJwt(token)).toMatchObject({ sub: user.email, uid: user.id, iss: "https://id.example.com", aud: "api.example.com" });
    const res = await app.request<{ keys: Record<string, string>[] }>("GET", "/.well-known/jwks.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    expect(res.body.keys).toEqual([{ kty: "OKP", crv: "Ed25519", x: expect.any(String), kid: header.kid as string, alg: "EdDSA", use: "sig" }]);
    expect(await statusOf(app, token)).toBe(200);
  });

  test("a token whose kid is unknown, or signed by another key under a known kid, or without our aud, is refused", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA", TOKEN_AUDIENCE: "api.example.com" });
    const user = await app.createUser({ password: PASSWORD });
    const known = kidOf(await login(app, user.email));
    const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    const forged = (kid: string, audience = "api.example.com") =>
      new SignJWT({ sub: user.email, ver: 0, uid: user.id })
        .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid })
        .setIssuer("usersvc")
        .setAudience(audience)
        .setIssuedAt(Math.floor(clock / 1000))
        .setExpirationTime("1h")
        .sign(privateKey);
    expect(await statusOf(app, await forged("no-such-kid"))).toBe(401);
    expect(await statusOf(app, await forged(known))).toBe(401);
    const [ours] = await app.db.select().from(signingKeys).where(eq(signingKeys.kid, known));
    const key = JSON.parse(app.cipher.open(ours.privateJwk!).toString());
    const { importJWK } = await import("jose");
    const signed = await new SignJWT({ sub: user.email, ver: 0, uid: user.id })
      .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid: known })
      .setIssuer("usersvc")
      .setIssuedAt(Math.floor(clock / 1000))
      .setExpirationTime("1h");
    expect(await statusOf(app, await signed.setAudience("elsewhere").sign(await importJWK(key, "EdDSA")))).toBe(401);
    expect(await statusOf(app, await signed.setAudience("api.example.com").sign(await importJWK(key, "EdDSA")))).toBe(200);
  });

  test.if(!remote)("the private key's bytes never appear in the database file", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA" });
    const user = await app.createUser({ password: PASSWORD });
    await login(app, user.email);
    const [row] = await app.db.select().from(signingKeys).where(ne(signingKeys.kid, "HS512"));
    const { d } = JSON.parse(app.cipher.open(row.privateJwk!).toString()) as { d: string };
    const path = app.config.databaseUrl.slice("file:".length);
    const bytes = Buffer.concat([readFileSync(path), ...[`${path}-wal`].flatMap((f) => (Bun.file(f).size ? [readFileSync(f)] : []))]);
    expect(bytes.includes(Buffer.from(row.kid))).toBe(true);
    expect(bytes.includes(Buffer.from(d, "base64url"))).toBe(false);
    expect(bytes.includes(Buffer.from(d))).toBe(false);
  });
});

describe("switching HS512 → EdDSA", () => {
  test("an HS512 token minted with JWT_SECRET after the switch is refused; one issued before it works for ACCESS_TOKEN_TTL after it", async () => {
    clock = Date.now();
    const before = await appOn({});
    const user = await before.createUser({ password: PASSWORD });
    const issuedBefore = await login(before, user.email);
    const longLived = await hs512({ sub: user.email, ver: 0, uid: user.id }, Math.floor(clock / 1000), Math.floor(clock / 1000) + 365 * 86_400);
    clock += 5_000;
    const after = await appOn({ TOKEN_SIGNING: "EdDSA" }, before);
    expect((await after.request("GET", "/.well-known/jwks.json")).status).toBe(200);
    clock += 5_000;
    const mintedAfter = await hs512({ sub: user.email, ver: 0, uid: user.id }, Math.floor(clock / 1000), Math.floor(clock / 1000) + 3600);
    expect(await statusOf(after, issuedBefore)).toBe(200);
    expect(await statusOf(after, longLived)).toBe(200);
    expect(await statusOf(after, mintedAfter)).toBe(401);
    const [switched] = await after.db.select().from(signingKeys).where(eq(signingKeys.kid, "HS512"));
    expect(switched.createdAt.getTime()).toBe(clock - 5_000);
    // The token lifetime after the switch: the long-lived one goes too.
    clock += 18_000 * 1000;
    expect(await statusOf(after, longLived)).toBe(401);
    expect(kidOf(await login(after, user.email))).not.toBe("HS512");
  });
});

describe("rotation", () => {
  test("`keys rotate --revoke KID` refuses that key's tokens at once, on every instance; the sessions refresh under the new key", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA" });
    const other = await appOn({ TOKEN_SIGNING: "EdDSA" }, app);
    const user = await app.createUser({ password: PASSWORD });
    const res = await app.request("POST", "/api/auth/login", { body: { email: user.email, password: PASSWORD } });
    const { token, refreshToken } = res.body.data;
    expect([await statusOf(app, token), await statusOf(other, token)]).toEqual([200, 200]);
    const rotated = await rotate(app, kidOf(token));
    expect(rotated).toMatchObject({ revoked: kidOf(token), signsFrom: clock });
    expect([await statusOf(app, token), await statusOf(other, token)]).toEqual([401, 401]);
    clock += MINUTE;
    expect(await jwksOf(app)).not.toContain(kidOf(token));
    const refreshed = await other.request("POST", "/api/auth/refresh", { body: { refreshToken } });
    expect(refreshed.status).toBe(200);
    expect(kidOf(refreshed.body.data.token)).toBe(rotated.kid);
    expect(await statusOf(app, refreshed.body.data.token)).toBe(200);
    await expect(rotate(app, "no-such-kid")).rejects.toThrow("no signing key no-such-kid");
  });

  test.if(!remote)(
    "the real command against a running server: `usersvc keys rotate --revoke KID` and the server refuses that key's tokens at once",
    async () => {
      const server = await startServer({ TOKEN_SIGNING: "EdDSA", DATA_ENCRYPTION_KEY: DATA_KEY });
      try {
        const profile = () => fetch(`${server.url}/api/search/profile`, { headers: { authorization: `Bearer ${server.token}` } }).then((r) => r.status);
        expect(await profile()).toBe(200);
        const kid = kidOf(server.token);
        const env = { ...process.env, DATA_DIR: server.dataDir, JWT_SECRET: TEST_SECRET, TOKEN_SIGNING: "EdDSA", DATA_ENCRYPTION_KEY: DATA_KEY, LOG_LEVEL: "warn" };
        const command = Bun.spawnSync([process.execPath, join(import.meta.dir, "../src/main.ts"), "keys", "rotate", "--revoke", kid], { cwd: server.dataDir, env });
        expect(command.stderr.toString()).toBe("");
        expect(command.stdout.toString()).toMatch(new RegExp(`^revoked ${kid}; key [\\w-]+ signs from \\d{4}-\\d\\d-\\d\\dT`));
        expect(command.exitCode).toBe(0);
        expect(await profile()).toBe(401);
        const unknown = Bun.spawnSync([process.execPath, join(import.meta.dir, "../src/main.ts"), "keys", "rotate", "--revoke", "no-such-kid"], { cwd: server.dataDir, env });
        expect([unknown.exitCode, unknown.stderr.toString()]).toEqual([2, "usersvc: no signing key no-such-kid (see usersvc --help)\n"]);
      } finally {
        await server.stop();
      }
    },
    60_000,
  );

  test("a new key is in the JWKS at least 10 minutes before it signs, scheduled or by `keys rotate`; old tokens keep working", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA", TOKEN_KEY_ROTATION_DAYS: "1" });
    const user = await app.createUser({ password: PASSWORD });
    const first = await login(app, user.email);
    // Scheduled: a day later less ten minutes, the next key is published; it signs a day after the first.
    clock += DAY - 10 * MINUTE;
    const stillFirst = await login(app, user.email);
    expect(kidOf(stillFirst)).toBe(kidOf(first));
    const published = await jwksOf(app);
    expect(published).toHaveLength(2);
    const next = published.find((kid) => kid !== kidOf(first))!;
    clock += 10 * MINUTE - 1_000;
    expect(kidOf(await login(app, user.email))).toBe(kidOf(first));
    clock += 1_000;
    const second = await login(app, user.email);
    expect(kidOf(second)).toBe(next);
    expect([await statusOf(app, stillFirst), await statusOf(app, second)]).toEqual([200, 200]);
    // By the command: the key it publishes signs 10 minutes later, and every instance reads it within a minute.
    const rotated = await rotate(app);
    expect(rotated.signsFrom).toBe(clock + 10 * MINUTE);
    clock += MINUTE;
    expect(await jwksOf(app)).toContain(rotated.kid);
    expect(kidOf(await login(app, user.email))).toBe(next);
    clock += 9 * MINUTE;
    expect(kidOf(await login(app, user.email))).toBe(rotated.kid);
    expect(await statusOf(app, second)).toBe(200);
    // A key's tokens have all expired ACCESS_TOKEN_TTL after it stopped signing (and a margin): then it leaves the set.
    clock += 18_000 * 1000 + 3 * MINUTE - 10 * MINUTE;
    expect(await jwksOf(app)).toEqual([next, rotated.kid]);
    clock += 10 * MINUTE;
    expect(await jwksOf(app)).toEqual([rotated.kid]);
    expect(await app.db.$count(signingKeys)).toBe(2);
  });

  test("three instances starting together on one database create one key", async () => {
    clock = Date.now();
    const first = await appOn({ TOKEN_SIGNING: "ES256" });
    const [second, third] = await Promise.all([appOn({ TOKEN_SIGNING: "ES256" }, first), appOn({ TOKEN_SIGNING: "ES256" }, first)]);
    const user = await first.createUser({ password: PASSWORD });
    const tokens = await Promise.all([first, second, third].map((app) => login(app, user.email)));
    expect(new Set(tokens.map(kidOf)).size).toBe(1);
    expect(await first.db.$count(signingKeys, eq(signingKeys.alg, "ES256"))).toBe(1);
    for (const token of tokens) expect(await statusOf(third, token)).toBe(200);
  });
});

describe("an existing data folder", () => {
  test.if(!remote)("upgrades in place: the tokens an earlier release issued (session and sid-less) keep working, under HS512 and after a switch to EdDSA", async () => {
    clock = Date.now();
    const dir = mkdtempSync(join(tmpdir(), "usersvc-upgrade-"));
    const url = `file:${join(dir, "old.db")}`;
    const old = await openDatabase({ url });
    const iat = Math.floor(clock / 1000) - 60;
    try {
      // The schema as the release before signing keys left it, with a user signed in on it.
      await migrateToBefore(old, "`signing_keys`", [
        `INSERT INTO users (name, email, created_at, updated_at) VALUES ('Old Timer', 'old@example.com', ${(iat - 60) * 1000}, 0)`,
        `INSERT INTO sessions (id, user_id, token_version, created_at, last_seen_at, expires_at, address, amr) VALUES ('old-session', 1, 0, ${iat * 1000}, ${iat * 1000}, ${clock + DAY}, '127.0.0.1', 'pwd')`,
      ]);
    } finally {
      old.close();
    }
    // As that release signed them: HS512, no kid, no iss.
    const sessionToken = await hs512({ sub: "old@example.com", ver: 0, uid: 1, sid: "old-session" }, iat, iat + 18_000);
    const sidless = await hs512({ sub: "old@example.com", ver: 0, uid: 1 }, iat, iat + 18_000);
    const upgraded = await makeTestApp({ DATABASE_URL: url }, { now: () => clock });
    apps.push(upgraded);
    expect([await statusOf(upgraded, sessionToken), await statusOf(upgraded, sidless)]).toEqual([200, 200]);
    const switched = await appOn({ TOKEN_SIGNING: "EdDSA" }, upgraded);
    expect([await statusOf(switched, sessionToken), await statusOf(switched, sidless)]).toEqual([200, 200]);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("`keys rewrap`", () => {
  test("seals the private keys under a new DATA_ENCRYPTION_KEY: an instance holding only the new key signs, and earlier tokens still verify", async () => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: "EdDSA" });
    const user = await app.createUser({ password: PASSWORD });
    const before = await login(app, user.email);
    const NEW_KEY = Buffer.alloc(32, 9).toString("base64");
    // What `usersvc keys rewrap` runs with DATA_ENCRYPTION_KEY=new and DATA_ENCRYPTION_KEY_PREVIOUS=old.
    const cipher = createDataCipher(Buffer.from(NEW_KEY, "base64"), [Buffer.from(DATA_KEY, "base64")]);
    const keyring = configuredTokens(app.config, TEST_SECRET, app.database, cipher, () => clock).keyring;
    expect(await keyring.rewrap()).toBe(1);
    expect(await keyring.rewrap()).toBe(0);
    const renewed = await appOn({ TOKEN_SIGNING: "EdDSA", DATA_ENCRYPTION_KEY: NEW_KEY }, app);
    expect(await statusOf(renewed, before)).toBe(200);
    const after = await login(renewed, user.email);
    expect(kidOf(after)).toBe(kidOf(before));
    expect(await statusOf(app, after)).toBe(200);
  });
});

describe("a real verifier: jose's createRemoteJWKSet against the served JWKS", () => {
  test.each(["EdDSA", "ES256"])("verifies a %s token; after a rotation the previous key's token still verifies and a new token names the new kid", async (alg) => {
    clock = Date.now();
    const app = await appOn({ TOKEN_SIGNING: alg });
    const server = app.app.listen({ port: 0, hostname: "127.0.0.1" });
    try {
      const jwks = createRemoteJWKSet(new URL(`http://127.0.0.1:${server.server!.port}/.well-known/jwks.json`), {
        // The new key was published 10 minutes before it signed; on this moved clock that was a moment ago.
        cooldownDuration: 0,
      });
      const verify = (token: string) => jwtVerify(token, jwks, { issuer: "usersvc", currentDate: new Date(clock) });
      const user = await app.createUser({ password: PASSWORD });
      const before = await login(app, user.email);
      expect((await verify(before)).protectedHeader).toMatchObject({ alg, kid: kidOf(before) });
      const rotated = await rotate(app);
      clock += 10 * MINUTE;
      const after = await login(app, user.email);
      expect(kidOf(after)).toBe(rotated.kid);
      expect((await verify(after)).payload.sub).toBe(user.email);
      expect((await verify(before)).payload.sub).toBe(user.email);
    } finally {
      await server.stop();
    }
  });
});
