/**
 * Departments, roles, profiles and bulk deactivation through app.handle on a real libSQL
 * file: shapes, who may do what, validation, and the deactivation cutoff at its boundary.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { users } from "../src/db/schema";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { DENIED, expectFailure, type Failure, invalidBody, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

let t: TestApp;
let admin: { id: number; email: string; token: string };
let plain: { id: number; email: string; token: string };
let other: { id: number; email: string; token: string };

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  plain = await t.createUser();
  other = await t.createUser();
});
afterAll(() => t.close());

describe("departments", () => {
  test("ADMIN creates one: 201, the Department", async () => {
    const res = await t.request("POST", "/api/departments", { token: admin.token, body: { name: "  Research  ", description: "Labs" } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(Number), name: "Research", description: "Labs", createdAt: expect.stringMatching(ISO_Z), userCount: 0 });
  });

  test("a user's department is its name, created on first use, and counted", async () => {
    const created = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Dept Person", email: "dept@example.com", department: "Logistics" } });
    expect(created.body.department).toBe("Logistics");
    await t.request("POST", "/api/users", { token: admin.token, body: { name: "Lab Person", email: "lab@example.com", department: "Research" } });
    const list = await t.request("GET", "/api/departments", { token: plain.token });
    expect(list.status).toBe(200);
    expect(list.body.map((d: { name: string; userCount: number }) => [d.name, d.userCount])).toEqual([
      ["Logistics", 1],
      ["Research", 1],
    ]);
    const logistics = list.body.find((d: { name: string }) => d.name === "Logistics");
    expect(logistics).toEqual({ id: expect.any(Number), name: "Logistics", description: null, createdAt: expect.stringMatching(ISO_Z), userCount: 1 });
  });

  const refused: [string, () => { token?: string; body: unknown }, number, Failure][] = [
    ["a taken name", () => ({ token: admin.token, body: { name: "Research" } }), 409, { message: "Department already exists: Research", errorCode: "DUPLICATE_DEPARTMENT" }],
    [
      "a taken name with spaces around",
      () => ({ token: admin.token, body: { name: " Research " } }),
      409,
      { message: "Department already exists: Research", errorCode: "DUPLICATE_DEPARTMENT" },
    ],
    ["a blank name", () => ({ token: admin.token, body: { name: "   " } }), 400, invalidBody(["name: is required"])],
    ["no name", () => ({ token: admin.token, body: {} }), 400, invalidBody(["name: is required"])],
    ["a name of 51 characters", () => ({ token: admin.token, body: { name: "d".repeat(51) } }), 400, invalidBody(["name: must be at most 50 characters"])],
    ["a USER", () => ({ token: plain.token, body: { name: "Mine" } }), 403, DENIED],
    ["no token", () => ({ body: { name: "Mine" } }), 401, UNAUTHORIZED],
  ];
  scenarios(refused.map(([name, request, status, failure]) => ({ name: `POST with ${name}`, send: () => t.request("POST", "/api/departments", request()), status, failure })));

  test("a taken name in Traditional Chinese", async () => {
    const res = await t.request("POST", "/api/departments", { token: admin.token, body: { name: "Research" }, headers: { "accept-language": "zh-TW" } });
    expect(res.body.message).toBe("部門已存在: Research");
  });

  test("listing needs a token", async () => {
    expect((await t.request("GET", "/api/departments")).status).toBe(401);
  });
});

describe("roles", () => {
  test("any caller lists the seeded roles", async () => {
    const res = await t.request("GET", "/api/roles", { token: plain.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: expect.any(Number), name: "USER", description: expect.any(String) },
      { id: expect.any(Number), name: "ADMIN", description: expect.any(String) },
    ]);
  });

  test("ADMIN sets a user's roles: the whole set, repeats once, version +1; the new role applies at once", async () => {
    const target = await t.createUser();
    const res = await t.request("PUT", `/api/users/${target.id}/roles`, { token: admin.token, body: { roles: ["ADMIN", "USER", "ADMIN"] } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: target.id, email: target.email, roles: ["ADMIN", "USER"], version: 1 });
    expect(Object.keys(res.body)).not.toContain("passwordHash");
    // The same token now passes ADMIN rules: roles are read on every request.
    expect((await t.request("POST", "/api/departments", { token: target.token, body: { name: "Promoted" } })).status).toBe(201);

    const demoted = await t.request("PUT", `/api/users/${target.id}/roles`, { token: admin.token, body: { roles: ["USER"] } });
    expect(demoted.body).toMatchObject({ roles: ["USER"], version: 2 });
    expect((await t.request("POST", "/api/departments", { token: target.token, body: { name: "Again" } })).status).toBe(403);
  });

  const refused: [string, () => { token?: string; id: number; body: unknown }, number, Failure][] = [
    ["a USER", () => ({ token: plain.token, id: plain.id, body: { roles: ["ADMIN"] } }), 403, DENIED],
    ["no token", () => ({ id: plain.id, body: { roles: ["USER"] } }), 401, UNAUTHORIZED],
    ["an unknown role", () => ({ token: admin.token, id: plain.id, body: { roles: ["USER", "KING"] } }), 400, invalidBody(["roles[1]: must be one of USER, ADMIN"])],
    ["no roles", () => ({ token: admin.token, id: plain.id, body: { roles: [] } }), 400, invalidBody(["roles: must have at least 1 entries"])],
    ["no body field", () => ({ token: admin.token, id: plain.id, body: {} }), 400, invalidBody(["roles: is required"])],
    ["an unknown user", () => ({ token: admin.token, id: 99_999, body: { roles: ["USER"] } }), 404, { message: "User not found, ID: 99999", errorCode: "USER_NOT_FOUND" }],
  ];
  scenarios(
    refused.map(([name, request, status, failure]) => ({
      name: `PUT roles by/with ${name}`,
      send: () => {
        const { id, ...rest } = request();
        return t.request("PUT", `/api/users/${id}/roles`, rest);
      },
      status,
      failure,
    })),
  );

  test("a refused change leaves the roles alone", async () => {
    const res = await t.request("GET", `/api/users/${plain.id}`, { token: admin.token });
    expect(res.body.roles).toEqual(["USER"]);
  });
});

describe("profiles", () => {
  const empty = (userId: number) => ({ userId, avatarUrl: null, bio: null, birthDate: null, address: null });
  const full = { avatarUrl: "https://example.com/a.png", bio: "Hello\nthere", birthDate: "1990-05-17", address: "1 Main St, Taipei" };

  test("a user without one reads an empty profile", async () => {
    const res = await t.request("GET", `/api/users/${plain.id}/profile`, { token: plain.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(empty(plain.id));
  });

  test("the user writes their own, then reads it back; a second PUT replaces it whole", async () => {
    const put = await t.request("PUT", `/api/users/${plain.id}/profile`, { token: plain.token, body: full });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ userId: plain.id, ...full });
    expect((await t.request("GET", `/api/users/${plain.id}/profile`, { token: plain.token })).body).toEqual({ userId: plain.id, ...full });

    const replaced = await t.request("PUT", `/api/users/${plain.id}/profile`, { token: plain.token, body: { bio: "Only a bio", avatarUrl: null } });
    expect(replaced.body).toEqual({ ...empty(plain.id), bio: "Only a bio" });
    expect((await t.request("GET", `/api/users/${plain.id}/profile`, { token: plain.token })).body).toEqual({ ...empty(plain.id), bio: "Only a bio" });
  });

  test("an avatarUrl over http or https, in any letter case, is kept as given", async () => {
    for (const avatarUrl of ["http://example.com/a.png", "HTTPS://Example.com/a.png?size=2#top"]) {
      const put = await t.request("PUT", `/api/users/${other.id}/profile`, { token: other.token, body: { avatarUrl } });
      expect(put.status).toBe(200);
      expect(put.body.avatarUrl).toBe(avatarUrl);
    }
  });

  test("ADMIN reads and writes anyone's", async () => {
    const put = await t.request("PUT", `/api/users/${other.id}/profile`, { token: admin.token, body: { address: "Admin wrote this" } });
    expect(put.status).toBe(200);
    expect((await t.request("GET", `/api/users/${other.id}/profile`, { token: admin.token })).body).toEqual({ ...empty(other.id), address: "Admin wrote this" });
  });

  type ProfileRequest = { token?: string; id: number; body?: unknown; headers?: Record<string, string> };
  const refused: [string, string, () => ProfileRequest, number, Failure][] = [
    ["another USER reads", "GET", () => ({ token: plain.token, id: other.id }), 403, DENIED],
    ["another USER writes", "PUT", () => ({ token: plain.token, id: other.id, body: { bio: "mine now" } }), 403, DENIED],
    ["a USER asks for an unknown id", "GET", () => ({ token: plain.token, id: 99_999 }), 403, DENIED],
    ["ADMIN reads an unknown id", "GET", () => ({ token: admin.token, id: 99_999 }), 404, { message: "User not found, ID: 99999", errorCode: "USER_NOT_FOUND" }],
    [
      "ADMIN writes an unknown id",
      "PUT",
      () => ({ token: admin.token, id: 99_999, body: { bio: "x" } }),
      404,
      { message: "User not found, ID: 99999", errorCode: "USER_NOT_FOUND" },
    ],
    ["no token", "GET", () => ({ id: plain.id }), 401, UNAUTHORIZED],
    [
      "a bad date and a number for bio",
      "PUT",
      () => ({ token: plain.token, id: plain.id, body: { bio: 5, birthDate: "1990-02-30" } }),
      400,
      invalidBody(["bio: must be a string", "birthDate: must be a date (yyyy-MM-dd)"]),
    ],
    [
      "a birthDate that is not in the past",
      "PUT",
      () => ({ token: plain.token, id: plain.id, body: { birthDate: "2999-01-01" } }),
      400,
      invalidBody(["birthDate: must be a date in the past"]),
    ],
    [
      "an avatarUrl of 501 characters",
      "PUT",
      () => ({ token: plain.token, id: plain.id, body: { avatarUrl: `https://example.com/${"a".repeat(481)}` } }),
      400,
      invalidBody(["avatarUrl: must be at most 500 characters"]),
    ],
    // A link the console and clients render: only a web address, never script or inline data.
    ...[
      "javascript:alert(1)",
      "JavaScript://%0aalert(1)",
      "data:text/html,<script>alert(1)</script>",
      "vbscript:x",
      "ftp://example.com/a.png",
      "//evil.example/a.png",
      "https:/a",
      " https://example.com/a.png",
    ].map((avatarUrl): [string, string, () => ProfileRequest, number, Failure] => [
      `an avatarUrl "${avatarUrl}"`,
      "PUT",
      () => ({ token: plain.token, id: plain.id, body: { avatarUrl } }),
      400,
      invalidBody(["avatarUrl: must be an http or https URL"]),
    ]),
    [
      "an avatarUrl that is not a web address, in zh-TW",
      "PUT",
      () => ({ token: plain.token, id: plain.id, body: { avatarUrl: "javascript:alert(1)" }, headers: { "accept-language": "zh-TW" } }),
      400,
      invalidBody(["avatarUrl: 必須是 http 或 https 網址"], "資料驗證失敗"),
    ],
  ];
  scenarios(
    refused.map(([name, method, request, status, failure]) => ({
      name,
      send: () => {
        const { id, ...rest } = request();
        return t.request(method, `/api/users/${id}/profile`, rest);
      },
      status,
      failure,
    })),
  );

  test("refused writes changed nothing", async () => {
    expect((await t.request("GET", `/api/users/${other.id}/profile`, { token: other.token })).body).toEqual({ ...empty(other.id), address: "Admin wrote this" });
    expect((await t.request("GET", `/api/users/${plain.id}/profile`, { token: plain.token })).body).toEqual({ ...empty(plain.id), bio: "Only a bio" });
  });
});

describe("deactivate-inactive", () => {
  // A separate app: the counts below are exact only if no one else has logged in.
  let d: TestApp;
  let boss: { id: number; email: string; token: string };
  const people: Record<string, { id: number; email: string; token: string }> = {};
  const PASSWORD = "Secret@123";
  const lastLogins: Record<string, string | null> = {
    justBeforeMidnight: "2025-05-31T23:59:59.999Z",
    atMidnight: "2025-06-01T00:00:00.000Z",
    atTen: "2025-06-01T10:00:00.000Z",
    never: null,
  };

  beforeAll(async () => {
    d = await makeTestApp();
    boss = await d.admin();
    for (const [key, at] of Object.entries(lastLogins)) {
      people[key] = await d.createUser({ password: PASSWORD });
      // Raw write: a last login at a chosen past instant, which no request can produce.
      await d.db
        .update(users)
        .set({ lastLogin: at ? new Date(at) : null })
        .where(eq(users.id, people[key].id));
    }
    people.alreadyInactive = await d.createUser();
    // Raw write: an account already inactive since a past instant, which no request can produce.
    await d.db
      .update(users)
      .set({ active: false, lastLogin: new Date("2020-01-01T00:00:00Z") })
      .where(eq(users.id, people.alreadyInactive.id));
  });
  afterAll(() => d.close());

  const deactivate = (before: string, token = boss.token) => d.request("POST", `/api/users/deactivate-inactive?before=${encodeURIComponent(before)}`, { token });
  const state = async (key: string) => {
    const [row] = await d.db.select({ active: users.active, version: users.version }).from(users).where(eq(users.id, people[key].id));
    return row;
  };

  test("walks the cutoff across the boundaries, one user at a time", async () => {
    const steps: [string, number, string[]][] = [
      // A date means the start of that day (UTC): 23:59:59.999 the day before is not before it.
      ["2025-05-31", 0, []],
      ["2025-06-01", 1, ["justBeforeMidnight"]],
      // Exactly at the cutoff is not before it.
      ["2025-06-01T00:00:00Z", 0, []],
      ["2025-06-01T00:00:00.001Z", 1, ["atMidnight"]],
      ["2025-06-01T10:00:00Z", 0, []],
      // 12:00:00.001+02:00 is 10:00:00.001Z.
      ["2025-06-01T12:00:00.001+02:00", 1, ["atTen"]],
      ["2030-01-01", 0, []],
    ];
    const gone = new Set<string>();
    for (const [before, count, newlyGone] of steps) {
      const res = await deactivate(before);
      expect([before, res.status, res.body]).toEqual([before, 200, { count, skipped: 0 }]);
      for (const key of newlyGone) gone.add(key);
      for (const key of Object.keys(lastLogins)) expect([before, key, (await state(key)).active]).toEqual([before, key, !gone.has(key)]);
    }
  });

  test("deactivated users got version +1; never-logged-in and already-inactive users were not touched", async () => {
    expect(await state("justBeforeMidnight")).toEqual({ active: false, version: 1 });
    expect(await state("never")).toEqual({ active: true, version: 0 });
    expect(await state("alreadyInactive")).toEqual({ active: false, version: 0 });
  });

  test("a deactivated user's token stops working; the untouched user's still works", async () => {
    const res = await d.request("GET", `/api/users/${people.atTen.id}`, { token: people.atTen.token });
    expectFailure(res, 401, UNAUTHORIZED);
    expect((await d.request("GET", `/api/users/${people.never.id}`, { token: people.never.token })).status).toBe(200);
  });

  test("a deactivated user cannot log in: 403 ACCOUNT_DISABLED", async () => {
    const res = await d.request("POST", "/api/auth/login", { body: { email: people.atTen.email, password: PASSWORD } });
    expect(res.status).toBe(403);
    expect(res.body.errorCode).toBe("ACCOUNT_DISABLED");
  });

  scenarios([
    { name: "by a USER", send: () => deactivate("2030-01-01", people.never.token), status: 403, failure: DENIED },
    { name: "with no token", send: () => d.request("POST", "/api/users/deactivate-inactive?before=2030-01-01"), status: 401, failure: UNAUTHORIZED },
    {
      name: "with no cutoff",
      send: () => d.request("POST", "/api/users/deactivate-inactive", { token: boss.token }),
      status: 400,
      failure: invalidParams(["before: is required"]),
    },
    { name: "with a word", send: () => deactivate("yesterday"), status: 400, failure: invalidParams(["before: must be a date (yyyy-MM-dd) or an ISO 8601 date-time"]) },
    {
      name: "with a day that does not exist",
      send: () => deactivate("2025-02-30"),
      status: 400,
      failure: invalidParams(["before: must be a date (yyyy-MM-dd) or an ISO 8601 date-time"]),
    },
  ]);

  test("the refusals deactivated no one", async () => {
    expect(await state("never")).toEqual({ active: true, version: 0 });
  });
});

describe("the last active ADMIN stays", () => {
  let solo: TestApp;
  beforeAll(async () => {
    solo = await makeTestApp();
  });
  afterAll(() => solo.close());

  test("demoting or deleting the only active ADMIN is 409 LAST_ADMIN and changes nothing; with a second ADMIN it is allowed", async () => {
    const only = await solo.admin();
    const LAST_ADMIN = { message: "At least one active ADMIN must remain", errorCode: "LAST_ADMIN" };
    expectFailure(await solo.request("PUT", `/api/users/${only.id}/roles`, { token: only.token, body: { roles: ["USER"] } }), 409, LAST_ADMIN);
    expectFailure(await solo.request("DELETE", `/api/users/${only.id}`, { token: only.token }), 409, LAST_ADMIN);
    const zh = await solo.request("DELETE", `/api/users/${only.id}`, { token: only.token, headers: { "accept-language": "zh-TW" } });
    expect(zh.body.message).toBe("至少需保留一位啟用中的管理員");
    expect((await solo.request("GET", `/api/users/${only.id}`, { token: only.token })).body.roles).toEqual(["ADMIN", "USER"]);

    // A deactivated ADMIN does not count as the one who remains.
    const dormant = await solo.admin();
    expect((await solo.request("POST", `/api/users/${dormant.id}/deactivate`, { token: only.token })).status).toBe(200);
    expect((await solo.request("PUT", `/api/users/${only.id}/roles`, { token: only.token, body: { roles: ["USER"] } })).status).toBe(409);

    const second = await solo.admin();
    const demoted = await solo.request("PUT", `/api/users/${only.id}/roles`, { token: second.token, body: { roles: ["USER"] } });
    expect(demoted.status).toBe(200);
    expect(demoted.body.roles).toEqual(["USER"]);
    expect((await solo.request("DELETE", `/api/users/${second.id}`, { token: second.token })).status).toBe(409);
  });
});

describe("deactivate-inactive keeps the last active ADMIN and ends tokens", () => {
  let k: TestApp;
  beforeAll(async () => {
    k = await makeTestApp();
  });
  afterAll(() => k.close());

  const lastLoginAt = (id: number, at: string) =>
    k.db
      .update(users)
      .set({ lastLogin: new Date(at) })
      .where(eq(users.id, id));

  test("before=2099-01-01 with every ADMIN inactive: the ADMIN who logged in last stays (skipped 1), the rest go and their tokens stay refused after re-activation", async () => {
    const earlier = await k.admin();
    const later = await k.admin();
    const user = await k.createUser();
    // Raw writes: last logins at chosen past instants, which no request can produce.
    await lastLoginAt(earlier.id, "2025-01-01T00:00:00Z");
    await lastLoginAt(later.id, "2025-02-01T00:00:00Z");
    await lastLoginAt(user.id, "2025-03-01T00:00:00Z");

    const res = await k.request("POST", "/api/users/deactivate-inactive?before=2099-01-01", { token: later.token });
    expect([res.status, res.body]).toEqual([200, { count: 2, skipped: 1 }]);
    const active = await k.db.select({ id: users.id, active: users.active }).from(users);
    expect(active.filter((row) => row.active).map((row) => row.id)).toEqual([later.id]);

    // Like a single deactivation: the tokens end, and re-activating the account revives none of them.
    for (const gone of [earlier, user]) {
      expect((await k.request("POST", `/api/users/${gone.id}/activate`, { token: later.token })).status).toBe(200);
      expectFailure(await k.request("GET", `/api/users/${gone.id}`, { token: gone.token }), 401, UNAUTHORIZED);
    }
    expect((await k.request("GET", `/api/users/${later.id}`, { token: later.token })).status).toBe(200);
  });

  test("with an active ADMIN outside the cutoff, inactive ADMINs go too (skipped 0)", async () => {
    const fresh = await k.admin(); // never logged in: not inactive since the cutoff
    const stale = await k.admin();
    await lastLoginAt(stale.id, "2025-01-01T00:00:00Z");
    const res = await k.request("POST", "/api/users/deactivate-inactive?before=2099-01-01", { token: fresh.token });
    expect([res.status, res.body]).toEqual([200, { count: 4, skipped: 0 }]);
    const [row] = await k.db.select({ active: users.active }).from(users).where(eq(users.id, stale.id));
    expect(row.active).toBe(false);
  });
});
