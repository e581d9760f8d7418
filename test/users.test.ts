/**
 * The users API through app.handle on a real libSQL file: every User rule at its
 * boundaries, the interface's statuses and codes, optimistic locking, concurrent creates
 * of one e-mail, and who may do what.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq, like } from "drizzle-orm";
import { departments, outbox, users } from "../src/db/schema";
import { renderMail } from "../src/features/notifications/templates";
import type { User } from "../src/models/user";
import { freshUser, makeTestApp, uniqueEmail, type TestApp } from "./helpers";
import { DENIED, expectFailure, invalidBody, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

let t: TestApp;
let admin: { id: number; email: string; token: string };
let plain: { id: number; email: string; token: string };

beforeAll(async () => {
  t = await makeTestApp();
  admin = await t.admin();
  plain = await t.createUser();
});
afterAll(() => t.close());

/** A valid address of exactly `length` characters: a 64-character local part, then labels under 64. */
function emailOfLength(length: number): string {
  const labels: string[] = [];
  for (let remaining = length - 65 - "com".length; remaining > 0; ) {
    const size = Math.min(60, remaining - 1);
    labels.push("d".repeat(size));
    remaining -= size + 1;
  }
  return `${"l".repeat(64)}@${[...labels, "com"].join(".")}`;
}

const post = (body: unknown, token = admin.token, headers?: Record<string, string>) => t.request("POST", "/api/users", { body, token, headers });
const create = async (extra: Record<string, unknown> = {}) => {
  const res = await post({ name: "Test Person", email: uniqueEmail("u"), ...extra });
  expect(res.status).toBe(201);
  return res.body;
};

describe("User rules at their boundaries (POST)", () => {
  const ok = (extra: Record<string, unknown>) => ({ name: "Valid Name", email: uniqueEmail("u"), ...extra });
  const accepted: [string, () => Record<string, unknown>][] = [
    ["name of 2 characters", () => ok({ name: "Al" })],
    ["name of 100 characters", () => ok({ name: "n".repeat(100) })],
    ["e-mail of 255 characters", () => ok({ email: emailOfLength(255) })],
    ["phone of 20 characters", () => ok({ phone: "+1 (555) 123-4567 89" })],
    ["phone of digits only", () => ok({ phone: "0912345678" })],
    ["department of 50 characters", () => ok({ department: "D".repeat(50) })],
    ["name of 100 characters inside spaces", () => ok({ name: ` ${"n".repeat(100)} ` })],
    ["e-mail inside spaces", () => ok({ email: `  ${uniqueEmail("u")}  ` })],
  ];
  test.each(accepted)("accepts %s", async (_, body) => {
    const sent = body();
    const res = await post(sent);
    expect(res.status).toBe(201);
    expect(res.body.name).toBe((sent.name as string).trim());
    expect(res.body.email).toBe((sent.email as string).trim().toLowerCase());
  });

  test("the 255-character e-mail helper builds what it says", () => {
    expect(emailOfLength(255)).toHaveLength(255);
    expect(emailOfLength(256)).toHaveLength(256);
  });

  const refused: [string, () => Record<string, unknown>, string[]][] = [
    ["name of 1 character", () => ok({ name: "A" }), ["name: must be between 2 and 100 characters"]],
    ["name of 101 characters", () => ok({ name: "n".repeat(101) }), ["name: must be between 2 and 100 characters"]],
    ["blank name", () => ok({ name: "   " }), ["name: must not be blank"]],
    ["empty name", () => ok({ name: "" }), ["name: must not be blank"]],
    ["missing name", () => ({ email: uniqueEmail("u") }), ["name: must not be blank"]],
    ["e-mail of 256 characters", () => ok({ email: emailOfLength(256) }), ["email: must be at most 255 characters"]],
    ["e-mail without @", () => ok({ email: "plainaddress" }), ["email: must be a valid e-mail address"]],
    ["e-mail without domain", () => ok({ email: "a@" }), ["email: must be a valid e-mail address"]],
    ["e-mail without local part", () => ok({ email: "@b.co" }), ["email: must be a valid e-mail address"]],
    ["e-mail with a space", () => ok({ email: "a b@c.co" }), ["email: must be a valid e-mail address"]],
    ["missing e-mail", () => ({ name: "Valid Name" }), ["email: must not be blank"]],
    ["blank e-mail", () => ok({ email: "   " }), ["email: must not be blank"]],
    ["phone of 21 characters", () => ok({ phone: "+1 (555) 123-4567 890" }), ["phone: must contain only digits, spaces, +, -, ( and ), at most 20 characters"]],
    ["phone with a letter", () => ok({ phone: "555-123x" }), ["phone: must contain only digits, spaces, +, -, ( and ), at most 20 characters"]],
    ["department of 51 characters", () => ok({ department: "D".repeat(51) }), ["department: must be at most 50 characters"]],
    ["name of the wrong type", () => ok({ name: 42 }), ["name: must be a string"]],
    ["name of 1 character inside spaces", () => ok({ name: "  A  " }), ["name: must be between 2 and 100 characters"]],
    ["department of 51 characters inside spaces", () => ok({ department: ` ${"D".repeat(51)} ` }), ["department: must be at most 50 characters"]],
  ];
  test.each(refused)("refuses %s", async (_, body, errors) => {
    const before = await t.db.$count(users);
    expectFailure(await post(body()), 400, invalidBody(errors));
    expect(await t.db.$count(users)).toBe(before);
  });

  test("reports every violation at once", async () => {
    const res = await post({ name: "A", email: "nope", phone: "abc", department: "D".repeat(51) });
    expect(res.status).toBe(400);
    expect(res.body.errors.toSorted()).toEqual([
      "department: must be at most 50 characters",
      "email: must be a valid e-mail address",
      "name: must be between 2 and 100 characters",
      "phone: must contain only digits, spaces, +, -, ( and ), at most 20 characters",
    ]);
  });

  test("zh-TW gives the original service's field texts", async () => {
    const zh = { "accept-language": "zh-TW" };
    const blank = await post({ name: "   ", email: "bad" }, admin.token, zh);
    expect(blank.status).toBe(400);
    expect(blank.body.message).toBe("資料驗證失敗");
    expect(blank.body.errors).toEqual(["name: 姓名不能為空", "email: Email 格式不正確"]);
    const long = await post({ name: "A", email: uniqueEmail("u"), phone: "x" }, admin.token, zh);
    expect(long.body.errors).toEqual(["name: 姓名長度必須在 2-100 字元之間", "phone: 電話號碼格式不正確"]);
    const missing = await post({ name: "Valid" }, admin.token, zh);
    expect(missing.body.errors).toEqual(["email: Email 不能為空"]);
  });
});

describe("POST /api/users", () => {
  test("201 with the service's fields; client id, active and timestamps ignored; no password back", async () => {
    const email = uniqueEmail("u");
    const res = await post({
      id: 999_999,
      name: "  Grace Hopper  ",
      email: email.toUpperCase(),
      department: "Engineering",
      phone: "+886 912-345-678",
      password: "Secret@123",
      active: false,
      createdAt: "2000-01-01T00:00:00Z",
      version: 7,
      roles: ["ADMIN"],
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual(freshUser({ name: "Grace Hopper", email, department: "Engineering", phone: "+886 912-345-678" }));
    expect(res.body.id).not.toBe(999_999);
    expect(res.headers.get("etag")).toBe('"0"');
    expect(Date.now() - Date.parse(res.body.createdAt)).toBeLessThan(60_000);
    expect(res.text).not.toMatch(/password|hash|argon/i);
    const [row] = await t.db.select().from(users).where(eq(users.id, res.body.id));
    expect(row.passwordHash).toStartWith("$argon2id$");
  });

  test("without a password the user is stored with none", async () => {
    const user = await create();
    const [row] = await t.db.select().from(users).where(eq(users.id, user.id));
    expect(row.passwordHash).toBeNull();
    expect(user.department).toBeNull();
    expect(user.phone).toBeNull();
  });

  test("a weak password is a body violation", async () => {
    expectFailure(
      await post({ name: "Weak Pass", email: uniqueEmail("u"), password: "short" }),
      400,
      invalidBody([
        "password: must be between 8 and 20 characters",
        "password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
      ]),
    );
  });

  test("a duplicate e-mail is 409 DUPLICATE_EMAIL, also in another case", async () => {
    const email = uniqueEmail("u");
    await create({ email });
    for (const again of [email, email.toUpperCase(), ` ${email} `.trim()]) {
      const res = await post({ name: "Second", email: again });
      expectFailure(res, 409, { message: `Email already exists: ${email}`, errorCode: "DUPLICATE_EMAIL" });
    }
    const zh = await post({ name: "Second", email: "A@B.co" }, admin.token, { "accept-language": "zh-TW" });
    expect(zh.status).toBe(201);
    const dup = await post({ name: "Third", email: "a@b.co" }, admin.token, { "accept-language": "zh-TW" });
    expect(dup.body.message).toBe("Email 已存在: a@b.co");
  });

  test("a create refused for its e-mail leaves no new department behind, alone or racing the one that succeeds", async () => {
    const email = uniqueEmail("u");
    await create({ email });
    const refused = await post({ name: "Second", email, department: "Refused Only" });
    expectFailure(refused, 409, { errorCode: "DUPLICATE_EMAIL" });
    expect(await t.db.$count(departments, eq(departments.name, "Refused Only"))).toBe(0);
    // Concurrent creates of one e-mail, each naming its own new department: only the winner's is made.
    const racer = uniqueEmail("u");
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post({ name: `Racer ${i}`, email: racer, department: `Race ${racer} ${i}` })));
    const winners = results.filter((r) => r.status === 201);
    expect(winners).toHaveLength(1);
    expect(
      (
        await t.db
          .select({ name: departments.name })
          .from(departments)
          .where(like(departments.name, `Race ${racer} %`))
      ).map((d) => d.name),
    ).toEqual([winners[0].body.department]);
  });

  test("20 concurrent creates of one e-mail: exactly one 201, the rest 409 DUPLICATE_EMAIL", async () => {
    const email = uniqueEmail("u");
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => post({ name: `Racer ${i}`, email })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, ...Array(19).fill(409)]);
    for (const r of results.filter((r) => r.status === 409)) expect(r.body.errorCode).toBe("DUPLICATE_EMAIL");
    expect(await t.db.$count(users, eq(users.email, email))).toBe(1);
  });
});

describe("GET /api/users", () => {
  let l: TestApp;
  let token: string;
  beforeAll(async () => {
    l = await makeTestApp();
    token = (await l.admin()).token; // the admin is user 1
    for (const [name, email] of [
      ["Carol", "carol@x.io"],
      ["alice", "alice@x.io"],
      ["Bob", "bob@x.io"],
      ["Dave", "dave@x.io"],
    ]) {
      const res = await l.request("POST", "/api/users", { body: { name, email }, token });
      expect(res.status).toBe(201);
    }
  });
  afterAll(() => l.close());
  const list = (query = "") => l.request<User[]>("GET", `/api/users${query}`, { token });

  test("without page or size: every user, by id, with X-Total-Count", async () => {
    const res = await list();
    expect(res.status).toBe(200);
    expect(res.headers.get("x-total-count")).toBe("5");
    expect(res.body.map((u) => u.id)).toEqual([1, 2, 3, 4, 5]);
    expect(res.text).not.toMatch(/password|hash/i);
  });

  test("sort applies without paging too", async () => {
    const res = await list("?sort=email,desc");
    expect(res.body.map((u) => u.email)).toEqual(
      res.body
        .map((u) => u.email)
        .toSorted()
        .reverse(),
    );
    expect(res.body.map((u) => u.name).filter((n) => n !== "Test User")).toEqual(["Dave", "Carol", "Bob", "alice"]);
    expect(res.headers.get("x-total-count")).toBe("5");
  });

  test("paged: page from 0, size, sort; the total stays the whole count", async () => {
    const first = await list("?page=0&size=2&sort=name,asc");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-total-count")).toBe("5");
    expect(first.body).toHaveLength(2);
    const second = await list("?page=1&size=2&sort=name,asc");
    const third = await list("?page=2&size=2&sort=name,asc");
    const names = [...first.body, ...second.body, ...third.body].map((u) => u.name);
    expect(names).toHaveLength(5);
    expect(new Set(names).size).toBe(5);
    expect(third.body).toHaveLength(1);
    expect((await list("?page=9&size=2")).body).toEqual([]);
  });

  test("size alone pages with page 0; page alone uses size 20", async () => {
    expect((await list("?size=3")).body.map((u) => u.id)).toEqual([1, 2, 3]);
    expect((await list("?page=0")).body).toHaveLength(5);
    expect((await list("?page=1")).body).toHaveLength(0);
  });

  test("size 100 is the largest page", async () => {
    expect((await list("?size=100")).status).toBe(200);
  });

  const bad: [string, string][] = [
    ["?size=101", "size: must be at most 100"],
    ["?size=0", "size: must be at least 1"],
    ["?page=-1", "page: must be at least 0"],
    ["?page=abc", "page: must be an integer"],
    ["?sort=password,asc", "sort: must be <field>,asc|desc with field one of id, name, email, createdAt, updatedAt, lastLogin, active"],
    ["?sort=name,sideways", "sort: must be <field>,asc|desc with field one of id, name, email, createdAt, updatedAt, lastLogin, active"],
  ];
  scenarios(bad.map(([query, error]) => ({ name: `${query} is 400 parameter validation`, send: () => list(query), status: 400, failure: invalidParams([error]) })));

  test("parameter validation in zh-TW", async () => {
    const res = await l.request("GET", "/api/users?size=101", { token, headers: { "accept-language": "zh-TW" } });
    expect(res.body.message).toBe("參數驗證失敗");
  });
});

describe("GET /api/users with the console's filters", () => {
  let l: TestApp;
  let token: string;
  beforeAll(async () => {
    l = await makeTestApp();
    token = (await l.admin()).token; // the admin is user 1, "Test User", no department
    const people = [
      ["Mei Lin", "mei@sales.example.com", "Sales"],
      ["Lin Wei", "wei@ops.example.com", "Ops"],
      ["Carol 100%", "carol@sales.example.com", "Sales"],
      ["林美", "linmei@example.com", "Ops"],
    ];
    for (const [name, email, department] of people) {
      const created = await l.request("POST", "/api/users", { body: { name, email, department }, token });
      expect(created.status).toBe(201);
      // Wei is inactive.
      if (email === "wei@ops.example.com") expect((await l.request("POST", `/api/users/${created.body.id}/deactivate`, { token })).status).toBe(200);
    }
  });
  afterAll(() => l.close());
  const list = async (query: string) => {
    const res = await l.request<User[]>("GET", `/api/users?${query}`, { token });
    expect(res.status).toBe(200);
    return { names: res.body.map((u) => u.name), total: res.headers.get("x-total-count") };
  };

  const cases: [string, string[], string][] = [
    ["name=lin", ["Mei Lin", "Lin Wei"], "2"],
    ["name=LI", ["Mei Lin", "Lin Wei"], "2"],
    ["name=林", ["林美"], "1"],
    ["name=100%25", ["Carol 100%"], "1"],
    ["name=%25", ["Carol 100%"], "1"],
    ["email=SALES.example", ["Mei Lin", "Carol 100%"], "2"],
    ["department=Ops", ["Lin Wei", "林美"], "2"],
    ["department=ops", ["Lin Wei", "林美"], "2"],
    ["department=Nowhere", [], "0"],
    ["active=false", ["Lin Wei"], "1"],
    ["active=true&department=Ops", ["林美"], "1"],
    ["active=any&department=Ops", ["Lin Wei", "林美"], "2"],
    ["name=lin&email=ops", ["Lin Wei"], "1"],
    ["name=&email=%20", ["Test User", "Mei Lin", "Lin Wei", "Carol 100%", "林美"], "5"],
  ];
  test.each(cases)("?%s", async (query, names, total) => {
    expect(await list(query)).toEqual({ names, total });
  });

  test("the total counts the filtered users, not the page; sort and paging apply to the filtered list", async () => {
    expect(await list("department=Sales&size=1&sort=name,desc")).toEqual({ names: ["Mei Lin"], total: "2" });
    expect(await list("department=Sales&size=1&page=1&sort=name,desc")).toEqual({ names: ["Carol 100%"], total: "2" });
  });

  test("no filter: every user, as before", async () => {
    expect(await list("")).toEqual({ names: ["Test User", "Mei Lin", "Lin Wei", "Carol 100%", "林美"], total: "5" });
  });

  const bad: [string, string][] = [
    ["active=maybe", "active: must be one of true, false, any"],
    [`department=${"d".repeat(51)}`, "department: must be at most 50 characters"],
  ];
  scenarios(bad.map(([query, error]) => ({ name: `?${query}`, send: () => l.request("GET", `/api/users?${query}`, { token }), status: 400, failure: invalidParams([error]) })));
});

describe("GET /api/users/{id}", () => {
  test("200 with ETag of the version; any authenticated caller", async () => {
    const user = await create();
    const res = await t.request("GET", `/api/users/${user.id}`, { token: plain.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(user);
    expect(res.headers.get("etag")).toBe('"0"');
  });

  test("an unknown id is 404 USER_NOT_FOUND naming it, in both languages", async () => {
    const res = await t.request("GET", "/api/users/7777777", { token: admin.token });
    expectFailure(res, 404, { message: "User not found, ID: 7777777", errorCode: "USER_NOT_FOUND" });
    const zh = await t.request("GET", "/api/users/7777777", { token: admin.token, headers: { "accept-language": "zh-TW" } });
    expect(zh.body.message).toBe("找不到使用者，ID: 7777777");
  });

  // The guard reads the :id user in the caller's own statement (readsUser): the answers of every
  // token kind, found or not, and of a caller refused whatever the id, stay those of two reads.
  test("with a session token: the user, an unknown id's 404, and 401 for any id once the session ended", async () => {
    const password = "Read-Along-1!";
    const caller = await t.createUser({ password });
    const user = await create();
    const signIn = await t.request("POST", "/api/auth/login", { body: { email: caller.email, password } });
    expect(signIn.status).toBe(200);
    const { token } = signIn.body.data;
    const read = await t.request("GET", `/api/users/${user.id}`, { token });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(user);
    expect(read.headers.get("etag")).toBe('"0"');
    expect((await t.request("GET", `/api/users/${caller.id}`, { token })).body).toMatchObject({ id: caller.id, email: caller.email });
    expectFailure(await t.request("GET", "/api/users/7777777", { token }), 404, { errorCode: "USER_NOT_FOUND" });
    expect((await t.request("POST", "/api/auth/logout", { token })).status).toBe(200);
    for (const id of [user.id, caller.id, 7777777]) expectFailure(await t.request("GET", `/api/users/${id}`, { token }), 401, UNAUTHORIZED);
  });

  test("a deactivated caller is 401 for any id, their own included", async () => {
    const caller = await t.createUser();
    const user = await create();
    expect((await t.request("POST", `/api/users/${caller.id}/deactivate`, { token: admin.token })).status).toBe(200);
    for (const id of [user.id, caller.id, 7777777]) expectFailure(await t.request("GET", `/api/users/${id}`, { token: caller.token }), 401, UNAUTHORIZED);
  });

  test.each(["abc", "0", "-3", "1.5", "99999999999999999999"])("a bad id (%s) is 400 parameter validation", async (id) => {
    const res = await t.request("GET", `/api/users/${id}`, { token: admin.token });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe("Parameter validation failed");
    expect(res.body.errorCode).toBeUndefined();
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0]).toStartWith("id: ");
  });
});

describe("PUT /api/users/{id}", () => {
  test("the path id wins; name, email and department are replaced; version and updatedAt move", async () => {
    const user = await create({ department: "Sales", phone: "123" });
    const other = await create();
    await Bun.sleep(2);
    const email = uniqueEmail("u");
    const res = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { id: other.id, name: "Renamed", email, department: "Ops", phone: "999" } });
    expect(res.status).toBe(200);
    // Only name, e-mail and department are PUT's: the phone stays as it was.
    expect(res.body).toMatchObject({ id: user.id, name: "Renamed", email, department: "Ops", phone: "123", version: 1, active: true, createdAt: user.createdAt });
    expect(Date.parse(res.body.updatedAt)).toBeGreaterThan(Date.parse(user.updatedAt));
    expect((await t.request("GET", `/api/users/${other.id}`, { token: admin.token })).body).toEqual(other);
  });

  test("an absent department clears it", async () => {
    const user = await create({ department: "Sales" });
    const res = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: user.name, email: user.email } });
    expect(res.status).toBe(200);
    expect(res.body.department).toBeNull();
  });

  test("never changes active, either way", async () => {
    const user = await create();
    const sent = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "Still Active", email: user.email, active: false } });
    expect(sent.body.active).toBe(true);
    expect((await t.request("POST", `/api/users/${user.id}/deactivate`, { token: admin.token })).status).toBe(200);
    const again = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "Still Inactive", email: user.email, active: true } });
    expect(again.status).toBe(200);
    expect(again.body.active).toBe(false);
    const patched = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { active: true } });
    expect(patched.body.active).toBe(false);
  });

  test("is validated like POST", async () => {
    const user = await create();
    expectFailure(
      await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "X", email: user.email } }),
      400,
      invalidBody(["name: must be between 2 and 100 characters"]),
    );
  });

  test("another user's e-mail is 409 DUPLICATE_EMAIL; an unknown id 404", async () => {
    const a = await create();
    const b = await create();
    const dup = await t.request("PUT", `/api/users/${a.id}`, { token: admin.token, body: { name: a.name, email: b.email.toUpperCase() } });
    expect(dup.status).toBe(409);
    expect(dup.body.errorCode).toBe("DUPLICATE_EMAIL");
    const same = await t.request("PUT", `/api/users/${a.id}`, { token: admin.token, body: { name: "Own Mail", email: a.email } });
    expect(same.status).toBe(200);
    const missing = await t.request("PUT", "/api/users/8888888", { token: admin.token, body: { name: "Nobody", email: uniqueEmail("u") } });
    expect(missing.status).toBe(404);
    expect(missing.body.errorCode).toBe("USER_NOT_FOUND");
  });
});

describe("PATCH /api/users/{id}", () => {
  test("changes only the supplied non-null fields", async () => {
    const user = await create({ department: "Sales", phone: "555" });
    const renamed = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { name: "Only Name", email: null, department: null } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: "Only Name", email: user.email, department: "Sales", phone: "555", version: 1 });
    const moved = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { department: "Support" } });
    expect(moved.body).toMatchObject({ name: "Only Name", department: "Support", version: 2 });
    const email = uniqueEmail("u");
    const remailed = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { email: email.toUpperCase() } });
    expect(remailed.body).toMatchObject({ name: "Only Name", email, department: "Support", version: 3 });
  });

  test("validates what is supplied", async () => {
    const user = await create();
    expectFailure(
      await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { email: "broken" } }),
      400,
      invalidBody(["email: must be a valid e-mail address"]),
    );
    expectFailure(
      await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { department: "D".repeat(51) } }),
      400,
      invalidBody(["department: must be at most 50 characters"]),
    );
  });

  test("the user themself may; another USER gets 403 ACCESS_DENIED; unknown id 404", async () => {
    const self = await t.request("PATCH", `/api/users/${plain.id}`, { token: plain.token, body: { name: "Self Service" } });
    expect(self.status).toBe(200);
    expect(self.body.name).toBe("Self Service");
    const victim = await create();
    const denied = await t.request("PATCH", `/api/users/${victim.id}`, { token: plain.token, body: { name: "Hijacked" } });
    expectFailure(denied, 403, DENIED);
    expect((await t.request("GET", `/api/users/${victim.id}`, { token: admin.token })).body.name).toBe(victim.name);
    const missing = await t.request("PATCH", "/api/users/8888888", { token: admin.token, body: { name: "Nobody" } });
    expect(missing.status).toBe(404);
    expect(missing.body.errorCode).toBe("USER_NOT_FOUND");
  });
});

describe("changing an e-mail address", () => {
  const signIn = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });
  const mailsTo = (recipient: string) => t.db.select({ kind: outbox.kind, payload: outbox.payload }).from(outbox).where(eq(outbox.recipient, recipient));
  const row = async (id: number) => (await t.db.select().from(users).where(eq(users.id, id)))[0];

  test("one's own new address needs currentPassword: absent or wrong is 400 on that field (counted as a failed login), nothing changes", async () => {
    const self = await t.createUser({ password: "Own!pass1" });
    const token = (await signIn(self.email, "Own!pass1")).body.data.token;
    const before = await row(self.id);
    const patch = (body: Record<string, unknown>) => t.request("PATCH", `/api/users/${self.id}`, { token, body });
    expectFailure(await patch({ email: uniqueEmail("taken-over") }), 400, invalidBody(["currentPassword: is required to change your e-mail address"]));
    expectFailure(
      await t.request("PATCH", `/api/users/${self.id}`, { token, body: { email: uniqueEmail("taken-over") }, headers: { "accept-language": "zh-TW" } }),
      400,
      invalidBody(["currentPassword: 變更 Email 需要輸入目前密碼"], "資料驗證失敗"),
    );
    for (let i = 0; i < 5; i++)
      expectFailure(await patch({ email: uniqueEmail("taken-over"), currentPassword: "Wr0ng!pass" }), 400, invalidBody(["currentPassword: is not the current password"]));
    // Five failures are the login's limit for the address: the sixth guess, right or wrong, and a sign-in are 429.
    const throttled = await patch({ email: uniqueEmail("taken-over"), currentPassword: "Own!pass1" });
    expect([throttled.status, throttled.body.errorCode, Number(throttled.headers.get("retry-after"))]).toEqual([429, "TOO_MANY_REQUESTS", expect.any(Number)]);
    expect((await signIn(self.email, "Own!pass1")).status).toBe(429);
    expect(await row(self.id)).toEqual(before);
    expect(await mailsTo(self.email)).toEqual([]);
  });

  test("an old client echoing its own address (any case, spaces) needs no password and ends nothing", async () => {
    const self = await t.createUser({ password: "Own!pass1" });
    const token = (await signIn(self.email, "Own!pass1")).body.data.token;
    const res = await t.request("PATCH", `/api/users/${self.id}`, { token, body: { name: "Same Address", email: `  ${self.email.toUpperCase()} ` } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "Same Address", email: self.email, version: 1 });
    expect((await t.request("GET", "/api/search/profile", { token })).status).toBe(200);
    expect((await mailsTo(self.email)).map((m) => m.kind)).toEqual(["USER_UPDATED"]);
  });

  test("with the right password: unverified, every earlier token ends, EMAIL_CHANGED to the old address; the user signs in again with the new one", async () => {
    const self = await t.createUser({ password: "Own!pass1" });
    await t.db.update(users).set({ emailVerified: true }).where(eq(users.id, self.id));
    const first = (await signIn(self.email, "Own!pass1")).body.data.token;
    const second = (await signIn(self.email, "Own!pass1")).body.data.token;
    const moved = uniqueEmail("moved");
    const res = await t.request("PATCH", `/api/users/${self.id}`, { token: first, body: { email: moved, currentPassword: "Own!pass1" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(freshUser({ id: self.id, email: moved, version: 1, emailVerified: false, lastLogin: expect.stringMatching(/Z$/) }));
    for (const token of [first, second, self.token]) expectFailure(await t.request("GET", "/api/search/profile", { token }), 401, UNAUTHORIZED);
    expect(await mailsTo(self.email)).toEqual([{ kind: "EMAIL_CHANGED", payload: { userId: self.id } }]);
    expect((await mailsTo(moved)).map((m) => m.kind)).toEqual(["USER_UPDATED"]);
    expect((await signIn(self.email, "Own!pass1")).status).toBe(401);
    const again = await signIn(moved, "Own!pass1");
    expect(again.status).toBe(200);
    expect((await t.request("GET", "/api/search/profile", { token: again.body.data.token })).body.email).toBe(moved);
  });

  test("an ADMIN changes another user's address without a password (PUT and PATCH); that user's tokens end and the old address is told", async () => {
    for (const method of ["PUT", "PATCH"]) {
      const other = await t.createUser({ password: "Other!pass1" });
      const token = (await signIn(other.email, "Other!pass1")).body.data.token;
      const moved = uniqueEmail("admin-moved");
      const res = await t.request(method, `/api/users/${other.id}`, { token: admin.token, body: { name: "Moved By Admin", email: moved } });
      expect([method, res.status, res.body.email]).toEqual([method, 200, moved]);
      expectFailure(await t.request("GET", "/api/search/profile", { token }), 401, UNAUTHORIZED);
      expect(await mailsTo(other.email)).toEqual([{ kind: "EMAIL_CHANGED", payload: { userId: other.id } }]);
      expect((await signIn(moved, "Other!pass1")).status).toBe(200);
    }
  });

  test("the EMAIL_CHANGED mail, in English and zh-TW", () => {
    const en = renderMail({ kind: "EMAIL_CHANGED", lang: "en", name: "Mei Lin", payload: { userId: 1 } });
    expect(en.subject).toBe("Your e-mail address was changed");
    expect(en.text).toContain("The e-mail address of your account was just changed; this address no longer signs in to it");
    const zh = renderMail({ kind: "EMAIL_CHANGED", lang: "zh-TW", name: "Mei Lin", payload: { userId: 1 } });
    expect(zh.subject).toBe("您的 Email 地址已變更");
    expect(zh.html).toContain('<html lang="zh-TW">');
  });
});

describe("setting a password with PUT or PATCH (ADMIN)", () => {
  const signIn = (email: string, password: string) => t.request("POST", "/api/auth/login", { body: { email, password } });

  test.each(["PUT", "PATCH"])("%s: stored as argon2id, the old password and every earlier token end", async (method) => {
    const other = await t.createUser({ password: "Old!pass12" });
    const token = (await signIn(other.email, "Old!pass12")).body.data.token;
    const res = await t.request(method, `/api/users/${other.id}`, { token: admin.token, body: { name: "Reset By Admin", email: other.email, password: "N3w!pass12" } });
    expect(res.status).toBe(200);
    expect(res.text).not.toMatch(/password|hash|argon/i);
    expect((await t.db.select({ hash: users.passwordHash }).from(users).where(eq(users.id, other.id)))[0].hash).toStartWith("$argon2id$");
    expectFailure(await t.request("GET", "/api/search/profile", { token }), 401, UNAUTHORIZED);
    expect((await signIn(other.email, "Old!pass12")).status).toBe(401);
    expect((await signIn(other.email, "N3w!pass12")).status).toBe(200);
  });

  test.each(["PUT", "PATCH"])("%s: POST's password rules", async (method) => {
    const other = await t.createUser({ password: "Old!pass12" });
    expectFailure(
      await t.request(method, `/api/users/${other.id}`, { token: admin.token, body: { name: "Weak Pass", email: other.email, password: "short" } }),
      400,
      invalidBody([
        "password: must be between 8 and 20 characters",
        "password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
      ]),
    );
    expect((await signIn(other.email, "Old!pass12")).status).toBe(200);
  });

  test("a USER's own PATCH with a password is refused, not ignored: the password change route is theirs", async () => {
    const self = await t.createUser({ password: "Old!pass12" });
    const token = (await signIn(self.email, "Old!pass12")).body.data.token;
    expectFailure(
      await t.request("PATCH", `/api/users/${self.id}`, { token, body: { password: "N3w!pass12" } }),
      400,
      invalidBody(["password: only an ADMIN sets it here; use POST /api/auth/change-password"]),
    );
    expect((await signIn(self.email, "Old!pass12")).status).toBe(200);
  });
});

describe("optimistic locking", () => {
  const CONFLICT = { errorCode: "OPTIMISTIC_LOCK_CONFLICT" };

  test("a stale body version is 409 and nothing changes (PUT and PATCH)", async () => {
    const user = await create({ department: "Sales" });
    const first = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "First Writer", email: user.email, department: "Sales", version: 0 } });
    expect(first.status).toBe(200);
    expect(first.body.version).toBe(1);
    const stalePut = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, body: { name: "Second Writer", email: uniqueEmail("u"), version: 0 } });
    expectFailure(stalePut, 409, CONFLICT);
    const stalePatch = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { name: "Third Writer", version: 0 } });
    expectFailure(stalePatch, 409, CONFLICT);
    const now = await t.request("GET", `/api/users/${user.id}`, { token: admin.token });
    expect(now.body).toEqual(first.body);
    expect(now.headers.get("etag")).toBe('"1"');
  });

  test("If-Match with the ETag: current passes, stale is 409 and nothing changes", async () => {
    const user = await create();
    const etag = (await t.request("GET", `/api/users/${user.id}`, { token: admin.token })).headers.get("etag")!;
    const fresh = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": etag }, body: { name: "Matched" } });
    expect(fresh.status).toBe(200);
    expect(fresh.body.version).toBe(1);
    expect(fresh.headers.get("etag")).toBe('"1"'); // the answer's ETag is the next If-Match
    const stale = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": etag }, body: { name: "Too Late" } });
    expectFailure(stale, 409, CONFLICT);
    const stalePut = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": etag }, body: { name: "Too Late", email: user.email } });
    expect(stalePut.status).toBe(409);
    const weak = await t.request("PUT", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": 'W/"1"' }, body: { name: "Weak Match", email: user.email } });
    expect(weak.status).toBe(200);
    const star = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": "*" }, body: { name: "Any Version" } });
    expect(star.status).toBe(200);
    const garbage = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, headers: { "if-match": '"abc"' }, body: { name: "Garbage" } });
    expect(garbage.status).toBe(409);
    expect((await t.request("GET", `/api/users/${user.id}`, { token: admin.token })).body).toMatchObject({ name: "Any Version", version: 3 });
  });

  test("without a version or If-Match the update is last-writer-wins", async () => {
    const user = await create();
    await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { name: "One" } });
    const res = await t.request("PATCH", `/api/users/${user.id}`, { token: admin.token, body: { name: "Two" } });
    expect(res.body).toMatchObject({ name: "Two", version: 2 });
  });
});

describe("DELETE /api/users/{id}", () => {
  test("204 with an empty body, then 404 USER_NOT_FOUND", async () => {
    const user = await create();
    const res = await t.request("DELETE", `/api/users/${user.id}`, { token: admin.token });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    const again = await t.request("DELETE", `/api/users/${user.id}`, { token: admin.token });
    expectFailure(again, 404, { message: `User not found, ID: ${user.id}`, errorCode: "USER_NOT_FOUND" });
    expect((await t.request("GET", `/api/users/${user.id}`, { token: admin.token })).status).toBe(404);
  });
});

describe("access rules", () => {
  const anonymous = (method: string, path: string) => {
    const body = method === "POST" || method === "PUT" || method === "PATCH" ? { name: "Anon", email: uniqueEmail("u") } : undefined;
    return { name: `anonymous ${method} ${path}`, send: () => t.request(method, path, { body }), status: 401, failure: UNAUTHORIZED };
  };
  scenarios([
    anonymous("GET", "/api/users"),
    anonymous("GET", "/api/users/1"),
    anonymous("POST", "/api/users"),
    anonymous("PUT", "/api/users/1"),
    anonymous("PATCH", "/api/users/1"),
    anonymous("DELETE", "/api/users/1"),
  ]);

  test("a bad or foreign token is 401 too", async () => {
    for (const token of ["garbage", `${admin.token}x`]) {
      const res = await t.request("GET", "/api/users", { token });
      expect(res.status).toBe(401);
    }
  });

  // A USER on an ADMIN route, even on their own account: refused, and the account is as it was.
  const byUser = (method: string, self: boolean) => ({
    name: `a USER on ${method} /api/users${self ? "/{self}" : ""}`,
    send: () =>
      t.request(method, `/api/users${self ? `/${plain.id}` : ""}`, { token: plain.token, body: method === "DELETE" ? undefined : { name: "By A User", email: uniqueEmail("u") } }),
    status: 403,
    failure: DENIED,
    unchanged: async () => (await t.request("GET", `/api/users/${plain.id}`, { token: admin.token })).body,
  });
  scenarios([byUser("POST", false), byUser("PUT", true), byUser("DELETE", true)]);

  test("a USER may list and read", async () => {
    expect((await t.request("GET", "/api/users", { token: plain.token })).status).toBe(200);
    expect((await t.request("GET", `/api/users/${admin.id}`, { token: plain.token })).status).toBe(200);
  });

  test("zh-TW ACCESS_DENIED text", async () => {
    const res = await t.request("DELETE", `/api/users/${admin.id}`, { token: plain.token, headers: { "accept-language": "zh-TW" } });
    expect(res.body.message).toBe("沒有權限執行此操作");
  });
});

describe("under BASE_PATH", () => {
  test("the users API moves under the prefix; the bare path is unknown", async () => {
    const prefixed = await makeTestApp({ BASE_PATH: "svc/" });
    try {
      const { token } = await prefixed.admin();
      expect(prefixed.config.basePath).toBe("/svc");
      const created = await prefixed.request("POST", "/api/users", { token, body: { name: "Prefixed", email: "p@svc.io" } });
      expect(created.status).toBe(201);
      expect((await prefixed.request("GET", `/api/users/${created.body.id}`, { token })).body.email).toBe("p@svc.io");
      const bare = await prefixed.handle(new Request("http://localhost/api/users", { headers: { authorization: `Bearer ${token}` } }));
      expect(bare.status).toBe(404);
      expect(((await bare.json()) as { errorCode: string }).errorCode).toBe("NOT_FOUND");
    } finally {
      await prefixed.close();
    }
  });
});
