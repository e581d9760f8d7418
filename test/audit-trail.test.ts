/**
 * The audit trail of security-relevant actions, each read back through GET /api/audit as an
 * ADMIN: sign-ins (success and failure, never the password), sign-outs, password change and
 * reset, e-mail change, user deletion, role change, log-level change, heap dump, backup download and restore.
 */
import { afterAll, beforeAll, describe, expect, remote, test } from "./legs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { issueToken } from "../src/store/account-tokens";
import type { AuditEntry } from "../src/features/audit/model";
import { cli } from "./backup-support";
import { ISO_Z, makeTestApp, type TestApp, uniqueEmail } from "./helpers";

const PASSWORD = "Passw0rd!";

let t: TestApp;
let admin: { id: number; email: string; token: string };
beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
});
afterAll(() => t.close());

/** The audit entries of `action`, newest first, as an ADMIN reads them. */
async function audited(action: string, app = t, token = admin.token) {
  const res = await app.request<AuditEntry[]>("GET", `/api/audit?action=${action}&size=100`, { token });
  expect(res.status).toBe(200);
  return res.body;
}

/** An audit entry as the API answers it. */
const entry = (fields: Omit<AuditEntry, "id" | "createdAt" | "details"> & { details?: AuditEntry["details"] }) => ({
  id: expect.any(Number),
  details: null,
  createdAt: expect.stringMatching(ISO_Z),
  ...fields,
});

const login = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });

describe("sign-ins and sign-outs", () => {
  test("a failed sign-in names the e-mail tried and the client address, never the password; a known and an unknown e-mail alike", async () => {
    const user = await t.createUser({ password: PASSWORD });
    expect((await login(user.email, "Wrong-Secret-1!")).status).toBe(401);
    const nobody = "nobody-audited@example.com";
    expect((await login(nobody.toUpperCase(), "Wrong-Secret-2!")).status).toBe(401);
    const rows = await audited("LOGIN_FAILED");
    expect(rows.slice(0, 2)).toEqual([
      entry({ action: "LOGIN_FAILED", actor: nobody, subjectType: "User", subjectId: nobody, details: { email: nobody, address: "local" } }),
      entry({ action: "LOGIN_FAILED", actor: user.email, subjectType: "User", subjectId: user.email, details: { email: user.email, address: "local" } }),
    ]);
    expect(JSON.stringify(rows)).not.toContain("Wrong-Secret");
  });

  test("a right password refused (deactivated account) is a failed sign-in with its reason", async () => {
    const user = await t.createUser({ password: PASSWORD });
    expect((await t.request("POST", `/api/users/${user.id}/deactivate`, { token: admin.token })).status).toBe(200);
    expect((await login(user.email, PASSWORD)).status).toBe(403);
    expect((await audited("LOGIN_FAILED"))[0]).toEqual(
      entry({
        action: "LOGIN_FAILED",
        actor: user.email,
        subjectType: "User",
        subjectId: user.email,
        details: { email: user.email, address: "local", reason: "ACCOUNT_DISABLED" },
      }),
    );
  });

  test("a sign-in and a sign-out", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const session = await login(user.email, PASSWORD);
    expect(session.status).toBe(200);
    expect((await audited("LOGIN"))[0]).toEqual(entry({ action: "LOGIN", actor: user.email, subjectType: "User", subjectId: String(user.id), details: { address: "local" } }));
    expect((await t.request("POST", "/api/auth/logout", { token: session.body.data.token })).status).toBe(200);
    const sessionId = decodeJwt(session.body.data.token).sid as string;
    expect((await audited("LOGOUT"))[0]).toEqual(entry({ action: "LOGOUT", actor: user.email, subjectType: "User", subjectId: String(user.id), details: { sessionId } }));
  });
});

describe("passwords", () => {
  test("a change, and a change refused for a wrong current password", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const change = (currentPassword: string) =>
      t.request("POST", "/api/auth/change-password", { token: user.token, body: { currentPassword, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } });
    expect((await change("Not-It-1!")).status).toBe(400);
    expect((await audited("PASSWORD_CHANGE_FAILED"))[0]).toEqual(
      entry({ action: "PASSWORD_CHANGE_FAILED", actor: user.email, subjectType: "User", subjectId: String(user.id), details: { address: "local" } }),
    );
    expect((await change(PASSWORD)).status).toBe(200);
    const rows = await audited("PASSWORD_CHANGED");
    expect(rows[0]).toEqual(entry({ action: "PASSWORD_CHANGED", actor: user.email, subjectType: "User", subjectId: String(user.id) }));
    expect(JSON.stringify(rows)).not.toContain("N3wPassw0rd!");
  });

  test("a reset", async () => {
    const user = await t.createUser({ password: PASSWORD });
    // The token the reset mail would carry (the mail itself is the e-mail suite's).
    const token = await issueToken(t.db, user.id, "PASSWORD_RESET", Date.now());
    const done = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } });
    expect(done.status).toBe(200);
    expect((await audited("PASSWORD_RESET"))[0]).toEqual(entry({ action: "PASSWORD_RESET", actor: user.email, subjectType: "User", subjectId: String(user.id) }));
  });
});

describe("e-mail changes", () => {
  /** The EMAIL_CHANGED rows of one user, newest first. */
  const changesOf = async (id: number) => (await audited("EMAIL_CHANGED")).filter((row) => row.subjectId === String(id));

  test("a user's own change: by them, with the old and the new address", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const moved = uniqueEmail("moved");
    expect((await t.request("PATCH", `/api/users/${user.id}`, { token: user.token, body: { email: moved, currentPassword: PASSWORD } })).status).toBe(200);
    expect(await changesOf(user.id)).toEqual([
      entry({ action: "EMAIL_CHANGED", actor: user.email, subjectType: "User", subjectId: String(user.id), details: { oldEmail: user.email, newEmail: moved } }),
    ]);
  });

  test("an ADMIN's change (PUT): by the ADMIN; the same address again, or a taken one, leaves no row", async () => {
    const user = await t.createUser();
    const other = await t.createUser();
    const moved = uniqueEmail("moved");
    const put = (email: string) => t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "Moved Along", email } });
    expect((await put(user.email)).status).toBe(200);
    expect((await put(other.email)).status).toBe(409);
    expect(await changesOf(user.id)).toEqual([]);
    expect((await put(moved)).status).toBe(200);
    expect(await changesOf(user.id)).toEqual([
      entry({ action: "EMAIL_CHANGED", actor: admin.email, subjectType: "User", subjectId: String(user.id), details: { oldEmail: user.email, newEmail: moved } }),
    ]);
  });
});

describe("administration", () => {
  test("a user's deletion, with the e-mail it had", async () => {
    const user = await t.createUser();
    expect((await t.request("DELETE", `/api/users/${user.id}`, { token: admin.token })).status).toBe(204);
    expect((await audited("USER_DELETED"))[0]).toEqual(
      entry({ action: "USER_DELETED", actor: admin.email, subjectType: "User", subjectId: String(user.id), details: { email: user.email } }),
    );
  });

  test("a role change", async () => {
    const user = await t.createUser();
    expect((await t.request("PUT", `/api/users/${user.id}/roles`, { token: admin.token, body: { roles: ["USER", "ADMIN"] } })).status).toBe(200);
    expect((await audited("USER_ROLES_SET"))[0]).toEqual(
      entry({ action: "USER_ROLES_SET", actor: admin.email, subjectType: "User", subjectId: String(user.id), details: { roles: ["USER", "ADMIN"] } }),
    );
  });

  test("a log-level change", async () => {
    const change = (configuredLevel: string | null) => t.request("POST", "/actuator/loggers/http", { token: admin.token, body: { configuredLevel } });
    expect((await change("DEBUG")).status).toBe(204);
    expect((await change(null)).status).toBe(204);
    expect((await audited("LOG_LEVEL_CHANGED")).slice(0, 2)).toEqual([
      entry({ action: "LOG_LEVEL_CHANGED", actor: admin.email, subjectType: "logger", subjectId: "http", details: { configuredLevel: null } }),
      entry({ action: "LOG_LEVEL_CHANGED", actor: admin.email, subjectType: "logger", subjectId: "http", details: { configuredLevel: "DEBUG" } }),
    ]);
  });

  test("a heap dump", async () => {
    const res = await t.handle(new Request(`http://localhost${t.config.basePath}/actuator/heapdump`, { headers: { authorization: `Bearer ${admin.token}` } }));
    expect(res.status).toBe(200);
    const name = /filename="([^"]+)"/.exec(res.headers.get("content-disposition") ?? "")?.[1];
    await res.body?.cancel();
    expect((await audited("HEAP_DUMP_DOWNLOADED"))[0]).toEqual(entry({ action: "HEAP_DUMP_DOWNLOADED", actor: admin.email, subjectType: "heapdump", subjectId: name! }));
  }, 60_000);
});

// Backups are of a local file (a replica's copy included): on the remote legs the flow does not run
// (400 BACKUP_UNSUPPORTED).
describe.skipIf(remote)("backups", () => {
  test("a download, and a restore (the CLI) recorded in the restored database", async () => {
    const made = await t.request("POST", "/api/admin/backups", { token: admin.token });
    expect(made.status).toBe(201);
    const name: string = made.body.name;
    // Through app.handle, as the backups suite downloads: the document does not describe this answer's media type yet.
    const download = await t.app.handle(new Request(`http://localhost${t.config.basePath}/api/admin/backups/${name}`, { headers: { authorization: `Bearer ${admin.token}` } }));
    expect(download.status).toBe(200);
    await download.arrayBuffer();
    expect((await audited("BACKUP_DOWNLOADED"))[0]).toEqual(entry({ action: "BACKUP_DOWNLOADED", actor: admin.email, subjectType: "backup", subjectId: name }));

    const target = mkdtempSync(join(tmpdir(), "usersvc-restored-"));
    try {
      const restored = cli(["restore", join(t.config.backupDir, name)], { DATA_DIR: target, JWT_SECRET: "x".repeat(64) });
      expect(restored.code).toBe(0);
      const after = await makeTestApp({ DATA_DIR: target, DATABASE_URL: `file:${join(target, "usersvc.db")}`, DATABASE_DRIVER: "native" });
      try {
        const restoredAdmin = await after.admin();
        expect((await audited("BACKUP_RESTORED", after, restoredAdmin.token))[0]).toEqual(
          entry({
            action: "BACKUP_RESTORED",
            actor: "system",
            subjectType: "backup",
            subjectId: name,
            details: expect.objectContaining({ restoredAt: expect.stringMatching(ISO_Z) }),
          }),
        );
      } finally {
        await after.close();
      }
    } finally {
      rmSync(target, { recursive: true, force: true });
    }
  }, 60_000);
});
