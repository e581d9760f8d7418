/**
 * Configuration: loadConfig fed plain objects (defaults, conversions, every bad value named),
 * then the command line as a user meets it: `bun src/main.ts …` with its exit codes.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError, loadConfig, type Env } from "../src/config";

const SECRET_64 = "s".repeat(64);

function problemsOf(env: Env): string[] {
  try {
    loadConfig(env, 4);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe("loadConfig", () => {
  test("zero configuration: the documented defaults", () => {
    const config = loadConfig({}, 4);
    expect(config).toMatchObject({
      port: 8080,
      host: "0.0.0.0",
      basePath: "",
      databaseUrl: "file:./data/usersvc.db",
      dataDir: "./data",
      fileStorage: "./data/uploads",
      maxUploadBytes: 10_485_760,
      maxBodyBytes: 2_097_152,
      logLevel: "info",
      logFormat: "json",
      loginMaxFailures: 5,
      loginMaxFailuresPerIp: 50,
      loginMaxFailuresGlobal: 50,
      emailCheckMaxPerIp: 60,
      registerMaxPerIp: 20,
      passkeyOptionsMaxPerIp: 60,
      workers: 1,
    });
    for (const key of [
      "jwtSecret",
      "databaseAuthToken",
      "databaseSyncUrl",
      "adminEmail",
      "adminPassword",
      "notifyWebhookUrl",
      "metricsToken",
      "orderPaymentTimeoutMs",
      "orderMaxPending",
      "tracing",
    ] as const) {
      expect(config[key]).toBeUndefined();
    }
    expect(Object.isFrozen(config)).toBe(true);
  });

  test("values are converted, trimmed, and an empty value means unset", () => {
    const config = loadConfig(
      {
        PORT: " 9090 ",
        HOST: "127.0.0.1",
        DATABASE_URL: "libsql://db.example.turso.io",
        DATABASE_AUTH_TOKEN: "tok",
        JWT_SECRET: SECRET_64,
        MAX_UPLOAD_BYTES: "1024",
        MAX_BODY_BYTES: "4096",
        LOG_LEVEL: "DEBUG",
        LOG_FORMAT: "pretty",
        NOTIFY_WEBHOOK_URL: "https://hooks.example.com/x",
        LOGIN_MAX_FAILURES: "3",
        LOGIN_MAX_FAILURES_PER_IP: "30",
        LOGIN_MAX_FAILURES_GLOBAL: "80",
        EMAIL_CHECK_MAX_PER_IP: "7",
        REGISTER_MAX_PER_IP: "3",
        PASSKEY_OPTIONS_MAX_PER_IP: "9",
        TRUST_PROXY: "2",
        METRICS_TOKEN: "m",
        ADMIN_EMAIL: "root@example.com",
        ADMIN_PASSWORD: "Admin@1234",
        BASE_PATH: "",
      },
      4,
    );
    expect(config).toMatchObject({
      port: 9090,
      host: "127.0.0.1",
      basePath: "",
      databaseUrl: "libsql://db.example.turso.io",
      databaseAuthToken: "tok",
      jwtSecret: SECRET_64,
      maxUploadBytes: 1024,
      maxBodyBytes: 4096,
      logLevel: "debug",
      logFormat: "pretty",
      notifyWebhookUrl: "https://hooks.example.com/x",
      loginMaxFailures: 3,
      loginMaxFailuresPerIp: 30,
      loginMaxFailuresGlobal: 80,
      emailCheckMaxPerIp: 7,
      registerMaxPerIp: 3,
      passkeyOptionsMaxPerIp: 9,
      trustProxy: 2,
      metricsToken: "m",
      adminEmail: "root@example.com",
      adminPassword: "Admin@1234",
    });
  });

  test.each([
    ["900", 900_000],
    ["45s", 45_000],
    ["30m", 1_800_000],
    ["2H", 7_200_000],
    ["1d", 86_400_000],
  ])("ORDER_PAYMENT_TIMEOUT %p is %p ms", (value, ms) => {
    expect(loadConfig({ ORDER_PAYMENT_TIMEOUT: value, ORDER_MAX_PENDING: "5" }, 4)).toMatchObject({ orderPaymentTimeoutMs: ms, orderMaxPending: 5 });
  });

  test("the session settings: defaults, and durations with units", () => {
    expect(loadConfig({}, 4)).toMatchObject({
      accessTokenTtlS: 18_000,
      sessionMaxAgeMs: 30 * 86_400_000,
      sessionIdleTimeoutMs: 7 * 86_400_000,
      sessionMaxPerUser: 50,
      refreshReuseGraceS: 10,
      legacyBearerRefresh: true,
      tokenSigning: "HS512",
      tokenKeyRotationDays: 30,
      tokenAudience: undefined,
    });
    expect(
      loadConfig(
        { ACCESS_TOKEN_TTL: "900", SESSION_MAX_AGE: "2d", SESSION_IDLE_TIMEOUT: "12h", SESSION_MAX_PER_USER: "3", REFRESH_REUSE_GRACE_S: "0", LEGACY_BEARER_REFRESH: "OFF" },
        4,
      ),
    ).toMatchObject({
      accessTokenTtlS: 900,
      sessionMaxAgeMs: 2 * 86_400_000,
      sessionIdleTimeoutMs: 12 * 3_600_000,
      sessionMaxPerUser: 3,
      refreshReuseGraceS: 0,
      legacyBearerRefresh: false,
    });
    expect(loadConfig({ TOKEN_SIGNING: "EdDSA", TOKEN_KEY_ROTATION_DAYS: "7", TOKEN_AUDIENCE: "api.example.com" }, 4)).toMatchObject({
      tokenSigning: "EdDSA",
      tokenKeyRotationDays: 7,
      tokenAudience: "api.example.com",
    });
  });

  test("the API key settings: defaults, and set", () => {
    expect(loadConfig({}, 4)).toMatchObject({ apiKeyMaxPerUser: 20, apiKeyRateLimit: 600 });
    expect(loadConfig({ API_KEY_MAX_PER_USER: "5", API_KEY_RATE_LIMIT: "60" }, 4)).toMatchObject({ apiKeyMaxPerUser: 5, apiKeyRateLimit: 60 });
  });

  test("second factors: RP_ID, RP_ORIGINS and MFA_REQUIRED_ROLES (defaults: none)", () => {
    expect(loadConfig({}, 4)).toMatchObject({ rpId: undefined, rpOrigins: [], mfaRequiredRoles: [] });
    expect(loadConfig({ RP_ID: "example.com", RP_ORIGINS: "https://id.example.com,https://app.example.com", MFA_REQUIRED_ROLES: "admin, USER" }, 4)).toMatchObject({
      rpId: "example.com",
      rpOrigins: ["https://id.example.com", "https://app.example.com"],
      mfaRequiredRoles: ["ADMIN", "USER"],
    });
  });

  test.each(["127.0.0.1", "::", "::1", "localhost", "svc-1.internal.example.com"])("HOST %p is accepted", (host) => {
    expect(loadConfig({ HOST: host }, 4).host).toBe(host);
  });

  test("DATA_DIR moves the database and uploads with it", () => {
    expect(loadConfig({ DATA_DIR: "/var/lib/usersvc" }, 4)).toMatchObject({
      databaseUrl: "file:/var/lib/usersvc/usersvc.db",
      fileStorage: "/var/lib/usersvc/uploads",
    });
  });

  test.each([
    ["svc", "/svc"],
    ["/svc", "/svc"],
    ["/svc/", "/svc"],
    ["/api/v1/", "/api/v1"],
    ["/", ""],
    ["///", ""],
  ])("BASE_PATH %p becomes %p", (given, expected) => {
    expect(loadConfig({ BASE_PATH: given }, 4).basePath).toBe(expected);
  });

  test.each([
    ["PORT", "abc"],
    ["PORT", "-1"],
    ["PORT", "65536"],
    ["PORT", "80.5"],
    ["HOST", "bad host"],
    ["HOST", "999.1.1.1"],
    ["HOST", "-leading.dash"],
    ["BASE_PATH", "/has space"],
    ["BASE_PATH", "/a?b"],
    ["BASE_PATH", "/api//v1"],
    ["DATABASE_URL", "postgres://db/x"],
    ["DATABASE_URL", "not a url"],
    ["DATABASE_SYNC_URL", "ftp://primary"],
    ["JWT_SECRET", "s".repeat(63)],
    ["DATA_ENCRYPTION_KEY", Buffer.alloc(31).toString("base64")],
    ["DATA_ENCRYPTION_KEY", "not base64 at all!"],
    ["DATA_ENCRYPTION_KEY_PREVIOUS", `${Buffer.alloc(32, 1).toString("base64")},short`],
    ["BACKUP_ENCRYPTION_KEY", Buffer.alloc(16).toString("base64")],
    ["MAX_UPLOAD_BYTES", "0"],
    ["MAX_UPLOAD_BYTES", "10MB"],
    ["MAX_BODY_BYTES", "100"],
    ["MAX_BODY_BYTES", "1e6"],
    ["LOG_LEVEL", "verbose"],
    ["LOG_FORMAT", "xml"],
    ["NOTIFY_WEBHOOK_URL", "ftp://hooks"],
    ["LOGIN_MAX_FAILURES", "0"],
    ["LOGIN_MAX_FAILURES_PER_IP", "many"],
    ["LOGIN_MAX_FAILURES_GLOBAL", "0"],
    ["TRUST_PROXY", "yes"],
    ["TRUST_PROXY", "11"],
    ["WORKERS", "0"],
    ["WORKERS", "65"],
    ["WORKERS", "two"],
    ["SMTP_URL", "http://mail.example.com"],
    ["MAIL_FROM", "not an address"],
    ["PUBLIC_URL", "id.example.com"],
    ["NOTIFY_WEBHOOK_SECRET", "plain-secret"],
    ["NOTIFY_WEBHOOK_SECRET", "whsec_c2hvcnQ="],
    ["REQUIRE_EMAIL_VERIFICATION", "yes"],
    ["RESET_MAX_REQUESTS", "0"],
    ["RESET_MAX_REQUESTS_PER_IP", "lots"],
    ["EMAIL_CHECK_MAX_PER_IP", "0"],
    ["REGISTER_MAX_PER_IP", "many"],
    ["PASSKEY_OPTIONS_MAX_PER_IP", "0"],
    ["PASSWORD_POLICY", "nist"],
    ["ACCESS_TOKEN_TTL", "5"],
    ["SESSION_MAX_AGE", "forever"],
    ["SESSION_IDLE_TIMEOUT", "0"],
    ["SESSION_MAX_PER_USER", "0"],
    ["API_KEY_MAX_PER_USER", "0"],
    ["API_KEY_RATE_LIMIT", "many"],
    ["REFRESH_REUSE_GRACE_S", "-1"],
    ["LEGACY_BEARER_REFRESH", "maybe"],
    ["TOKEN_SIGNING", "RS256"],
    ["TOKEN_KEY_ROTATION_DAYS", "0"],
    ["RP_ID", "https://id.example.com"],
    ["RP_ORIGINS", "id.example.com"],
    ["MFA_REQUIRED_ROLES", "OWNER"],
    ["ORDER_PAYMENT_TIMEOUT", "soon"],
    ["ORDER_PAYMENT_TIMEOUT", "0"],
    ["ORDER_PAYMENT_TIMEOUT", "30 minutes"],
    ["ORDER_PAYMENT_TIMEOUT", "400d"],
    ["ORDER_MAX_PENDING", "0"],
    ["ORDER_MAX_PENDING", "few"],
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"],
    ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://collector:4317"],
    ["OTEL_EXPORTER_OTLP_HEADERS", "api-key"],
    ["OTEL_EXPORTER_OTLP_HEADERS", "api-key=%zz"],
    ["OTEL_TRACES_SAMPLER", "sometimes"],
    ["OTEL_TRACES_SAMPLER_ARG", "1.5"],
    ["OTEL_TRACES_SAMPLER_ARG", "half"],
  ])("%s=%p is refused, naming the variable", (variable, value) => {
    const problems = problemsOf({ [variable]: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toStartWith(`${variable} `);
    expect(problems[0]).not.toContain("\n");
  });

  test("tracing: off without an OTLP endpoint; the traces URL from OTEL_EXPORTER_OTLP_ENDPOINT, or the traces endpoint as given; the OTEL_* settings", () => {
    expect(loadConfig({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" }, 4).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }, 4).tracing).toEqual({
      tracesUrl: "http://collector:4318/v1/traces",
      headers: {},
      serviceName: "usersvc",
      sampler: "parentbased_always_on",
      samplerRatio: 1,
    });
    expect(
      loadConfig(
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://otlp.example.com/api/traces",
          OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=abc, Authorization=Basic%20dTpw",
          OTEL_SERVICE_NAME: "usersvc-eu",
          OTEL_TRACES_SAMPLER: "ParentBased_TraceIdRatio",
          OTEL_TRACES_SAMPLER_ARG: "0.25",
        },
        4,
      ).tracing,
    ).toEqual({
      tracesUrl: "https://otlp.example.com/api/traces",
      headers: { "x-api-key": "abc", Authorization: "Basic dTpw" },
      serviceName: "usersvc-eu",
      sampler: "parentbased_traceidratio",
      samplerRatio: 0.25,
    });
  });

  test("e-mail settings: SMTP_URL, MAIL_FROM with a name, PUBLIC_URL without its trailing slash, a whsec_ secret", () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    const config = loadConfig(
      {
        SMTP_URL: "smtps://u:p@smtp.example.com:465",
        MAIL_FROM: "Accounts <accounts@id.example.com>",
        PUBLIC_URL: "https://id.example.com/",
        NOTIFY_WEBHOOK_SECRET: secret,
        REQUIRE_EMAIL_VERIFICATION: "TRUE",
      },
      4,
    );
    expect(config).toMatchObject({
      smtpUrl: "smtps://u:p@smtp.example.com:465",
      mailFrom: "Accounts <accounts@id.example.com>",
      publicUrl: "https://id.example.com",
      notifyWebhookSecret: secret,
      requireEmailVerification: true,
    });
    expect(loadConfig({}, 4)).toMatchObject({ mailFrom: "usersvc <no-reply@localhost>", requireEmailVerification: false, resetMaxRequests: 5, resetMaxRequestsPerIp: 20 });
  });

  test("PASSWORD_POLICY: seed by default, strict on request; HIBP_RANGE_URL an http(s) URL, only with strict", () => {
    expect(loadConfig({}, 4)).toMatchObject({ passwordPolicy: "seed", hibpRangeUrl: undefined });
    const range = "https://api.pwnedpasswords.com/range/";
    expect(loadConfig({ PASSWORD_POLICY: "STRICT", HIBP_RANGE_URL: range }, 4)).toMatchObject({ passwordPolicy: "strict", hibpRangeUrl: range });
    expect(problemsOf({ PASSWORD_POLICY: "strict", HIBP_RANGE_URL: "ftp://range.example.com/" })).toEqual([
      'HIBP_RANGE_URL must be a http: / https: URL (got "ftp://range.example.com/")',
    ]);
    expect(problemsOf({ HIBP_RANGE_URL: range })).toEqual(["HIBP_RANGE_URL needs PASSWORD_POLICY=strict (the seed policy checks the seed's rules alone)"]);
  });

  test("DATA_ENCRYPTION_KEY is 32 bytes in base64; DATA_ENCRYPTION_KEY_PREVIOUS a list of such keys", () => {
    const key = Buffer.alloc(32, 7);
    const old = Buffer.alloc(32, 9);
    const config = loadConfig({ DATA_ENCRYPTION_KEY: key.toString("base64"), DATA_ENCRYPTION_KEY_PREVIOUS: ` ${old.toString("base64")} ,` }, 4);
    expect(config.dataEncryptionKey).toEqual(key);
    expect(config.dataEncryptionKeysPrevious).toEqual([old]);
    expect(loadConfig({}, 4).dataEncryptionKey).toBeUndefined();
  });

  test("BACKUP_ENCRYPTION_KEY is 32 bytes in base64; unset, archives are not encrypted", () => {
    const key = Buffer.alloc(32, 5);
    expect(loadConfig({ BACKUP_ENCRYPTION_KEY: key.toString("base64") }, 4).backupEncryptionKey).toEqual(key);
    expect(loadConfig({}, 4).backupEncryptionKey).toBeUndefined();
  });

  test("JWT_SECRET is measured in bytes: 64 ASCII pass, 63 do not, 22 CJK characters (66 bytes) pass", () => {
    expect(loadConfig({ JWT_SECRET: SECRET_64 }, 4).jwtSecret).toBe(SECRET_64);
    expect(problemsOf({ JWT_SECRET: "s".repeat(63) })).toEqual(["JWT_SECRET must be at least 64 bytes for HS512"]);
    expect(loadConfig({ JWT_SECRET: "密".repeat(22) }, 4).jwtSecret).toBe("密".repeat(22));
  });

  test("FILE_STORAGE: a folder, or s3://bucket/prefix with a valid bucket name", () => {
    expect(loadConfig({ FILE_STORAGE: "/srv/files" }, 4).fileStorage).toBe("/srv/files");
    expect(problemsOf({ FILE_STORAGE: "s3://Bad_Bucket" }).some((p) => p.startsWith("FILE_STORAGE must be a folder or s3://bucket/prefix"))).toBe(true);
  });

  test("S3 settings: S3_* first, else AWS_*; an s3:// FILE_STORAGE needs keys", () => {
    const s3 = (env: Env) => loadConfig({ FILE_STORAGE: "s3://bucket/files", ...env }, 4).s3;
    expect(s3({ S3_ENDPOINT: "http://127.0.0.1:9000", S3_REGION: "eu-west-1", S3_ACCESS_KEY_ID: "k", S3_SECRET_ACCESS_KEY: "s", AWS_ACCESS_KEY_ID: "other" })).toEqual({
      endpoint: "http://127.0.0.1:9000",
      region: "eu-west-1",
      accessKeyId: "k",
      secretAccessKey: "s",
      sessionToken: undefined,
    });
    expect(
      s3({ AWS_ENDPOINT_URL: "https://s3.example.com", AWS_DEFAULT_REGION: "us-west-2", AWS_ACCESS_KEY_ID: "ak", AWS_SECRET_ACCESS_KEY: "as", AWS_SESSION_TOKEN: "t" }),
    ).toEqual({
      endpoint: "https://s3.example.com",
      region: "us-west-2",
      accessKeyId: "ak",
      secretAccessKey: "as",
      sessionToken: "t",
    });
    expect(problemsOf({ FILE_STORAGE: "s3://bucket/files" })).toEqual([
      "FILE_STORAGE=s3://… needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
    ]);
    expect(problemsOf({ S3_ENDPOINT: "ftp://x" })).toEqual(['S3_ENDPOINT must be a http: / https: URL (got "ftp://x")']);
  });

  test("ADMIN_EMAIL and ADMIN_PASSWORD come together", () => {
    expect(problemsOf({ ADMIN_EMAIL: "root@example.com" })).toEqual(["ADMIN_EMAIL and ADMIN_PASSWORD must be set together"]);
    expect(problemsOf({ ADMIN_PASSWORD: "Admin@1234" })).toEqual(["ADMIN_EMAIL and ADMIN_PASSWORD must be set together"]);
    expect(problemsOf({ ADMIN_EMAIL: "root", ADMIN_PASSWORD: "Admin@1234" })).toEqual(['ADMIN_EMAIL must be an e-mail address (got "root")']);
  });

  test("DATABASE_SYNC_URL needs a file: DATABASE_URL", () => {
    expect(loadConfig({ DATABASE_SYNC_URL: "libsql://primary.example.com" }, 4).databaseSyncUrl).toBe("libsql://primary.example.com");
    expect(problemsOf({ DATABASE_URL: "https://db.example.com", DATABASE_SYNC_URL: "libsql://primary.example.com" })[0]).toStartWith("DATABASE_SYNC_URL");
  });

  test("DATABASE_SYNC_INTERVAL: a duration, milliseconds too; 1 s by default", () => {
    expect(loadConfig({}, 4).databaseSyncIntervalMs).toBe(1000);
    expect(loadConfig({ DATABASE_SYNC_INTERVAL: "500ms" }, 4).databaseSyncIntervalMs).toBe(500);
    expect(loadConfig({ DATABASE_SYNC_INTERVAL: "2m" }, 4).databaseSyncIntervalMs).toBe(120_000);
    expect(loadConfig({}, 4).databaseMaxStalenessMs).toBe(60_000);
    expect(loadConfig({ DATABASE_MAX_STALENESS: "5m" }, 4).databaseMaxStalenessMs).toBe(300_000);
    const replica = { DATABASE_URL: "file:./edge.db", DATABASE_SYNC_URL: "libsql://primary.example.com" };
    expect(problemsOf({ ...replica, DATABASE_SYNC_INTERVAL: "2m", DATABASE_MAX_STALENESS: "60s" })[0]).toStartWith("DATABASE_MAX_STALENESS must be longer");
    expect(loadConfig({ ...replica, DATABASE_SYNC_INTERVAL: "2m", DATABASE_MAX_STALENESS: "5m" }, 4).databaseMaxStalenessMs).toBe(300_000);
    expect(problemsOf({ DATABASE_SYNC_INTERVAL: "10ms" })[0]).toStartWith("DATABASE_SYNC_INTERVAL must be a duration");
  });

  test("WORKERS: a number, or auto for one per core", () => {
    expect(loadConfig({ WORKERS: "3" }, 8).workers).toBe(3);
    expect(loadConfig({ WORKERS: "auto" }, 8).workers).toBe(8);
    expect(loadConfig({ WORKERS: "AUTO" }, 2).workers).toBe(2);
    expect(loadConfig({ WORKERS: "auto" }, 0).workers).toBe(1);
  });

  test("CORS_ORIGINS: exact origins, comma-separated; HSTS_MAX_AGE: seconds", () => {
    expect(loadConfig({}, 1).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: " https://app.example.com , http://localhost:5173" }, 1).corsOrigins).toEqual(["https://app.example.com", "http://localhost:5173"]);
    for (const bad of ["app.example.com", "https://app.example.com/", "https://app.example.com/path", "*"]) {
      expect(problemsOf({ CORS_ORIGINS: bad }), bad).toEqual([
        expect.stringContaining(`CORS_ORIGINS must list origins such as https://app.example.com, comma-separated (got "${bad}")`),
      ]);
    }
    expect(loadConfig({}, 1).hstsMaxAge).toBeUndefined();
    expect(loadConfig({ HSTS_MAX_AGE: "63072000" }, 1).hstsMaxAge).toBe(63072000);
    expect(problemsOf({ HSTS_MAX_AGE: "1y" })).toEqual([expect.stringContaining("HSTS_MAX_AGE must be a whole number")]);
  });

  test("every bad variable is reported at once", () => {
    const problems = problemsOf({ PORT: "x", LOG_LEVEL: "loud", JWT_SECRET: "short", MAX_BODY_BYTES: "-5" });
    expect(problems.map((p) => p.split(" ")[0]).toSorted()).toEqual(["JWT_SECRET", "LOG_LEVEL", "MAX_BODY_BYTES", "PORT"]);
  });

  test("a secret never appears in a problem", () => {
    expect(problemsOf({ JWT_SECRET: "hunter2-short" }).join(" ")).not.toContain("hunter2");
  });
});

// Each command-line case starts bun on the source: seconds apiece on a busy machine.
setDefaultTimeout(30_000);

describe("the command line (bun src/main.ts)", () => {
  const main = resolve(import.meta.dir, "../src/main.ts");
  const cwd = mkdtempSync(join(tmpdir(), "usersvc-cli-"));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  /** Runs the CLI in an empty folder with only the given variables (and PATH), bounded in time. */
  async function cli(args: string[], env: Env = {}) {
    const proc = Bun.spawn([process.execPath, main, ...args], {
      cwd,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: "warn", ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill(9), 20_000);
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    return { code, stdout, stderr };
  }

  test("--help and -h: usage on stdout, exit 0", async () => {
    for (const flag of ["--help", "-h"]) {
      const { code, stdout } = await cli([flag]);
      expect(code).toBe(0);
      expect(stdout).toContain("Usage:");
      for (const command of ["migrate", "admin create", "token --email", "--version"]) expect(stdout).toContain(command);
    }
  });

  test("--version: name and version, exit 0", async () => {
    const { code, stdout } = await cli(["--version"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^usersvc \d+\.\d+\.\d+/);
  });

  test.each([
    [["--bogus"], "--bogus"],
    [["frobnicate"], "frobnicate"],
    [["serve", "extra"], "extra"],
    [["admin"], "admin"],
    [["admin", "create", "--email", "a@b.co"], "--password"],
    [["token"], "--email"],
    [["admin", "create", "--email", "root", "--password", "Admin@1234"], "--email"],
    [["--port"], "--port"],
    [["-x"], "-x"],
    [["--help=yes"], "--help"],
  ])("usage error %j: one line in our words naming %s, exit 2", async (args, named) => {
    const { code, stderr, stdout } = await cli(args);
    expect(code).toBe(2);
    expect(stderr).toStartWith("usersvc: ");
    expect(stderr).toContain(named);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr.match(/see usersvc --help/g)).toHaveLength(1);
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(stderr).not.toMatch(/Unknown option|argument missing|positional/); // node's parseArgs text
    expect(stdout).toBe("");
  });

  test("flag errors read as ours", async () => {
    expect((await cli(["--bogus"])).stderr).toBe("usersvc: unknown flag --bogus (see usersvc --help)\n");
    expect((await cli(["token", "--email"])).stderr).toBe("usersvc: --email needs a value (see usersvc --help)\n");
    expect((await cli(["frobnicate"])).stderr).toBe('usersvc: unknown command "frobnicate" (see usersvc --help)\n');
  });

  test("admin create prepares the data folder as serve does; token prints exactly one line, a JWT; logs go to stderr", async () => {
    const dataDir = join(cwd, "scripted");
    try {
      const created = await cli(["admin", "create", "--email", "root@example.com", "--password", "Admin@12345"], { DATA_DIR: dataDir });
      expect(created.code).toBe(0);
      expect(created.stdout).toMatch(/^created admin root@example.com \(id \d+\)\n$/);
      // The generated-key warning is a log line: on stderr, never in the captured result.
      expect(created.stderr).toContain("JWT_SECRET is not set");
      for (const made of ["usersvc.db", "jwt.secret", "uploads"]) expect(existsSync(join(dataDir, made)), made).toBe(true);

      const token = await cli(["token", "--email", "root@example.com"], { DATA_DIR: dataDir });
      expect(token.code).toBe(0);
      expect(token.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("token for an unknown user: nothing on stdout, the reason on stderr, exit 1", async () => {
    const dataDir = join(cwd, "fresh-token");
    try {
      const token = await cli(["token", "--email", "nobody@example.com"], { DATA_DIR: dataDir });
      expect(token.code).toBe(1);
      expect(token.stdout).toBe("");
      expect(token.stderr).toContain("no active user with e-mail nobody@example.com");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("a port already taken: the start fails with a clear line instead of sharing it", async () => {
    // The other listener allows SO_REUSEPORT: only a server that does not ask for it fails here.
    const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: true, fetch: () => new Response("other") });
    try {
      const { code, stderr } = await cli([], { PORT: String(taken.port), HOST: "127.0.0.1", DATA_DIR: join(cwd, "taken") });
      expect(code).toBe(1);
      expect(stderr).toContain(`usersvc: cannot listen on 127.0.0.1:${taken.port}: `);
      expect(stderr).toContain(`port ${taken.port} in use`);
    } finally {
      await taken.stop(true);
      rmSync(join(cwd, "taken"), { recursive: true, force: true });
    }
  });

  test.each([
    [{ PORT: "abc" }, [], "PORT"],
    [{}, ["--port", "99999"], "PORT"],
    [{ JWT_SECRET: "too-short" }, [], "JWT_SECRET"],
    [{ LOG_LEVEL: "chatty" }, ["migrate"], "LOG_LEVEL"],
    [{ ADMIN_EMAIL: "root@example.com" }, [], "ADMIN_EMAIL"],
    // Sign-in with other providers: each malformed setting named, before anything starts.
    [{ OIDC_PROVIDERS: "corp,bad name" }, [], "OIDC_PROVIDERS"],
    [{ OIDC_PROVIDERS: "corp", OIDC_CORP_ISSUER: "https://id.example.com" }, [], "OIDC_CORP_CLIENT_ID"],
    [{ OIDC_PROVIDERS: "corp", OIDC_CORP_CLIENT_ID: "usersvc" }, [], "OIDC_CORP_ISSUER"],
    [{ OIDC_PROVIDERS: "corp", OIDC_CORP_CLIENT_ID: "usersvc", OIDC_CORP_ISSUER: "http://id.example.com" }, [], "OIDC_CORP_ISSUER"],
    [{ OIDC_PROVIDERS: "microsoft", OIDC_MICROSOFT_CLIENT_ID: "usersvc" }, [], "OIDC_MICROSOFT_TENANT"],
    [{ OIDC_PROVIDERS: "microsoft", OIDC_MICROSOFT_CLIENT_ID: "usersvc", OIDC_MICROSOFT_TENANT: "common" }, [], "OIDC_MICROSOFT_TENANTS"],
    [{ OIDC_PROVIDERS: "google", OIDC_GOOGLE_CLIENT_ID: "usersvc", OIDC_GOOGLE_TRUST_EMAIL: "yes" }, [], "OIDC_GOOGLE_TRUST_EMAIL"],
    [{ OIDC_PROVIDERS: "google", OIDC_GOOGLE_CLIENT_ID: "usersvc", OIDC_GOOGLE_KEEP_TOKENS: "always" }, [], "OIDC_GOOGLE_KEEP_TOKENS"],
    [{ OIDC_PROVIDERS: "github", OIDC_GITHUB_CLIENT_ID: "usersvc", OIDC_GITHUB_API_URL: "ftp://api.example.com" }, [], "OIDC_GITHUB_API_URL"],
    [{ OIDC_RETURN_URLS: "https://app.example.com/api/back" }, [], "OIDC_RETURN_URLS"],
  ])("bad configuration %j %j: one line naming %s, exit 2, nothing created", async (env, args, variable) => {
    const { code, stderr } = await cli(args as string[], env as Env);
    expect(code).toBe(2);
    const lines = stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toStartWith("usersvc: invalid configuration: ");
    expect(lines[0]).toContain(variable);
    expect(existsSync(join(cwd, "data"))).toBe(false);
  });
});
