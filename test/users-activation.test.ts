/**
 * POST /api/users/{id}/activate, /deactivate and /revoke-tokens through app.handle on a real
 * database: what the user can still do afterwards (log in, use old tokens), the audit rows,
 * the last active ADMIN, and who may call them.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import type { AuditEntry } from "../src/features/audit/model";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { DENIED, expectFailure, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

const PASSWORD = "Passw0rd!";
let t: TestApp;
let admin: { id: number; email: string; token: string };

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
});
afterAll(() => t.close());

const login = (email: string) => t.request("POST", "/api/auth/login", { body: { email, password: PASSWORD } });
const me = (token: string, id: number) => t.request("GET", `/api/users/${id}`, { token });
const audit = async (action: string) => (await t.request<AuditEntry[]>("GET", `/api/audit?action=${action}&size=100`, { token: admin.token })).body;

describe("deactivate and activate", () => {
  test("deactivating: the User (inactive, version +1, ETag); old tokens 401; login 403; one audit row", async () => {
    const user = await t.createUser({ password: PASSWORD });
    expect((await me(user.token, user.id)).status).toBe(200);

    const res = await t.request("POST", `/api/users/${user.id}/deactivate`, { token: admin.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: user.id, email: user.email, active: false, version: 1 });
    expect(res.headers.get("etag")).toBe('"1"');

    expect((await me(user.token, user.id)).status).toBe(401);
    expectFailure(await login(user.email), 403, { message: "This account is disabled", errorCode: "ACCOUNT_DISABLED" });
    expect(await audit("USER_DEACTIVATED")).toContainEqual({
      id: expect.any(Number),
      action: "USER_DEACTIVATED",
      actor: admin.email,
      subjectType: "User",
      subjectId: String(user.id),
      details: null,
      createdAt: expect.stringMatching(ISO_Z),
    });

    // Again: already inactive, nothing changes and nothing more is audited.
    const again = await t.request("POST", `/api/users/${user.id}/deactivate`, { token: admin.token });
    expect(again.body).toMatchObject({ active: false, version: 1 });
    expect((await audit("USER_DEACTIVATED")).filter((row) => row.subjectId === String(user.id))).toHaveLength(1);
  });

  test("activating: the user logs in again with a new token; tokens from before the deactivation stay dead", async () => {
    const user = await t.createUser({ password: PASSWORD });
    await t.request("POST", `/api/users/${user.id}/deactivate`, { token: admin.token });

    const res = await t.request("POST", `/api/users/${user.id}/activate`, { token: admin.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: user.id, active: true, version: 2 });
    expect((await me(user.token, user.id)).status).toBe(401);
    const fresh = await login(user.email);
    expect(fresh.status).toBe(200);
    expect((await me(fresh.body.data.token, user.id)).status).toBe(200);
    expect((await audit("USER_ACTIVATED")).map((row) => row.subjectId)).toContain(String(user.id));

    const again = await t.request("POST", `/api/users/${user.id}/activate`, { token: admin.token });
    expect(again.body).toMatchObject({ active: true, version: 2 });
  });

  test("the last active ADMIN cannot be deactivated (409 LAST_ADMIN, nothing changes); with a second ADMIN it can", async () => {
    const solo = await makeTestApp();
    try {
      const only = await solo.admin();
      const refused = await solo.request("POST", `/api/users/${only.id}/deactivate`, { token: only.token });
      expectFailure(refused, 409, { message: "At least one active ADMIN must remain", errorCode: "LAST_ADMIN" });
      const zh = await solo.request("POST", `/api/users/${only.id}/deactivate`, { token: only.token, headers: { "accept-language": "zh-TW" } });
      expect(zh.body.message).toBe("至少需保留一位啟用中的管理員");
      expect((await solo.request("GET", `/api/users/${only.id}`, { token: only.token })).body).toMatchObject({ active: true, version: 0 });

      const second = await solo.admin();
      expect((await solo.request("POST", `/api/users/${only.id}/deactivate`, { token: second.token })).status).toBe(200);
      expect((await solo.request("POST", `/api/users/${second.id}/deactivate`, { token: second.token })).status).toBe(409);
    } finally {
      await solo.close();
    }
  });
});

describe("revoke-tokens", () => {
  test("204 with no body; every earlier token is 401; the user logs in again; one audit row", async () => {
    const user = await t.createUser({ password: PASSWORD });
    const issued = (await login(user.email)).body.data.token;
    expect((await me(issued, user.id)).status).toBe(200);

    const res = await t.request("POST", `/api/users/${user.id}/revoke-tokens`, { token: admin.token });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    expect((await me(user.token, user.id)).status).toBe(401);
    expect((await me(issued, user.id)).status).toBe(401);

    const fresh = await login(user.email);
    expect((await me(fresh.body.data.token, user.id)).body).toMatchObject({ active: true, version: 0 });
    expect((await audit("USER_TOKENS_REVOKED")).map((row) => [row.subjectId, row.actor])).toContainEqual([String(user.id), admin.email]);
  });
});

describe("who may", () => {
  let plain: { id: number; token: string };
  let target: { id: number; token: string };
  beforeAll(async () => {
    plain = await t.createUser();
    target = await t.createUser();
  });
  const call = (path: string, token?: string) => t.request("POST", path, { token });
  for (const action of ["activate", "deactivate", "revoke-tokens"]) {
    describe(action, () => {
      scenarios([
        {
          name: "a USER",
          send: () => call(`/api/users/${target.id}/${action}`, plain.token),
          status: 403,
          failure: DENIED,
        },
        { name: "no token", send: () => call(`/api/users/${target.id}/${action}`), status: 401, failure: UNAUTHORIZED },
        {
          name: "an unknown id",
          send: () => call(`/api/users/99999/${action}`, admin.token),
          status: 404,
          failure: { message: "User not found, ID: 99999", errorCode: "USER_NOT_FOUND" },
        },
        { name: "a bad id", send: () => call(`/api/users/abc/${action}`, admin.token), status: 400, failure: invalidParams(["id: must be an integer"]) },
      ]);
    });
  }
  test("none of the refusals touched the target", async () => {
    expect((await me(target.token, target.id)).body).toMatchObject({ active: true, version: 0 });
  });
});
