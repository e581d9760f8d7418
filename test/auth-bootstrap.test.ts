/**
 * ADMIN_EMAIL / ADMIN_PASSWORD (and `usersvc admin create`) through ensureAdmin: creates the
 * ADMIN once and leaves an existing ADMIN as it is on every later start; an account that holds
 * the address without being an ADMIN (a stranger who registered it) is promoted only with the
 * operator's password, everything it held ended, audited. And the JWT key kept in DATA_DIR
 * when JWT_SECRET is unset.
 */
import { afterAll, beforeAll, describe, expect, replica, test } from "./legs";
import { and, eq, notInArray } from "drizzle-orm";
import { auditLog, outbox, users } from "../src/db/schema";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureAdmin } from "../src/features/auth/bootstrap";
import { resolveJwtSecret } from "../src/security/kept-secrets";
import { createLogging } from "../src/logging/logger";
import { makeTestApp, TEST_SECRET, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { expectFailure, UNAUTHORIZED } from "./scenario";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const login = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });

test("creates the ADMIN on the first start and changes nothing on the second", async () => {
  const first = await ensureAdmin(t.database, { email: "Root@Example.com", password: "Adm1n!pass" }, Date.now);
  expect(first.created).toBe(true);
  const [before] = await t.db.select().from(users).where(eq(users.id, first.id));

  const second = await ensureAdmin(t.database, { email: "root@example.com", password: "Adm1n!pass" }, Date.now);
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

/** Sign-ins are audited too (test/audit-trail.test.ts): these tests look at the rest of an account's trail. */
const SIGN_INS = ["LOGIN", "LOGIN_FAILED", "LOGOUT"];

/** What a stranger who registered the address holds: their password, a token and the e-mailed verification link. */
async function strangerAt(email: string) {
  expect((await t.request("POST", "/api/auth/register", { body: validRegistration(email) })).status).toBe(201);
  const session = await login(email, "Passw0rd!");
  expect(session.status).toBe(200);
  const [link] = await t.db
    .select({ token: outbox.token })
    .from(outbox)
    .where(and(eq(outbox.recipient, email), eq(outbox.kind, "VERIFY_EMAIL")));
  expect(link.token).toBeString();
  return { id: session.body.data.user.id as number, token: session.body.data.token as string, link: link.token as string };
}

/** After a bootstrap on a stranger's address: only the operator's password opens it, and nothing the stranger held works. */
async function expectTakenBack(email: string, stranger: Awaited<ReturnType<typeof strangerAt>>, operatorPassword: string) {
  expectFailure(await login(email, "Passw0rd!"), 401, { message: "Invalid e-mail or password", errorCode: "INVALID_CREDENTIALS" });
  expectFailure(await t.request("GET", "/api/search/profile", { token: stranger.token }), 401, UNAUTHORIZED);
  expectFailure(await t.request("GET", "/api/users", { token: stranger.token }), 401, UNAUTHORIZED);
  const link = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: stranger.link } });
  expect([link.status, link.body.errorCode]).toEqual([400, "INVALID_TOKEN"]);
  const operator = await login(email, operatorPassword);
  expect(operator.status).toBe(200);
  expect(operator.body.data.user).toMatchObject({ id: stranger.id, email, roles: ["ADMIN", "USER"], active: true, emailVerified: true });
  const row = await t.db.select({ passwordHash: users.passwordHash }).from(users).where(eq(users.id, stranger.id));
  expect(row[0].passwordHash).toStartWith("$argon2id$");
  const audit = await t.db
    .select()
    .from(auditLog)
    .where(and(eq(auditLog.subjectId, String(stranger.id)), eq(auditLog.action, "USER_PROMOTED_TO_ADMIN")));
  expect(audit).toEqual([
    {
      id: expect.any(Number),
      action: "USER_PROMOTED_TO_ADMIN",
      actor: "system",
      subjectType: "User",
      subjectId: String(stranger.id),
      details: { email, via: "bootstrap" },
      createdAt: expect.any(Date),
    },
  ]);
  expect(JSON.stringify(audit)).not.toContain(operatorPassword);
  return operator.body.data.token as string;
}

describe("an account that already holds the address and is not an ADMIN is promoted only with the operator's password", () => {
  test("ADMIN_EMAIL / ADMIN_PASSWORD at start (main.ts's ensureAdmin): the stranger's password, token and links end; audited", async () => {
    const email = uniqueEmail("env-admin");
    const stranger = await strangerAt(email);
    // What `usersvc serve` runs with ADMIN_EMAIL and ADMIN_PASSWORD set (src/main.ts).
    expect(await ensureAdmin(t.database, { email, password: "Operat0r!pass" }, Date.now)).toEqual({ id: stranger.id, created: false });
    const operatorToken = await expectTakenBack(email, stranger, "Operat0r!pass");

    // A restart: the account is an ADMIN now, left as it is; the operator's token keeps working, nothing more is audited.
    const [before] = await t.db.select().from(users).where(eq(users.id, stranger.id));
    expect(await ensureAdmin(t.database, { email, password: "Operat0r!pass" }, Date.now)).toEqual({ id: stranger.id, created: false });
    expect((await t.db.select().from(users).where(eq(users.id, stranger.id)))[0]).toEqual(before);
    expect((await t.request("GET", "/api/users", { token: operatorToken })).status).toBe(200);
    expect(
      (
        await t.db
          .select()
          .from(auditLog)
          .where(and(eq(auditLog.subjectId, String(stranger.id)), notInArray(auditLog.action, SIGN_INS)))
      ).map((r) => r.action),
    ).toEqual(["USER_CREATED", "USER_PROMOTED_TO_ADMIN"]);
  });

  test("usersvc admin create --email on a pre-registered address (the command line, on this leg's database)", async () => {
    const email = uniqueEmail("cli-admin");
    const stranger = await strangerAt(email);
    const database = {
      DATABASE_URL: t.config.databaseUrl,
      DATABASE_DRIVER: t.config.databaseDriver,
      ...(t.config.databaseAuthToken ? { DATABASE_AUTH_TOKEN: t.config.databaseAuthToken } : {}),
      ...(t.config.databaseSyncUrl ? { DATABASE_SYNC_URL: t.config.databaseSyncUrl } : {}),
    };
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../src/main.ts"), "admin", "create", "--email", email.toUpperCase(), "--password", "Operat0r!cli"], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: "warn", DATA_DIR: t.dir, JWT_SECRET: TEST_SECRET, ...database },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    expect(stdout).toBe(`promoted admin ${email.toUpperCase()} (id ${stranger.id})\n`);
    // On an embedded replica another process's write arrives with the next pull (DATABASE_SYNC_INTERVAL).
    const stale = async () => (await t.request("GET", "/api/search/profile", { token: stranger.token })).status === 200;
    for (const started = Date.now(); replica && (await stale()) && Date.now() - started < 5000; ) await Bun.sleep(50);
    await expectTakenBack(email, stranger, "Operat0r!cli");
  }, 30_000);

  test("an account that is already an ADMIN keeps its password and tokens", async () => {
    const admin = await t.createUser({ password: "Own!pass1", roles: ["USER", "ADMIN"] });
    const session = await login(admin.email, "Own!pass1");
    const [before] = await t.db.select().from(users).where(eq(users.id, admin.id));
    expect(await ensureAdmin(t.database, { email: admin.email, password: "Other!pass1" }, Date.now)).toEqual({ id: admin.id, created: false });
    expect((await t.db.select().from(users).where(eq(users.id, admin.id)))[0]).toEqual(before);
    expect((await login(admin.email, "Own!pass1")).status).toBe(200);
    expect((await t.request("GET", "/api/users", { token: session.body.data.token })).status).toBe(200);
    expect(
      await t.db
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.subjectId, String(admin.id)), notInArray(auditLog.action, SIGN_INS))),
    ).toEqual([]);
  });
});

test("an existing account without a password gets the given one", async () => {
  const passwordless = await t.createUser();
  const result = await ensureAdmin(t.database, { email: passwordless.email, password: "Giv3n!pass" }, Date.now);
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
  const script = `import { resolveJwtSecret } from ${JSON.stringify(join(import.meta.dir, "../src/security/kept-secrets.ts"))};
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
