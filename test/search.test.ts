/**
 * /api/search over a generated, deterministic population of 3,000 users (seeded straight
 * into the database). Expected answers are computed from the generated rows in plain JS, so
 * every criterion, alone and combined, is checked against an independent oracle.
 */
import { afterAll, beforeAll, describe, expect, leg, test } from "./legs";
import { Database as Connection, type SQLQueryBindings } from "bun:sqlite";
import { createClient } from "@libsql/client";
import { fillPlaceholders } from "drizzle-orm";
import type { Page } from "../src/paging";
import { searchStatement, TRIGRAM, type UserSearchCriteria } from "../src/store/user-search";
import { seedUsers, type SeededUser } from "./fixtures/users-dataset";
import { ISO_Z, makeTestApp, type TestApp } from "./helpers";
import { expectFailure, invalidParams, scenarios, UNAUTHORIZED } from "./scenario";

let t: TestApp;
let caller: { id: number; email: string; token: string };
let admin: { id: number; email: string; token: string };
/** Everyone in the database, as the oracle sees them. */
let people: SeededUser[];

/** Names with every character a LIKE pattern or an SQL string could misread. */
const AWKWARD_NAMES = ["100% Pure", "Under_Score", "Ann O'Hara", "Back\\Slash", 'Say "Hi"', "Percent%Sign", "Plain Name"];

beforeAll(async () => {
  t = await makeTestApp();
  people = await seedUsers(t.database, { count: 3000, seed: 7 });
  // The accounts' real e-mails (uniqueEmail's), so an e-mail criterion expects them where they match.
  const asPerson = ({ id, email }: { id: number; email: string }, name: string, roles: string[]): SeededUser => ({
    id,
    name,
    email,
    age: null as never,
    active: true,
    department: null,
    createdAt: new Date(),
    lastLogin: null,
    roles,
    skills: [],
  });
  caller = await t.createUser({ name: "Search Caller" });
  admin = await t.admin();
  people.push(asPerson(caller, "Search Caller", ["USER"]), asPerson(admin, "Test User", ["ADMIN", "USER"]));
  for (const name of AWKWARD_NAMES) people.push(asPerson(await t.createUser({ name }), name, ["USER"]));
});
afterAll(() => t.close());

const search = (query: string, headers?: Record<string, string>) => t.request("GET", `/api/search/users${query}`, { token: caller.token, headers });
const ids = (body: { id: number }[]) => body.map((u) => u.id);
const byId = (a: SeededUser, b: SeededUser) => a.id - b.id;
/** The oracle: page `page` of `size` of the matching users, by id. */
const expected = (match: (u: SeededUser) => boolean, page = 0, size = 10) =>
  people
    .filter(match)
    .sort(byId)
    .slice(page * size, page * size + size)
    .map((u) => u.id);
const nameHas = (term: string) => (u: SeededUser) => u.name.toLowerCase().includes(term.toLowerCase());

describe("defaults", () => {
  test("no criteria: the first 10 active users by id, as Users", async () => {
    const res = await search("");
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual(expected((u) => u.active));
    const first = people.find((u) => u.id === res.body[0].id)!;
    expect(res.body[0]).toEqual({
      id: first.id,
      name: first.name,
      email: first.email,
      department: first.department,
      phone: null,
      active: true,
      createdAt: first.createdAt.toISOString(),
      updatedAt: first.createdAt.toISOString(),
      lastLogin: first.lastLogin ? first.lastLogin.toISOString() : null,
      version: 0,
      roles: first.roles,
      emailVerified: false,
    });
    for (const user of res.body) {
      expect(user.createdAt).toMatch(ISO_Z);
      expect(Object.keys(user)).not.toContain("passwordHash");
      expect(Object.keys(user)).not.toContain("salaryCents");
      expect(Object.keys(user)).not.toContain("age");
    }
  });

  test("empty parameters do not restrict (and are not type errors)", async () => {
    const res = await search("?name=&age=&email=&department=&active=&page=&size=");
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual(expected((u) => u.active));
  });

  test("a blank name does not restrict", async () => {
    expect(ids((await search("?name=%20%20")).body)).toEqual(expected((u) => u.active));
  });

  test("needs a token", async () => {
    expectFailure(await t.request("GET", "/api/search/users"), 401, UNAUTHORIZED);
  });
});

describe("each criterion alone", () => {
  const oneByOne: [string, string, (u: SeededUser) => boolean][] = [
    ["name, 3+ letters (trigram index)", "?name=ali", (u) => u.active && nameHas("ali")(u)],
    ["name, a whole word with a space", "?name=alice%20s", (u) => u.active && nameHas("alice s")(u)],
    ["name, 2 letters (LIKE fallback)", "?name=ng", (u) => u.active && nameHas("ng")(u)],
    ["name, 1 letter (LIKE fallback)", "?name=z", (u) => u.active && nameHas("z")(u)],
    ["name, non-ASCII", "?name=%C3%A9lo", (u) => u.active && nameHas("élo")(u)],
    ["age", "?age=30", (u) => u.active && u.age === 30],
    ["active=false", "?active=false", (u) => !u.active],
    ["email substring", "?email=ER12", (u) => u.active && u.email.includes("er12")],
    ["department, any case", "?department=sALES", (u) => u.active && u.department === "Sales"],
    ["createdAfter (inclusive)", "?createdAfter=2025-01-02T00:00:00Z", (u) => u.active && u.createdAt >= new Date("2025-01-02T00:00:00Z")],
    ["createdBefore (exclusive), a date", "?createdBefore=2025-01-01", (u) => u.active && u.createdAt < new Date("2025-01-01T00:00:00Z")],
    ["createdBefore, a date-time without offset is UTC", "?createdBefore=2025-01-01T01:00", (u) => u.active && u.createdAt < new Date("2025-01-01T01:00:00Z")],
  ];
  test.each(oneByOne)("%s", async (_, query, match) => {
    const res = await search(`${query}${query ? "&" : "?"}size=100`);
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual(expected(match, 0, 100));
  });

  test("the name criteria find something in this data set (the cases above are not vacuous)", () => {
    for (const term of ["ali", "alice s", "ng", "z", "élo"]) expect(people.filter(nameHas(term)).length).toBeGreaterThan(0);
  });

  test("name ignores case", async () => {
    const lower = ids((await search("?name=alice&size=100")).body);
    expect(lower.length).toBeGreaterThan(0);
    expect(ids((await search("?name=ALICE&size=100")).body)).toEqual(lower);
    expect(ids((await search("?name=aLiCe&size=100")).body)).toEqual(lower);
    // Trigram folding covers letters beyond ASCII.
    expect(ids((await search("?name=%C3%89LODIE&size=100")).body)).toEqual(ids((await search("?name=%C3%A9lodie&size=100")).body));
  });

  test("pages: page 2 of size 7 continues where page 1 ends", async () => {
    const res = await search("?name=an&page=2&size=7");
    expect(ids(res.body)).toEqual(expected((u) => u.active && nameHas("an")(u), 2, 7));
    expect(res.body).toHaveLength(7);
  });

  test("a page past the end is empty", async () => {
    expect((await search("?page=10000")).body).toEqual([]);
  });

  test("sortBy and sortDirection (id breaks ties)", async () => {
    const res = await search("?sortBy=name&sortDirection=desc&size=50");
    const want = people
      .filter((u) => u.active)
      .sort((a, b) => (a.name === b.name ? a.id - b.id : a.name < b.name ? 1 : -1))
      .slice(0, 50)
      .map((u) => u.id);
    expect(ids(res.body)).toEqual(want);
  });
});

describe("criteria combined", () => {
  const combos: [string, (u: SeededUser) => boolean][] = [
    ["?name=son&age=40", (u) => u.active && nameHas("son")(u) && u.age === 40],
    ["?name=li&active=false&department=Research", (u) => !u.active && nameHas("li")(u) && u.department === "Research"],
    ["?age=25&active=false", (u) => !u.active && u.age === 25],
    [
      "?name=mar&createdAfter=2025-01-01T12:00:00Z&createdBefore=2025-01-02",
      (u) => u.active && nameHas("mar")(u) && u.createdAt >= new Date("2025-01-01T12:00:00Z") && u.createdAt < new Date("2025-01-02T00:00:00Z"),
    ],
    ["?email=user1&department=engineering&age=33", (u) => u.active && u.email.includes("user1") && u.department === "Engineering" && u.age === 33],
  ];
  test.each(combos)("%s", async (query, match) => {
    const res = await search(`${query}&size=100`);
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual(expected(match, 0, 100));
    expect(people.filter(match).length).toBeGreaterThan(0);
  });
});

describe("names match literally: % _ ' \" \\ are not operators", () => {
  // [term, names that must be among the answers]; the answer must equal the oracle's exactly.
  const literal: [string, string[]][] = [
    ["%", ["100% Pure", "Percent%Sign"]],
    ["0% P", ["100% Pure"]],
    ["_", ["Under_Score"]],
    ["r_s", ["Under_Score"]],
    ["'", ["Ann O'Hara"]],
    ["o'h", ["Ann O'Hara"]],
    ["\\", ["Back\\Slash"]],
    ["k\\s", ["Back\\Slash"]],
    ['"hi"', ['Say "Hi"']],
    ['"', ['Say "Hi"']],
    ["%%", []],
    ["__", []],
    ["' OR '1'='1", []],
  ];
  test.each(literal)("name=%s", async (term, mustHave) => {
    const res = await search(`?name=${encodeURIComponent(term)}&size=100`);
    expect(res.status).toBe(200);
    const names = res.body.map((u: { name: string }) => u.name);
    expect(names).toEqual(expected((u) => u.active && nameHas(term)(u), 0, 100).map((id) => people.find((u) => u.id === id)!.name));
    for (const name of mustHave) expect(names).toContain(name);
    if (mustHave.length === 0) expect(names).toEqual([]);
  });
});

describe("size limits and bad parameters", () => {
  test("size=100 is allowed", async () => {
    const res = await search("?size=100");
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(100);
  });

  const bad: [string, string[]][] = [
    ["?size=101", ["size: must be at most 100"]],
    ["?size=0", ["size: must be at least 1"]],
    ["?page=-1", ["page: must be at least 0"]],
    ["?age=abc", ["age: must be an integer"]],
    ["?age=1.5", ["age: must be an integer"]],
    ["?active=maybe", ["active: must be true or false"]],
    // Texts TypeBox's own conversion would read as true: refused, and the errors say why.
    ["?active=1", ["active: must be true or false"]],
    ["?active=TRUE", ["active: must be true or false"]],
    ["?page=x&size=500", ["page: must be an integer", "size: must be at most 100"]],
    ["?sortBy=salary", ["sortBy: must be one of id, name, email, createdAt, updatedAt, lastLogin, active"]],
    ["?sortDirection=up", ["sortDirection: must be one of asc, desc, ASC, DESC"]],
    ["?createdAfter=yesterday", ["createdAfter: must be a date (yyyy-MM-dd) or an ISO 8601 date-time"]],
    ["?createdBefore=2025-02-30", ["createdBefore: must be a date (yyyy-MM-dd) or an ISO 8601 date-time"]],
  ];
  scenarios(bad.map(([query, errors]) => ({ name: `${query} → 400 parameter validation`, send: () => search(query), status: 400, failure: invalidParams(errors) })));

  test("in Traditional Chinese", async () => {
    const res = await search("?size=101", { "accept-language": "zh-TW" });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe("參數驗證失敗");
    expect(res.body.errors).toEqual(["size: 不能大於 100"]);
  });
});

/**
 * EXPLAIN QUERY PLAN's detail lines for a search as the service runs it. On bun:sqlite an
 * EXPLAIN statement stays un-reset after it ran, pinning its connection's snapshot: a
 * connection of its own, closed after.
 */
async function queryPlan(criteria: UserSearchCriteria, page: Page) {
  const { statement, values } = searchStatement(t.database, criteria, page);
  const query = statement.getQuery();
  const params = fillPlaceholders(query.params, values);
  if (leg !== "native") {
    // The driver's own library (two SQLite libraries in one process do not see each other's
    // locks), or on a remote leg the server, through a client of its own.
    const client = createClient({ url: t.config.databaseUrl, authToken: t.config.databaseAuthToken });
    try {
      return (await client.execute({ sql: `EXPLAIN QUERY PLAN ${query.sql}`, args: params as never })).rows.map((r) => String(r.detail));
    } finally {
      client.close();
    }
  }
  const connection = new Connection(t.config.databaseUrl.slice("file:".length), { readonly: true });
  try {
    return connection
      .prepare<{ detail: string }, SQLQueryBindings[]>(`EXPLAIN QUERY PLAN ${query.sql}`)
      .all(...(params as SQLQueryBindings[]))
      .map((r) => r.detail);
  } finally {
    connection.close();
  }
}

describe("the trigram index", () => {
  const plan = async (name: string) => {
    return (await queryPlan({ name, active: true }, { page: 0, size: 10 })).join("\n");
  };

  test(`a ${TRIGRAM}-letter name is answered by users_name_fts (MATCH), which also gives the id order (no sort)`, async () => {
    const text = await plan("ali");
    // Index flag 64 = FTS5 consumes ORDER BY rowid; M = a MATCH constraint.
    expect(text).toMatch(/^SCAN users_name_fts VIRTUAL TABLE INDEX 64:M/);
    expect(text).toContain("SEARCH users USING INTEGER PRIMARY KEY");
    expect(text).not.toContain("TEMP B-TREE");
  });

  test("sorting by id descending is served by the index too", async () => {
    expect((await queryPlan({ name: "ali", sortDirection: "desc" }, { page: 0, size: 10 })).join("\n")).not.toContain("TEMP B-TREE");
    const res = await search("?name=ali&sortDirection=desc&size=100");
    expect(ids(res.body)).toEqual(
      people
        .filter((u) => u.active && nameHas("ali")(u))
        .sort((a, b) => b.id - a.id)
        .slice(0, 100)
        .map((u) => u.id),
    );
  });

  test("a 2-letter name does not touch the trigram index (it cannot serve it)", async () => {
    expect(await plan("al")).not.toContain("users_name_fts");
  });

  test("stays in step with renames and deletes", async () => {
    const created = await t.request("POST", "/api/users", { token: admin.token, body: { name: "Zebediah Quux", email: "zq@example.com" } });
    expect(created.status).toBe(201);
    const find = async (term: string) => ids((await search(`?name=${term}`)).body);
    expect(await find("ebedia")).toEqual([created.body.id]);
    expect((await t.request("PATCH", `/api/users/${created.body.id}`, { token: admin.token, body: { name: "Xanthippe Quux" } })).status).toBe(200);
    expect(await find("ebedia")).toEqual([]);
    expect(await find("nthip")).toEqual([created.body.id]);
    expect((await t.request("DELETE", `/api/users/${created.body.id}`, { token: admin.token })).status).toBe(204);
    expect(await find("nthip")).toEqual([]);
  });
});

describe("department and role", () => {
  const inDeptWithRole = (dept: string, role: string) => (u: SeededUser) => u.department === dept && u.roles.includes(role);

  test.each([
    ["Sales", "ADMIN"],
    ["sales", "admin"],
    ["Engineering", "USER"],
  ])("/department/%s/role/%s: every match (inactive too), by id", async (dept, role) => {
    const res = await t.request("GET", `/api/search/users/department/${dept}/role/${role}`, { token: caller.token });
    expect(res.status).toBe(200);
    const match = inDeptWithRole(dept[0].toUpperCase() + dept.slice(1).toLowerCase(), role.toUpperCase());
    expect(ids(res.body)).toEqual(
      people
        .filter(match)
        .sort(byId)
        .map((u) => u.id),
    );
    expect(res.body.length).toBeGreaterThan(0);
    for (const user of res.body) expect(user.roles).toContain(role.toUpperCase());
  });

  test("a department name with spaces and & (URL-encoded)", async () => {
    const created = await t.request("POST", "/api/users", { token: admin.token, body: { name: "R and D Person", email: "rnd@example.com", department: "R&D Lab" } });
    const res = await t.request("GET", `/api/search/users/department/${encodeURIComponent("R&D Lab")}/role/USER`, { token: caller.token });
    expect(ids(res.body)).toEqual([created.body.id]);
    expect(res.body[0].department).toBe("R&D Lab");
  });

  test("pages only when asked", async () => {
    const all = people
      .filter(inDeptWithRole("Engineering", "USER"))
      .sort(byId)
      .map((u) => u.id);
    const page = async (query: string) => ids((await t.request("GET", `/api/search/users/department/Engineering/role/USER${query}`, { token: caller.token })).body);
    expect(await page("?page=1&size=5")).toEqual(all.slice(5, 10));
    expect(await page("?size=3")).toEqual(all.slice(0, 3));
    expect(await page("?page=1")).toEqual(all.slice(20, 40));
    const bad = await t.request("GET", "/api/search/users/department/Engineering/role/USER?size=101", { token: caller.token });
    expect([bad.status, bad.body.errors]).toEqual([400, ["size: must be at most 100"]]);
  });

  test.each([["/api/search/users/department/Nowhere/role/USER"], ["/api/search/users/department/Sales/role/KING"]])("%s → []", async (path) => {
    const res = await t.request("GET", path, { token: caller.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });
});

describe("by skills", () => {
  const holdsAny = (skills: string[]) => (u: SeededUser) => u.skills.some((s) => skills.includes(s.toLowerCase()));
  const bySkills = (query: string) => t.request("GET", `/api/search/by-skills${query}`, { token: caller.token });

  test.each([
    ["?skills=rust", ["rust"]],
    ["?skills=RUST", ["rust"]],
    ["?skills=Rust&skills=rust&skills=RUST", ["rust"]],
    ["?skills=go&skills=Kotlin", ["go", "kotlin"]],
    ["?skills=go,kotlin", ["go", "kotlin"]],
    ["?skills=%20Docker%20", ["docker"]],
    ["?skills=cobol", ["cobol"]],
  ])("%s: holders of any, each once, by id", async (query, wanted) => {
    const res = await bySkills(query);
    expect(res.status).toBe(200);
    const want = people
      .filter(holdsAny(wanted))
      .sort(byId)
      .map((u) => u.id);
    expect(ids(res.body)).toEqual(want);
    expect(new Set(ids(res.body)).size).toBe(res.body.length);
  });

  test("pages only when asked", async () => {
    const all = people
      .filter(holdsAny(["rust"]))
      .sort(byId)
      .map((u) => u.id);
    expect(ids((await bySkills("?skills=rust&page=2&size=4")).body)).toEqual(all.slice(8, 12));
    expect(ids((await bySkills("?skills=rust")).body)).toEqual(all);
  });

  test("a user holding several of the skills, written in several cases, comes once", async () => {
    const many = people.find((u) => new Set(u.skills.map((s) => s.toLowerCase())).size >= 2)!;
    const skills = [...new Set(many.skills.map((s) => s.toLowerCase()))];
    const res = await bySkills(`?${skills.flatMap((s) => [`skills=${s}`, `skills=${s.toUpperCase()}`]).join("&")}`);
    expect(ids(res.body).filter((id) => id === many.id)).toEqual([many.id]);
  });

  scenarios(
    [
      ["", ["skills: is required"]],
      ["?skills=", ["skills[0]: must not be blank"]],
      ["?skills=java&skills=%20", ["skills[1]: must not be blank"]],
    ].map(([query, errors]) => ({ name: `by-skills${query}`, send: () => bySkills(query as string), status: 400, failure: invalidParams(errors as string[]) })),
  );
});
