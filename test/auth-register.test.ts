/**
 * POST /api/auth/register and GET /api/auth/validate-email through app.handle on a real
 * libSQL file: every UserRegistrationDto / AddressDto rule on both sides of its boundary,
 * in English and in the original zh-TW texts, all violations at once, and what one
 * registration writes (user, role, profile, skills, outbox, audit) in its transaction.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { eq } from "drizzle-orm";
import { auditLog, outbox, userProfiles, userSkills, users } from "../src/db/schema";
import { EMPTY_REGISTRATION_ERRORS, freshUser, ISO_Z, makeTestApp, uniqueEmail, validRegistration, type TestApp } from "./helpers";
import { expectFailure, invalidBody, invalidParams, scenarios } from "./scenario";

let t: TestApp;
beforeAll(async () => {
  // The rule tables register far more than REGISTER_MAX_PER_IP allows one address; the limit has its own tests below.
  t = await makeTestApp({ REGISTER_MAX_PER_IP: "1000000" });
});
afterAll(() => t.close());

const day = (offsetDays: number) => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

const valid = () => validRegistration(uniqueEmail("reg"));

const register = (body: unknown, lang?: string) => t.request("POST", "/api/auth/register", { body, headers: lang ? { "accept-language": lang } : undefined });

/** A registration body a row may break: any field changed, of another type, or removed. */
type Draft = Record<string, unknown> & { address?: Record<string, unknown> };

/** Applies `change` to a valid body. */
function variant(change: (body: Draft) => void) {
  const body: Draft = valid();
  change(body);
  return body;
}

type Row = [rule: string, change: (b: Draft) => void, en: string[], zh: string[]];

const rejected: Row[] = [
  ["name of 1 character", (b) => (b.name = "A"), ["name: must be between 2 and 50 characters"], ["name: 姓名長度必須在 2-50 字元之間"]],
  ["name of 51 characters", (b) => (b.name = "n".repeat(51)), ["name: must be between 2 and 50 characters"], ["name: 姓名長度必須在 2-50 字元之間"]],
  ["blank name", (b) => (b.name = "   "), ["name: must not be blank"], ["name: 姓名不能為空"]],
  ["missing name", (b) => delete b.name, ["name: must not be blank"], ["name: 姓名不能為空"]],
  ["malformed e-mail", (b) => (b.email = "not-an-email"), ["email: must be a valid e-mail address"], ["email: Email 格式不正確"]],
  ["missing e-mail", (b) => delete b.email, ["email: must not be blank"], ["email: Email 不能為空"]],
  ["password of 7 characters", (b) => (b.password = b.confirmPassword = "Abcde1!"), ["password: must be between 8 and 20 characters"], ["password: 密碼長度必須在 8-20 字元之間"]],
  [
    "password of 21 characters",
    (b) => (b.password = b.confirmPassword = "Abcdefghij1!abcdefghi"),
    ["password: must be between 8 and 20 characters"],
    ["password: 密碼長度必須在 8-20 字元之間"],
  ],
  [
    "password without an uppercase letter",
    (b) => (b.password = b.confirmPassword = "abcdefg1!"),
    ["password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else"],
    ["password: 密碼必須包含大小寫字母、數字和特殊字元"],
  ],
  [
    "password without a special character",
    (b) => (b.password = b.confirmPassword = "Abcdefgh1"),
    ["password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else"],
    ["password: 密碼必須包含大小寫字母、數字和特殊字元"],
  ],
  [
    "password with a character outside the classes (#)",
    (b) => (b.password = b.confirmPassword = "Abcdefg1!#"),
    ["password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else"],
    ["password: 密碼必須包含大小寫字母、數字和特殊字元"],
  ],
  ["missing password", (b) => delete b.password, ["password: must not be blank"], ["password: 密碼不能為空"]],
  ["confirmPassword that differs", (b) => (b.confirmPassword = "Passw0rd?"), ["confirmPassword: must match password"], ["confirmPassword: 密碼與確認密碼不一致"]],
  ["blank confirmPassword", (b) => (b.confirmPassword = " "), ["confirmPassword: must not be blank"], ["confirmPassword: 確認密碼不能為空"]],
  ["age 17", (b) => (b.age = 17), ["age: must be at least 18"], ["age: 年齡不能小於 18 歲"]],
  ["age 121", (b) => (b.age = 121), ["age: must be at most 120"], ["age: 年齡不能大於 120 歲"]],
  ["missing age", (b) => delete b.age, ["age: must not be null"], ["age: 年齡不能為空"]],
  ["null age", (b) => (b.age = null), ["age: must not be null"], ["age: 年齡不能為空"]],
  ["birthDate today", (b) => (b.birthDate = day(0)), ["birthDate: must be a date in the past"], ["birthDate: 生日必須是過去的日期"]],
  ["birthDate tomorrow", (b) => (b.birthDate = day(1)), ["birthDate: must be a date in the past"], ["birthDate: 生日必須是過去的日期"]],
  ["birthDate that is no calendar date", (b) => (b.birthDate = "2001-02-30"), ["birthDate: must be a date (yyyy-MM-dd)"], ["birthDate: 生日格式不正確"]],
  [
    "phone of 21 characters",
    (b) => (b.phone = "+886 (2) 1234-5678 90"),
    ["phone: must contain only digits, spaces, +, -, ( and ), at most 20 characters"],
    ["phone: 電話號碼格式不正確"],
  ],
  ["phone with letters", (b) => (b.phone = "0912-ABC"), ["phone: must contain only digits, spaces, +, -, ( and ), at most 20 characters"], ["phone: 電話號碼格式不正確"]],
  ["salary 0", (b) => (b.salary = 0), ["salary: must be greater than 0"], ["salary: 薪資必須大於 0"]],
  ["negative salary", (b) => (b.salary = -1), ["salary: must be greater than 0"], ["salary: 薪資必須大於 0"]],
  [
    "salary 1000000.00",
    (b) => (b.salary = 1_000_000),
    ["salary: must be at most 999999.99", "salary: must have at most 6 integer and 2 fraction digits"],
    ["salary: 薪資不能超過 999,999.99", "salary: 薪資格式不正確"],
  ],
  ["salary with 3 fraction digits", (b) => (b.salary = 12.345), ["salary: must have at most 6 integer and 2 fraction digits"], ["salary: 薪資格式不正確"]],
  ["missing address", (b) => delete b.address, ["address: must not be null"], ["address: 地址資訊不能為空"]],
  ["blank city", (b) => (b.address!.city = ""), ["address.city: must not be blank"], ["address.city: 城市不能為空"]],
  ["blank district", (b) => (b.address!.district = " "), ["address.district: must not be blank"], ["address.district: 區域不能為空"]],
  ["blank detail", (b) => (b.address!.detail = "\t"), ["address.detail: must not be blank"], ["address.detail: 詳細地址不能為空"]],
  ["detail of 201 characters", (b) => (b.address!.detail = "d".repeat(201)), ["address.detail: must be at most 200 characters"], ["address.detail: 詳細地址不能超過 200 字元"]],
  ["zipCode of 4 digits", (b) => (b.address!.zipCode = "1234"), ["address.zipCode: must be exactly 5 digits"], ["address.zipCode: 郵遞區號必須是 5 位數字"]],
  ["zipCode of 6 digits", (b) => (b.address!.zipCode = "123456"), ["address.zipCode: must be exactly 5 digits"], ["address.zipCode: 郵遞區號必須是 5 位數字"]],
  ["no skills", (b) => (b.skills = []), ["skills: must have at least 1 entry"], ["skills: 至少要選擇一個技能"]],
  ["missing skills", (b) => delete b.skills, ["skills: must have at least 1 entry"], ["skills: 至少要選擇一個技能"]],
  ["4 skills", (b) => (b.skills = ["a", "b", "c", "d"]), ["skills: must have at most 3 entries"], ["skills: 最多只能選擇 3 個技能"]],
  ["a blank skill", (b) => (b.skills = ["Go", " "]), ["skills[1]: must not be blank"], ["skills[1]: 技能名稱不能為空"]],
];

const accepted: [rule: string, change: (b: Draft) => void][] = [
  ["name of 2 characters", (b) => (b.name = "Al")],
  ["name of 50 characters", (b) => (b.name = "n".repeat(50))],
  ["password of 8 characters", (b) => (b.password = b.confirmPassword = "Abcde1!x")],
  ["password of 20 characters", (b) => (b.password = b.confirmPassword = "Abcdefghij1!abcdefgh")],
  ["age 18", (b) => (b.age = 18)],
  ["age 120", (b) => (b.age = 120)],
  ["birthDate yesterday", (b) => (b.birthDate = day(-1))],
  ["no birthDate", (b) => delete b.birthDate],
  ["phone of 20 characters", (b) => (b.phone = "+886 (2) 1234-5678 9")],
  ["no phone", (b) => delete b.phone],
  ["salary 0.01", (b) => (b.salary = 0.01)],
  ["salary 999999.99", (b) => (b.salary = 999_999.99)],
  ["no salary", (b) => delete b.salary],
  ["detail of 200 characters", (b) => (b.address!.detail = "d".repeat(200))],
  ["no zipCode", (b) => delete b.address!.zipCode],
  ["null zipCode", (b) => (b.address!.zipCode = null)],
  ["one skill", (b) => (b.skills = ["Go"])],
  ["three skills", (b) => (b.skills = ["Go", "Rust", "Zig"])],
];

describe("registration rules at their boundaries", () => {
  scenarios(
    rejected.flatMap(([rule, change, en, zh]) => [
      { name: `rejects ${rule} (English)`, send: () => register(variant(change)), status: 400, failure: invalidBody(en) },
      { name: `rejects ${rule} (zh-TW)`, send: () => register(variant(change), "zh-TW"), status: 400, failure: invalidBody(zh, "資料驗證失敗") },
    ]),
  );

  test.each(accepted)("accepts %s", async (_, change) => {
    const res = await register(variant(change));
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
  });
});

test("every violation is reported at once, with dot paths", async () => {
  const res = await register(
    {
      name: "A",
      email: "nope",
      password: "short",
      confirmPassword: "other",
      age: 12,
      birthDate: day(3),
      phone: "call me",
      salary: 1234.567,
      address: { city: " ", district: "", detail: "x".repeat(201), zipCode: "ABCDE" },
      skills: ["ok", "", "b", "c"],
    },
    "zh-TW",
  );
  expectFailure(
    res,
    400,
    invalidBody(
      [
        "name: 姓名長度必須在 2-50 字元之間",
        "email: Email 格式不正確",
        "password: 密碼長度必須在 8-20 字元之間",
        "password: 密碼必須包含大小寫字母、數字和特殊字元",
        "age: 年齡不能小於 18 歲",
        "phone: 電話號碼格式不正確",
        "address.city: 城市不能為空",
        "address.district: 區域不能為空",
        "address.detail: 詳細地址不能超過 200 字元",
        "address.zipCode: 郵遞區號必須是 5 位數字",
        "skills: 最多只能選擇 3 個技能",
        "skills[1]: 技能名稱不能為空",
        "confirmPassword: 密碼與確認密碼不一致",
        "birthDate: 生日必須是過去的日期",
        "salary: 薪資格式不正確",
      ],
      "資料驗證失敗",
    ),
  );
});

test("an empty body names every required field", async () => {
  expectFailure(await register({}), 400, invalidBody(EMPTY_REGISTRATION_ERRORS));
});

describe("a successful registration", () => {
  test("answers 201 with the User (role USER) and writes everything in one go", async () => {
    const before = (await t.metrics.usersCreated.get()).values[0]?.value ?? 0;
    const body = { ...valid(), email: "Mixed.Case@Example.COM", skills: ["SQL", "Go", "sql"], salary: 1234.56 };
    const res = await register(body, "zh-TW");
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      message: "註冊成功",
      data: freshUser({ name: "Mei Lin", email: "mixed.case@example.com", phone: "+886 2 1234-5678" }),
      timestamp: expect.stringMatching(ISO_Z),
    });
    for (const secret of ["password", "passwordHash", "salary", "age", "confirmPassword"]) expect(res.text).not.toContain(`"${secret}"`);

    const id = res.body.data.id;
    const [user] = await t.db.select().from(users).where(eq(users.id, id));
    expect(user).toMatchObject({ email: "mixed.case@example.com", age: 30, salaryCents: 123456 });
    expect(user.passwordHash).toStartWith("$argon2id$");
    expect(await t.db.select().from(userProfiles).where(eq(userProfiles.userId, id))).toEqual([
      { userId: id, avatarUrl: null, bio: null, birthDate: "1995-04-01", address: "10617 台北市 大安區 復興南路一段 390 號" },
    ]);
    const skills = await t.db.select({ name: userSkills.name, nameKey: userSkills.nameKey }).from(userSkills).where(eq(userSkills.userId, id));
    expect(skills.sort((a, b) => a.nameKey.localeCompare(b.nameKey))).toEqual([
      { name: "Go", nameKey: "go" },
      { name: "SQL", nameKey: "sql" },
    ]);
    const mails = await t.db.select().from(outbox).where(eq(outbox.recipient, "mixed.case@example.com"));
    expect(mails.map((n) => n.kind)).toEqual(["WELCOME", "VERIFY_EMAIL"]);
    const audit = await t.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.subjectId, String(id)));
    expect(audit.map((a) => [a.action, a.subjectType])).toEqual([["USER_CREATED", "User"]]);
    expect((await t.metrics.usersCreated.get()).values[0].value).toBe(before + 1);
  });

  test("an address without zipCode is stored without it", async () => {
    const res = await register(variant((b) => delete b.address!.zipCode));
    const [profile] = await t.db.select().from(userProfiles).where(eq(userProfiles.userId, res.body.data.id));
    expect(profile.address).toBe("台北市 大安區 復興南路一段 390 號");
  });

  test("a taken e-mail (in any case) is 409 DUPLICATE_EMAIL and writes nothing", async () => {
    const first = valid();
    expect((await register(first)).status).toBe(201);
    const count = (await t.db.select().from(users)).length;
    const res = await register({ ...valid(), email: first.email.toUpperCase() }, "zh-TW");
    expectFailure(res, 409, { message: `Email 已存在: ${first.email}`, errorCode: "DUPLICATE_EMAIL" });
    expect((await t.db.select().from(users)).length).toBe(count);
  });

  test("concurrent registrations of one e-mail give one account; the unique index decides", async () => {
    const email = uniqueEmail("reg");
    const results = await Promise.all(Array.from({ length: 4 }, () => register({ ...valid(), email })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    expect((await t.db.select().from(users).where(eq(users.email, email))).length).toBe(1);
  });
});

describe("GET /api/auth/validate-email", () => {
  test("true with 'available' for a free address, false with 'exists' for a taken one", async () => {
    const taken = valid();
    await register(taken);
    const free = await t.request("GET", `/api/auth/validate-email?email=${encodeURIComponent(uniqueEmail("reg"))}`, { headers: { "accept-language": "zh-TW" } });
    expect(free.status).toBe(200);
    expect(free.body).toEqual({ success: true, message: "Email 可用", data: true, timestamp: expect.stringMatching(ISO_Z) });
    const used = await t.request("GET", `/api/auth/validate-email?email=${encodeURIComponent(taken.email.toUpperCase())}`);
    expect(used.body).toEqual({ success: true, message: "Email already exists", data: false, timestamp: expect.stringMatching(ISO_Z) });
    const usedZh = await t.request("GET", `/api/auth/validate-email?email=${encodeURIComponent(taken.email)}`, { headers: { "accept-language": "zh-TW" } });
    expect(usedZh.body.message).toBe("Email 已存在");
  });

  scenarios([
    { name: "a missing e-mail", send: () => t.request("GET", "/api/auth/validate-email"), status: 400, failure: invalidParams(["email: must not be blank"]) },
    {
      name: "a malformed e-mail",
      send: () => t.request("GET", "/api/auth/validate-email?email=not-an-address"),
      status: 400,
      failure: invalidParams(["email: must be a valid e-mail address"]),
    },
  ]);
});

describe("length before pattern", () => {
  test("a 1.8 MB e-mail is refused for its length alone (its pattern and format never read it)", async () => {
    const res = await register({ ...valid(), email: `${"a.".repeat(900_000)}@example.com` });
    expectFailure(res, 400, invalidBody(["email: must be at most 255 characters"]));
  });

  test("a value far over its limit is reported for its length only, one just over as the seed did (length and pattern), with every other violation", async () => {
    const far = "p".repeat(20_000);
    const res = await register({ ...valid(), email: `${"x@".repeat(20_000)}example.com`, password: far, name: "A" }, "zh-TW");
    expectFailure(
      res,
      400,
      invalidBody(
        ["name: 姓名長度必須在 2-50 字元之間", "email: Email 長度不能超過 255 字元", "password: 密碼長度必須在 8-20 字元之間", "confirmPassword: 密碼與確認密碼不一致"],
        "資料驗證失敗",
      ),
    );
    const near = await register({ ...valid(), email: `${"x@".repeat(130)}example.com`, password: "p".repeat(30), confirmPassword: "p".repeat(30) });
    expectFailure(
      near,
      400,
      invalidBody([
        "email: must be at most 255 characters",
        "email: must be a valid e-mail address",
        "password: must be between 8 and 20 characters",
        "password: must contain a lowercase letter, an uppercase letter, a digit and one of @$!%*?&, and nothing else",
      ]),
    );
  });

  test("every text field of every body and query with a pattern or format has a length limit", () => {
    const unbounded: string[] = [];
    const walk = (schema: Record<string, unknown> | undefined, at: string) => {
      if (!schema || typeof schema !== "object") return;
      // Elysia's own branch for a number or flag written as text (format integer, numeric, boolean) is no text field.
      const coerced = ["integer", "numeric", "number", "boolean"].includes(schema.format as string);
      if (schema.type === "string" && !coerced && (schema.pattern !== undefined || schema.format !== undefined) && typeof schema.maxLength !== "number") unbounded.push(at);
      for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, unknown>>)) walk(child, `${at}.${name}`);
      for (const branch of (schema.anyOf ?? []) as Record<string, unknown>[]) walk(branch, at);
      walk(schema.items as Record<string, unknown> | undefined, `${at}[]`);
    };
    const routes = t.app.routes;
    for (const route of routes) {
      const hooks = route.hooks as Record<string, Record<string, unknown> | undefined>;
      walk(hooks.body, `${route.method} ${route.path} body`);
      walk(hooks.query, `${route.method} ${route.path} query`);
    }
    expect(routes.length).toBeGreaterThan(50);
    expect(unbounded).toEqual([]);
  });
});

describe("per client address limits (injected clock)", () => {
  let clock = Date.now();
  let th: TestApp;
  beforeAll(async () => {
    th = await makeTestApp({ REGISTER_MAX_PER_IP: "3", EMAIL_CHECK_MAX_PER_IP: "4", TRUST_PROXY: "1" }, { now: () => clock });
  });
  afterAll(() => th.close());
  const from = (address: string, lang?: string) => ({ "x-forwarded-for": address, ...(lang ? { "accept-language": lang } : {}) });
  const signUp = (body: unknown, address: string, lang?: string) => th.request("POST", "/api/auth/register", { body, headers: from(address, lang) });
  const check = (email: string, address: string) => th.request("GET", `/api/auth/validate-email?email=${encodeURIComponent(email)}`, { headers: from(address) });

  test("registration: every attempt that passes validation counts, 409s included; then 429 with Retry-After until 10 minutes pass", async () => {
    const address = "203.0.113.10";
    const taken = valid();
    for (let i = 0; i < 5; i++) expect((await signUp({ ...valid(), age: 12 }, address)).status).toBe(400);
    expect((await signUp(taken, address)).status).toBe(201);
    clock += 60_000;
    expect((await signUp(taken, address)).status).toBe(409);
    expect((await signUp(valid(), address)).status).toBe(201);
    const late = valid();
    const blocked = await signUp(late, address, "zh-TW");
    expectFailure(blocked, 429, { message: "請求過於頻繁，請稍後再試", errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(9 * 60) } });
    // A taken address answers the same 429: no existence check past the limit.
    expectFailure(await signUp(taken, address), 429, { errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": String(9 * 60) } });
    expect(await th.db.select().from(users).where(eq(users.email, late.email))).toEqual([]);
    // Another address has its own count.
    expect((await signUp(late, "203.0.113.11")).status).toBe(201);
    clock += 9 * 60_000;
    expect((await signUp(valid(), address)).status).toBe(201);
  });

  test("validate-email: EMAIL_CHECK_MAX_PER_IP a minute per address, then 429 with Retry-After; the answer is the seed's until then", async () => {
    const address = "203.0.113.20";
    const taken = valid();
    expect((await signUp(taken, "203.0.113.21")).status).toBe(201);
    for (let i = 0; i < 2; i++) {
      const free = await check(uniqueEmail("free"), address);
      expect(free.body).toEqual({ success: true, message: "Email is available", data: true, timestamp: expect.stringMatching(ISO_Z) });
      const used = await check(taken.email, address);
      expect(used.body).toEqual({ success: true, message: "Email already exists", data: false, timestamp: expect.stringMatching(ISO_Z) });
    }
    clock += 30_000;
    expectFailure(await check(taken.email, address), 429, { message: "Too many requests, try again later", errorCode: "TOO_MANY_REQUESTS", headers: { "retry-after": "30" } });
    expect((await check(taken.email, "203.0.113.22")).body.data).toBe(false);
    clock += 30_000;
    expect((await check(taken.email, address)).body.data).toBe(false);
  });
});
