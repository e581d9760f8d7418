/**
 * ADMIN_EMAIL / ADMIN_PASSWORD (and `usersvc admin create`) through ensureAdmin: creates the
 * ADMIN once, is idempotent on every later start, and promotes an existing account without
 * touching its password or revoking its tokens. And the JWT key kept in DATA_DIR when
 * JWT_SECRET is unset.
 */
import { afterAll, beforeAll, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { auditLog, users } from "../src/db/schema";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { resolveJwtSecret } from "../src/features/auth/secret";
import { createLogging } from "../src/logging/logger";
import { makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const login = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });

test("creates the ADMIN on the first start and changes nothing on the second", async () => {
  const first = await ensureAdmin(t.database, { email: "Root@Example.com", password: "Adm1n!pass" });
  expect(first.created).toBe(true);
  const [before] = await t.db.select().from(users).where(eq(users.id, first.id));

  const second = await ensureAdmin(t.database, { email: "root@example.com", password: "Adm1n!pass" });
  expect(second).toEqual({ id: first.id, created: false });
  const [after] = await t.db.select().from(users).where(eq(users.id, first.id));
  expect(after.passwordHash).toBe(before.passwordHash);
  expect(after.tokenVersion).toBe(before.tokenVersion);
  expect((await t.db.select().from(users).where(eq(users.email, "root@example.com"))).length).toBe(1);
  expect(
    (
      await t.db
        .select()
        .from(auditLog)
        .where(eq(auditLog.subjectId, String(first.id)))
    ).length,
  ).toBe(1);

  const res = await login("root@example.com", "Adm1n!pass");
  expect(res.status).toBe(200);
  expect(res.body.data.user.roles).toEqual(["ADMIN", "USER"]);
  // The ADMIN can do what only an ADMIN may.
  expect((await t.request("POST", "/api/users", { token: res.body.data.token, body: { name: "Made By Root", email: "made@example.com" } })).status).toBe(201);
});

test("promotes and re-activates an existing account, keeping its password and tokens", async () => {
  const plain = await t.createUser({ password: "Us3r!pass" });
  // Raw write: inactive with its tokens intact, which no route makes (POST /api/users/{id}/deactivate
  // revokes them too), and this checks that re-activation keeps them.
  await t.db.update(users).set({ active: false }).where(eq(users.id, plain.id));
  const result = await ensureAdmin(t.database, { email: plain.email, password: "Other!pass1" });
  expect(result).toEqual({ id: plain.id, created: false });
  const res = await login(plain.email, "Us3r!pass");
  expect(res.status).toBe(200);
  expect(res.body.data.user.roles).toEqual(["ADMIN", "USER"]);
  expect((await t.request("GET", "/api/search/profile", { token: plain.token })).status).toBe(200);
});

test("an existing account without a password gets the given one", async () => {
  const passwordless = await t.createUser();
  const result = await ensureAdmin(t.database, { email: passwordless.email, password: "Giv3n!pass" });
  expect(result).toEqual({ id: passwordless.id, created: false });
  expect((await login(passwordless.email, "Giv3n!pass")).status).toBe(200);
});

test("without JWT_SECRET a key is generated once (0600) and reused; a short kept key is refused", () => {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-secret-"));
  try {
    const logger = createLogging("silent", "json").root;
    const first = resolveJwtSecret(undefined, dir, logger);
    expect(Buffer.byteLength(first)).toBeGreaterThanOrEqual(64);
    expect(statSync(join(dir, "jwt.secret")).mode & 0o777).toBe(0o600);
    expect(resolveJwtSecret(undefined, dir, logger)).toBe(first);
    expect(resolveJwtSecret("configured-".padEnd(64, "k"), dir, logger)).toBe("configured-".padEnd(64, "k"));
    chmodSync(join(dir, "jwt.secret"), 0o644);
    expect(resolveJwtSecret(undefined, dir, logger)).toBe(first);
    expect(statSync(join(dir, "jwt.secret")).mode & 0o777).toBe(0o600);
    writeFileSync(join(dir, "jwt.secret"), "short\n");
    expect(() => resolveJwtSecret(undefined, dir, logger)).toThrow("fewer than 64 bytes");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("processes generating the key at the same moment all end up with the one kept key", async () => {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-secret-race-"));
  const script = `import { resolveJwtSecret } from ${JSON.stringify(join(import.meta.dir, "../src/features/auth/secret.ts"))};
    import { createLogging } from ${JSON.stringify(join(import.meta.dir, "../src/logging/logger.ts"))};
    process.stdout.write(resolveJwtSecret(undefined, ${JSON.stringify(dir)}, createLogging("silent", "json").root));`;
  try {
    const runs = Array.from({ length: 6 }, () => Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" }));
    const keys = await Promise.all(runs.map((p) => new Response(p.stdout).text()));
    expect(await Promise.all(runs.map((p) => p.exited))).toEqual([0, 0, 0, 0, 0, 0]);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toBe(readFileSync(join(dir, "jwt.secret"), "utf8").trim());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
