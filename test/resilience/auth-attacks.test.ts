/**
 * Attacks on the bearer token and on access rules, beyond the accounts suite's token checks:
 * forged headers (kid, jku, jwk), a huge token, foreign keys and algorithms, revoked tokens,
 * role escalation by a USER through every write endpoint, and reading what is another's.
 */
import { afterAll, beforeAll, describe, expect, test } from "../legs";
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT } from "jose";
import { sql } from "drizzle-orm";
import type { FileUploadResponse } from "../../src/features/files/model";
import { jsonOf, makeTestApp, TEST_SECRET, type TestApp } from "../helpers";
import { counts, problemWith, snapshot } from "./support";

let t: TestApp;
let admin: { id: number; email: string; token: string };
let user: { id: number; email: string; token: string };
let other: { id: number; email: string; token: string };
const PASSWORD = "Attack3rPass!";

const SECRET = new TextEncoder().encode(TEST_SECRET);
const WRONG = new TextEncoder().encode("not-the-secret-".padEnd(80, "z"));
const now = () => Math.floor(Date.now() / 1000);

function hs512(claims: Record<string, unknown>, key: Uint8Array, header: Record<string, unknown> = {}) {
  return new SignJWT(claims).setProtectedHeader({ alg: "HS512", typ: "JWT", ...header }).sign(key);
}

async function expect401(token: string, path = "/api/search/profile") {
  const res = await t.request("GET", path, { token });
  expect({ status: res.status, code: res.body?.errorCode, problem: problemWith(res.status, res.text) }).toEqual({ status: 401, code: "UNAUTHORIZED", problem: undefined });
  expect(res.headers.get("www-authenticate")).toBe("Bearer");
}

async function login(email: string, password: string) {
  const res = await t.request("POST", "/api/auth/login", { body: { email, password } });
  expect(res.status).toBe(200);
  return res.body.data.token as string;
}

beforeAll(async () => {
  t = await makeTestApp({}, { logs: { write() {} } });
  admin = await t.admin();
  user = await t.createUser({ name: "Mallory", password: PASSWORD });
  other = await t.createUser({ name: "Alice" });
});
afterAll(() => t.close());

describe("forged and foreign tokens: 401, whatever the header says", () => {
  test("kid pointing at a file, at SQL, or at nothing, signed with a wrong or empty key", async () => {
    for (const kid of ["../../../../dev/null", "' UNION SELECT 'key' --", "0", ""]) {
      await expect401(await hs512({ sub: user.email, exp: now() + 3600 }, WRONG, { kid }));
    }
    // An empty key (what /dev/null would give) is refused by jose itself; sign with one byte of zero.
    await expect401(await hs512({ sub: user.email, exp: now() + 3600 }, new Uint8Array(1), { kid: "/dev/null" }));
  });

  test("jku and an embedded jwk naming the attacker's own key", async () => {
    const { privateKey, publicKey } = await generateKeyPair("RS256");
    const jwk = await exportJWK(publicKey);
    for (const header of [{ jku: "http://127.0.0.1:9/keys.json", kid: "attacker" }, { jwk }, { jwk, jku: "http://127.0.0.1:9/k" }]) {
      const rs = await new SignJWT({ sub: admin.email, exp: now() + 3600 }).setProtectedHeader({ alg: "RS256", ...header }).sign(privateKey);
      await expect401(rs);
    }
    // The same headers on an HS512 token signed with a key the attacker chose, embedded as a symmetric JWK.
    const attackerKey = new TextEncoder().encode("attacker-key-".padEnd(80, "a"));
    const octJwk = { kty: "oct", k: Buffer.from(attackerKey).toString("base64url") };
    await expect401(await hs512({ sub: admin.email, exp: now() + 3600 }, attackerKey, { jwk: octJwk, kid: "attacker" }));
  });

  test("a huge token (100 KB): 401 at once, not a crash", async () => {
    const started = performance.now();
    await expect401(`${"a".repeat(50_000)}.${"b".repeat(50_000)}.c`);
    await expect401(await hs512({ sub: user.email, exp: now() + 3600, pad: "x".repeat(100_000) }, SECRET));
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test("exp a century away, signed with a wrong key", async () => {
    await expect401(await hs512({ sub: admin.email, iat: now(), exp: now() + 100 * 365 * 86400 }, WRONG));
  });

  test("alg none, HS256 with the right secret, and a signature stripped off", async () => {
    await expect401(new UnsecuredJWT({ sub: admin.email, exp: now() + 3600 }).encode());
    const hs256 = await new SignJWT({ sub: admin.email, exp: now() + 3600 }).setProtectedHeader({ alg: "HS256" }).sign(SECRET);
    await expect401(hs256);
    const valid = await hs512({ sub: admin.email, exp: now() + 3600 }, SECRET);
    const [head, payload] = valid.split(".");
    await expect401(`${head}.${payload}.`);
    const noneHeader = Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url");
    await expect401(`${noneHeader}.${payload}.`);
  });

  test("a token claiming roles, or another subject's e-mail case, does not change who the caller is", async () => {
    const claimsAdmin = await hs512({ sub: user.email, exp: now() + 3600, roles: ["ADMIN"], scope: "admin", ver: 0 }, SECRET);
    const res = await t.request("POST", "/api/users", { token: claimsAdmin, body: { name: "Escalated", email: "escalated@example.com" } });
    expect({ status: res.status, code: res.body.errorCode }).toEqual({ status: 403, code: "ACCESS_DENIED" });
    await expect401(await hs512({ sub: `${admin.email.toUpperCase()} `, exp: now() + 3600 }, SECRET));
  });

  test("a token from before a password change, and from before logout", async () => {
    const email = "rotating@example.com";
    await t.createUser({ email, password: PASSWORD });
    const before = await login(email, PASSWORD);
    const changed = await t.request("POST", "/api/auth/change-password", {
      token: before,
      body: { currentPassword: PASSWORD, newPassword: "Rotated9!Pass", confirmNewPassword: "Rotated9!Pass" },
    });
    expect(changed.status).toBe(200);
    await expect401(before);
    const afterChange = await login(email, "Rotated9!Pass");
    expect((await t.request("GET", "/api/search/profile", { token: afterChange })).status).toBe(200);
    expect((await t.request("POST", "/api/auth/logout", { token: afterChange })).status).toBe(200);
    await expect401(afterChange);
    // A refresh with a revoked token issues nothing.
    const refreshed = await t.request("POST", "/api/auth/refresh", { token: afterChange });
    expect(refreshed.status).toBe(401);
  });

  test("a deleted account's token does not open a new account registered later with the same e-mail", async () => {
    const email = "recycled@example.com";
    const gone = await t.createUser({ email, password: PASSWORD });
    const oldToken = await login(email, PASSWORD);
    expect((await t.request("DELETE", `/api/users/${gone.id}`, { token: admin.token })).status).toBe(204);
    await Bun.sleep(1100); // iat has one-second resolution
    const registered = await t.request("POST", "/api/auth/register", {
      body: { name: "New Owner", email, password: "Fresh9!Passw", confirmPassword: "Fresh9!Passw", age: 40, address: { city: "C", district: "D", detail: "E" }, skills: ["x"] },
    });
    expect(registered.status).toBe(201);
    await expect401(oldToken);
    expect((await t.request("GET", "/api/search/profile", { token: await login(email, "Fresh9!Passw") })).status).toBe(200);
  });
});

describe("a USER cannot escalate through any write endpoint", () => {
  const productBody = { name: "Stolen", code: "STOLEN-1", price: 1, stock: 1 };
  /** Every write a USER must be refused, with the status the access rules give. */
  const refused: [string, string, number, () => unknown][] = [
    ["POST", "/api/users", 403, () => ({ name: "New Admin", email: "new-admin@example.com", password: PASSWORD })],
    ["PUT", "/api/users/:other", 403, () => ({ name: "Renamed", email: other.email })],
    ["PUT", "/api/users/:self", 403, () => ({ name: "Me Admin", email: user.email, roles: ["ADMIN"] })],
    ["DELETE", "/api/users/:other", 403, () => undefined],
    ["DELETE", "/api/users/:self", 403, () => undefined],
    ["PATCH", "/api/users/:other", 403, () => ({ name: "Renamed" })],
    ["PUT", "/api/users/:self/roles", 403, () => ({ roles: ["USER", "ADMIN"] })],
    ["PUT", "/api/users/:other/roles", 403, () => ({ roles: ["USER"] })],
    ["PUT", "/api/users/:other/profile", 403, () => ({ bio: "owned" })],
    ["POST", "/api/departments", 403, () => ({ name: "Shadow IT" })],
    ["POST", "/api/products", 403, () => productBody],
    ["PUT", "/api/products/:product", 403, () => productBody],
    ["POST", "/api/users/deactivate-inactive?before=2999-01-01", 403, () => undefined],
    ["POST", "/actuator/loggers/http", 403, () => ({ configuredLevel: "TRACE" })],
    ["GET", "/actuator/heapdump", 403, () => undefined],
    ["GET", "/actuator/threaddump", 403, () => undefined],
    ["GET", "/actuator/prometheus", 403, () => undefined],
    ["GET", "/actuator/metrics", 403, () => undefined],
    ["GET", "/actuator/loggers", 403, () => undefined],
    ["GET", "/api/audit", 403, () => undefined],
    ["POST", "/api/orders", 403, () => ({ userId: 0, items: [{ productId: 1, quantity: 1 }] })],
  ];
  let productId = 0;

  beforeAll(async () => {
    const res = await t.request("POST", "/api/products", { token: admin.token, body: { name: "Real", code: "REAL-1", price: 3, stock: 10 } });
    productId = res.body.id;
  });

  const resolve = (path: string) => path.replace(":other", String(other.id)).replace(":self", String(user.id)).replace(":product", String(productId));

  test.each(refused)("%s %s → %d, nothing changed", async (method, path, status, body) => {
    const before = await snapshot(t.database);
    let sent = body();
    if (sent && typeof sent === "object" && "userId" in sent) sent = { ...sent, userId: other.id, items: [{ productId, quantity: 1 }] };
    const res = await t.request(method, resolve(path), { token: user.token, body: sent });
    expect({ status: res.status, code: res.body?.errorCode, problem: problemWith(res.status, res.text) }).toEqual({ status, code: "ACCESS_DENIED", problem: undefined });
    expect(await snapshot(t.database)).toEqual(before);
  });

  test("PATCH of one's own roles, active, version, id or tokenVersion changes none of them", async () => {
    const attempts: unknown[] = [
      { roles: ["ADMIN"], name: "Mallory A" },
      { active: false, name: "Mallory B" },
      { tokenVersion: 99, id: admin.id, name: "Mallory C" },
      { isAdmin: true, role: "ADMIN", name: "Mallory D" },
    ];
    for (const body of attempts) {
      const res = await t.request("PATCH", `/api/users/${user.id}`, { token: user.token, body });
      expect(res.status).toBe(200);
      expect(res.body.roles).toEqual(["USER"]);
      expect(res.body.active).toBe(true);
      expect(res.body.id).toBe(user.id);
    }
    // A client-chosen version is only a precondition: a wrong one is a conflict, a right one changes nothing else.
    const current = (await t.request("GET", `/api/users/${user.id}`, { token: user.token })).body.version;
    const stale = await t.request("PATCH", `/api/users/${user.id}`, { token: user.token, body: { version: current + 50, name: "Mallory E" } });
    expect({ status: stale.status, code: stale.body.errorCode }).toEqual({ status: 409, code: "OPTIMISTIC_LOCK_CONFLICT" });
    const raw = `{"__proto__":{"roles":["ADMIN"],"active":false},"constructor":{"prototype":{"roles":["ADMIN"]}},"name":"Mallory F"}`;
    const proto = await t.request("PATCH", `/api/users/${user.id}`, { token: user.token, raw, headers: { "content-type": "application/json" } });
    expect(proto.status).toBeLessThan(500);
    const me = await t.request("GET", `/api/users/${user.id}`, { token: user.token });
    expect({ roles: me.body.roles, active: me.body.active }).toEqual({ roles: ["USER"], active: true });
    // The token still works (nothing revoked it) and still is a USER's.
    expect((await t.request("GET", "/actuator/heapdump", { token: user.token })).status).toBe(403);
  });

  test("an ADMIN's e-mail in another case or with spaces cannot be taken by create, PATCH or registration", async () => {
    for (const email of [admin.email.toUpperCase(), ` ${admin.email}`, `${admin.email} `, admin.email.replace("example", "EXAMPLE")]) {
      const created = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Twin", email } });
      const patched = await t.request("PATCH", `/api/users/${user.id}`, { token: user.token, body: { email } });
      const registered = await t.request("POST", "/api/auth/register", {
        body: { name: "Twin", email, password: PASSWORD, confirmPassword: PASSWORD, age: 30, address: { city: "C", district: "D", detail: "E" }, skills: ["x"] },
      });
      expect({ email, statuses: [created.status, patched.status, registered.status].map((s) => (s === 409 || s === 400 ? "refused" : s)) }).toEqual({
        email,
        statuses: ["refused", "refused", "refused"],
      });
    }
  });

  test("registration with roles, active or id fields gives a plain, active USER", async () => {
    const res = await t.request("POST", "/api/auth/register", {
      body: {
        name: "Sneaky",
        email: "sneaky@example.com",
        password: PASSWORD,
        confirmPassword: PASSWORD,
        age: 30,
        address: { city: "C", district: "D", detail: "E" },
        skills: ["x"],
        roles: ["ADMIN"],
        active: false,
        id: 1,
        tokenVersion: 5,
        __proto__: { roles: ["ADMIN"] },
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.roles).toEqual(["USER"]);
    expect(res.body.data.active).toBe(true);
    expect(res.body.data.id).not.toBe(1);
  });

  test("paying another user's order is 404, and leaves it PENDING", async () => {
    const order = await t.request("POST", "/api/orders", { token: admin.token, body: { userId: other.id, items: [{ productId, quantity: 1 }] } });
    expect(order.status).toBe(201);
    const res = await t.request("POST", `/api/orders/${order.body.id}/pay`, { token: user.token, body: { method: "CARD", cardNumber: "4242424242424242" } });
    expect({ status: res.status, code: res.body.errorCode }).toEqual({ status: 404, code: "ORDER_NOT_FOUND" });
    expect((await t.request("GET", `/api/orders/${order.body.id}`, { token: admin.token })).body.status).toBe("PENDING");
  });
});

describe("reading what is another's", () => {
  let otherOrder = 0;
  let otherFile = "";

  beforeAll(async () => {
    const product = await t.request("POST", "/api/products", { token: admin.token, body: { name: "Readable", code: "READ-1", price: 2, stock: 5 } });
    const order = await t.request("POST", "/api/orders", { token: admin.token, body: { userId: other.id, items: [{ productId: product.body.id, quantity: 1 }] } });
    otherOrder = order.body.id;
    await t.request("PUT", `/api/users/${other.id}/profile`, { token: admin.token, body: { bio: "private", address: "Secret street 1" } });
    const form = new FormData();
    form.append("file", new File(["alice's secret"], "secret.txt", { type: "text/plain" }));
    const otherToken = await t.tokens.issue(other.email, 0);
    const upload = await t.app.handle(new Request("http://localhost/api/files/upload", { method: "POST", headers: { authorization: `Bearer ${otherToken}` }, body: form }));
    otherFile = (await jsonOf<FileUploadResponse>(upload)).fileName;
  });

  test("another's profile: 403; another's order: 404; another's orders listed: none", async () => {
    const profile = await t.request("GET", `/api/users/${other.id}/profile`, { token: user.token });
    expect({ status: profile.status, code: profile.body.errorCode }).toEqual({ status: 403, code: "ACCESS_DENIED" });
    expect(profile.text).not.toContain("Secret street");
    const order = await t.request("GET", `/api/orders/${otherOrder}`, { token: user.token });
    expect({ status: order.status, code: order.body.errorCode }).toEqual({ status: 404, code: "ORDER_NOT_FOUND" });
    const list = await t.request("GET", `/api/orders?userId=${other.id}`, { token: user.token });
    expect({ status: list.status, body: list.body, total: list.headers.get("x-total-count") }).toEqual({ status: 200, body: [], total: "0" });
  });

  test("users read through search carry no password hash, salary or token version", async () => {
    for (const path of [`/api/users/${other.id}`, "/api/users", "/api/search/users?name=Alice", "/api/search/by-skills?skills=x"]) {
      const res = await t.request("GET", path, { token: user.token });
      expect(res.status).toBe(200);
      expect(res.text).not.toMatch(/passwordHash|password_hash|salary|tokenVersion|token_version|\$argon2/);
    }
  });

  test("files are shared by design: any authenticated caller reads any file (service-interface: 'any authenticated caller'); anonymous: 401", async () => {
    // Reported to the lead rather than changed: the interface gives files no owner rule.
    const info = await t.request("GET", `/api/files/info/${otherFile}`, { token: user.token });
    expect(info.status).toBe(200);
    expect(info.body.uploadedBy).toBe(other.id);
    const download = await t.request("GET", `/api/files/download/${otherFile}`, { token: user.token });
    expect(download.status).toBe(200);
    for (const path of [`/api/files/info/${otherFile}`, `/api/files/download/${otherFile}`]) {
      expect((await t.request("GET", path)).status).toBe(401);
    }
  });

  test("no refused request above added a user, an ADMIN or a row anywhere", async () => {
    const [admins] = await t.database.all<{ n: number }>(sql`SELECT count(*) AS n FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE r.name = 'ADMIN'`);
    expect(Number(admins!.n)).toBe(1);
    expect((await counts(t.database, ["departments"])).departments).toBe(0);
  });
});
