/**
 * The one reader of the environment. `loadConfig` takes the variables as a plain object
 * (process.env merged with `--flags` by the CLI), fills defaults, converts types and
 * reports every bad key at once, so a misconfigured start stops before the database opens.
 */
import { isIP } from "node:net";
import type { Cron } from "croner";
import { type ProviderSettingKey, providerSettingName, type SettingName } from "./settings";

/** croner, loaded where a BACKUP_SCHEDULE is read: a server without one never evaluates it (npm run bench -- --idle). */
export const loadCron = (): typeof Cron => (require("croner") as typeof import("croner")).Cron;

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

export interface Config {
  readonly port: number;
  readonly host: string;
  /** Context-path prefix such as "/svc"; "" serves at the root. */
  readonly basePath: string;
  readonly databaseUrl: string;
  readonly databaseAuthToken?: string;
  readonly databaseSyncUrl?: string;
  /** An embedded replica pulls from its primary this often (and after each write of its own). */
  readonly databaseSyncIntervalMs: number;
  /** An embedded replica that has not reached its primary for this long refuses authenticated requests (503). */
  readonly databaseMaxStalenessMs: number;
  /** How a file: database is opened: bun:sqlite (native, the default) or @libsql/client. */
  readonly databaseDriver: "native" | "libsql";
  /** How long a unit of work retries while another process holds the write lock, then 503. */
  readonly databaseBusyTimeoutMs: number;
  /** HS512 key (UTF-8 bytes). Undefined: main.ts generates one and keeps it in dataDir. */
  readonly jwtSecret?: string;
  /** AES-256-GCM key for secrets at rest (32 bytes). Undefined: main.ts generates one and keeps it in dataDir. */
  readonly dataEncryptionKey?: Buffer;
  /** Earlier DATA_ENCRYPTION_KEYs: they only open what was sealed under them, until `usersvc keys rewrap`. */
  readonly dataEncryptionKeysPrevious: readonly Buffer[];
  readonly dataDir: string;
  /** A folder, or s3://bucket/prefix. */
  readonly fileStorage: string;
  /** For an s3:// FILE_STORAGE: from S3_* or else AWS_* variables (Bun's client defaults the rest). */
  readonly s3: { endpoint?: string; region?: string; accessKeyId?: string; secretAccessKey?: string; sessionToken?: string };
  readonly maxUploadBytes: number;
  readonly maxBodyBytes: number;
  readonly adminEmail?: string;
  readonly adminPassword?: string;
  readonly logLevel: LogLevel;
  readonly logFormat: "json" | "pretty";
  readonly notifyWebhookUrl?: string;
  /** whsec_<base64>: webhook deliveries are signed (Standard Webhooks). */
  readonly notifyWebhookSecret?: string;
  /** smtp:// or smtps:// URL; unset: no e-mail. */
  readonly smtpUrl?: string;
  readonly mailFrom: string;
  /** The service's public base URL (no trailing slash), for links in e-mails. */
  readonly publicUrl?: string;
  /** An unverified user's login gets 403 EMAIL_NOT_VERIFIED. */
  readonly requireEmailVerification: boolean;
  /** Password-reset requests allowed per hour for one e-mail, and from one client address. */
  readonly resetMaxRequests: number;
  readonly resetMaxRequestsPerIp: number;
  /** seed: the seed's password rules alone; strict: NIST SP 800-63B (src/security/password-policy.ts). */
  readonly passwordPolicy: "seed" | "strict";
  /** Have I Been Pwned's range API (…/range/), asked by k-anonymity under the strict policy; undefined: not asked. */
  readonly hibpRangeUrl?: string;
  readonly loginMaxFailures: number;
  readonly loginMaxFailuresPerIp: number;
  readonly loginMaxFailuresGlobal: number;
  readonly emailCheckMaxPerIp: number;
  readonly registerMaxPerIp: number;
  readonly passkeyOptionsMaxPerIp: number;
  /** Reverse proxies of ours in front of the service: how many X-Forwarded-For hops to believe. */
  readonly trustProxy: number;
  readonly metricsToken?: string;
  /** Processes sharing the port (SO_REUSEPORT); "auto" resolves to the core count. */
  readonly workers: number;
  /** Seconds browsers keep to HTTPS (Strict-Transport-Security); undefined sends no HSTS. */
  readonly hstsMaxAge?: number;
  /** Browser origins (scheme://host[:port]) allowed cross-origin calls; empty allows none. */
  readonly corsOrigins: readonly string[];
  /** Where backups go: a folder, or s3://bucket/prefix (with the same S3 settings as file storage). */
  readonly backupDir: string;
  /** A cron expression (UTC) for scheduled backups; undefined: none. */
  readonly backupSchedule?: string;
  /** How many scheduled archives to keep (manual ones are never pruned). */
  readonly backupKeep: number;
  /** AES-256-GCM key (32 bytes) that encrypts whole archives, which then carry the kept keys; undefined: archives carry no key. */
  readonly backupEncryptionKey?: Buffer;
  /** A PENDING order older than this (ms) fails with "payment timeout", its stock released; undefined: never. */
  readonly orderPaymentTimeoutMs?: number;
  /** PENDING orders a user may hold at once (409 TOO_MANY_PENDING_ORDERS beyond); undefined: any number. */
  readonly orderMaxPending?: number;
  /** Seconds an access token lives (its exp; the login answer's expiresIn). */
  readonly accessTokenTtlS: number;
  /** A session's absolute lifetime, and how long it lives without a request or refresh (ms). */
  readonly sessionMaxAgeMs: number;
  readonly sessionIdleTimeoutMs: number;
  /** Open sessions one user may hold: the least recently used ends. */
  readonly sessionMaxPerUser: number;
  /** Seconds a rotated refresh token is accepted once more (a lost answer) before its replay ends the session. */
  readonly refreshReuseGraceS: number;
  /** OAUTH_SERVER=on: the OpenID Provider's endpoints (features/oauth-server); its issuer is PUBLIC_URL with BASE_PATH. */
  readonly oauthServer: boolean;
  readonly oauthAccessTokenTtlS: number;
  readonly oauthDynamicRegistration: boolean;
  readonly oauthRegisterMaxPerIp: number;
  /** Whether a session token refreshes by the bearer alone (the old clients' refresh); never once its session has used its refresh token. */
  readonly legacyBearerRefresh: boolean;
  /** API keys one user may hold. */
  readonly apiKeyMaxPerUser: number;
  /** Requests a minute one API key may make, counted per instance (429 beyond). */
  readonly apiKeyRateLimit: number;
  /** How access tokens are signed: HS512 with JWT_SECRET (the seed's), or an asymmetric key kept in the database and published as JWKS. */
  readonly tokenSigning: "HS512" | "EdDSA" | "ES256";
  /** Days an asymmetric key signs before the next one takes over. */
  readonly tokenKeyRotationDays: number;
  /** The `aud` claim tokens carry and must carry; undefined: none. */
  readonly tokenAudience?: string;
  /** The WebAuthn relying party's id (a host name), overriding PUBLIC_URL's host. */
  readonly rpId?: string;
  /** Origins a passkey ceremony may come from, overriding PUBLIC_URL's origin. */
  readonly rpOrigins: readonly string[];
  /** Roles whose members must have a second factor: without one they sign in to an enrol-only session. */
  readonly mfaRequiredRoles: readonly string[];
  /** Traces over OTLP/HTTP (src/tracing); undefined without OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT: nothing is loaded. */
  readonly tracing?: TracingConfig;
  /** Sign-in with other providers (OIDC_PROVIDERS); undefined without one: no provider code is loaded. */
  readonly federation?: FederationConfig;
  /** Pages elsewhere a federated sign-in may return to (OIDC_RETURN_URLS), exactly: origin and path. */
  readonly oidcReturnUrls: readonly string[];
  /** Federated sign-ins started a minute per client address. */
  readonly oidcStartMaxPerIp: number;
}

/** One provider of OIDC_PROVIDERS, from its OIDC_<NAME>_* settings (presets filled in). */
export interface ProviderConfig {
  /** Lower-case, as in the routes: /api/auth/oidc/{name}/start. */
  readonly name: string;
  readonly label: string;
  /** oidc: discovery, ID tokens; github: OAuth 2 and GitHub's user APIs. */
  readonly kind: "oidc" | "github";
  /** The issuer discovered (oidc), or GitHub's web URL (its identities' issuer). */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly scopes: string;
  readonly trustEmail: boolean;
  /** OIDC_<NAME>_KEEP_TOKENS: the provider's tokens are kept, sealed, with the identity. */
  readonly keepTokens: boolean;
  /** microsoft: the tenant ids whose users may sign in (their ID token's `tid`). */
  readonly tenants?: readonly string[];
  /** github: its API's base URL. */
  readonly apiUrl?: string;
}

export interface FederationConfig {
  readonly providers: readonly ProviderConfig[];
  /** OIDC_SIGNUP: a provider's sign-in may create an account. */
  readonly signup: boolean;
}

/** OTEL_TRACES_SAMPLER's values (the OpenTelemetry SDK's names). */
export const TRACE_SAMPLERS = ["parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio", "always_on", "always_off", "traceidratio"] as const;

export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly tracesUrl: string;
  /** OTEL_EXPORTER_OTLP_HEADERS: `key=value,…` sent with every export (a vendor's API key). */
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
  readonly sampler: (typeof TRACE_SAMPLERS)[number];
  /** OTEL_TRACES_SAMPLER_ARG: the share of traces kept by the ratio samplers. */
  readonly samplerRatio: number;
}

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join("; "));
  }
}

const MIN_JWT_SECRET_BYTES = 64;
/** A typo guard for the bootstrap admin (the users API checks addresses fully). */
export const looksLikeEmail = (value: string) => /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value);
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const DATABASE_SCHEMES = ["file:", "libsql:", "http:", "https:", "ws:", "wss:"];

/** The environment's values, converted and checked; each check that fails adds to `problems` and gives the fallback. */
function settingsReader(env: Env) {
  const problems: string[] = [];
  const read = (key: SettingName) => {
    const value = env[key]?.trim();
    return value === "" ? undefined : value;
  };
  const integer = (key: SettingName, fallback: number, min: number, max: number) => {
    const raw = read(key);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || value < min || value > max) {
      problems.push(`${key} must be a whole number from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return value;
  };
  const oneOf = <T extends string>(key: SettingName, allowed: readonly T[], fallback: T): T => {
    const raw = read(key)?.toLowerCase();
    if (raw === undefined) return fallback;
    if (!allowed.includes(raw as T)) {
      problems.push(`${key} must be one of ${allowed.join(", ")} (got "${raw}")`);
      return fallback;
    }
    return raw as T;
  };
  /** Seconds, or a number with ms, s, m, h or d ("900", "500ms", "30m"), as milliseconds; unset: undefined. */
  const duration = (key: SettingName, minMs: number, maxMs: number) => {
    const raw = read(key);
    if (raw === undefined) return undefined;
    const match = /^(\d+)\s*(ms|[smhd]?)$/i.exec(raw);
    const ms = match ? Number(match[1]) * { "": 1000, ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2].toLowerCase() as "" | "s"] : Number.NaN;
    if (!(ms >= minMs && ms <= maxMs)) {
      problems.push(`${key} must be a duration from ${minMs / 1000} s to ${maxMs / 86_400_000} days: seconds, or a number with ms, s, m, h or d such as 30m (got "${raw}")`);
      return undefined;
    }
    return ms;
  };
  const url = (key: SettingName, schemes: string[]) => {
    const raw = read(key);
    if (raw === undefined) return undefined;
    let scheme = "";
    try {
      scheme = new URL(raw).protocol;
    } catch {
      // reported below
    }
    if (!schemes.includes(scheme)) problems.push(`${key} must be a ${schemes.join(" / ")} URL (got "${raw}")`);
    return raw;
  };
  /** A provider's own setting, OIDC_<NAME>_<KEY> (settings.ts PROVIDER_SETTINGS). */
  const provider = (name: string, key: ProviderSettingKey) => {
    const value = env[providerSettingName(name, key)]?.trim();
    return value === "" ? undefined : value;
  };
  return { env, problems, read, integer, oneOf, duration, url, provider };
}
type SettingsReader = ReturnType<typeof settingsReader>;

/** Where the service listens and what it answers browsers; its logs and metrics. */
function serverSettings(r: SettingsReader, cores: number) {
  const host = r.read("HOST") ?? "0.0.0.0";
  const dotted = /^[\d.]+$/.test(host);
  if (isIP(host) === 0 && (dotted || !HOST_NAME.test(host))) r.problems.push(`HOST must be an IP address or a host name (got "${host}")`);
  const rawWorkers = r.read("WORKERS");
  return {
    port: r.integer("PORT", 8080, 0, 65535),
    host,
    basePath: basePathOf(r),
    workers: rawWorkers?.toLowerCase() === "auto" ? Math.max(1, cores) : r.integer("WORKERS", 1, 1, 64),
    trustProxy: r.integer("TRUST_PROXY", 0, 0, 10),
    maxBodyBytes: r.integer("MAX_BODY_BYTES", 2 * 1024 * 1024, 1024, 2 ** 31),
    hstsMaxAge: r.read("HSTS_MAX_AGE") === undefined ? undefined : r.integer("HSTS_MAX_AGE", 0, 0, 2 ** 31 - 1),
    corsOrigins: Object.freeze(corsOriginsOf(r)),
    logLevel: r.oneOf("LOG_LEVEL", LOG_LEVELS, "info"),
    logFormat: r.oneOf("LOG_FORMAT", ["json", "pretty"] as const, "json"),
    metricsToken: r.read("METRICS_TOKEN"),
  } satisfies Partial<Config>;
}

/** "svc", "/svc/" → "/svc"; "/" alone is the root, like no prefix at all. */
function basePathOf(r: SettingsReader) {
  const trimmed = (r.read("BASE_PATH") ?? "").replace(/^\/+|\/+$/g, "");
  const basePath = trimmed === "" ? "" : `/${trimmed}`;
  if (basePath === "" || /^(\/[A-Za-z0-9._~-]+)+$/.test(basePath)) return basePath;
  r.problems.push(`BASE_PATH must be a path such as /svc (got "${r.env.BASE_PATH}")`);
  return "";
}

/** An Origin header is scheme://host[:port], nothing more: anything else could never match one. */
function corsOriginsOf(r: SettingsReader, key: SettingName = "CORS_ORIGINS") {
  const origins = (r.read(key) ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
  for (const origin of origins) {
    let canonical = "";
    try {
      canonical = new URL(origin).origin;
    } catch {
      // reported below
    }
    if (canonical !== origin) r.problems.push(`${key} must list origins such as https://app.example.com, comma-separated (got "${origin}")`);
  }
  return origins;
}

function databaseSettings(r: SettingsReader, dataDir: string) {
  const databaseUrl = r.url("DATABASE_URL", DATABASE_SCHEMES) ?? `file:${dataDir}/usersvc.db`;
  const databaseSyncUrl = r.url("DATABASE_SYNC_URL", ["libsql:", "http:", "https:", "ws:", "wss:"]);
  if (databaseSyncUrl && !databaseUrl.startsWith("file:")) {
    r.problems.push("DATABASE_SYNC_URL needs a file: DATABASE_URL for the embedded replica");
  }
  const databaseSyncIntervalMs = r.duration("DATABASE_SYNC_INTERVAL", 100, 86_400_000) ?? 1000;
  const databaseMaxStalenessMs = r.duration("DATABASE_MAX_STALENESS", 100, 86_400_000) ?? 60_000;
  // The replica reaches its primary once per interval: a bound no longer than that would refuse
  // requests between two good pulls.
  if (databaseSyncUrl && databaseMaxStalenessMs <= databaseSyncIntervalMs) {
    r.problems.push("DATABASE_MAX_STALENESS must be longer than DATABASE_SYNC_INTERVAL (the replica reaches its primary once per interval)");
  }
  return {
    databaseUrl,
    databaseAuthToken: r.read("DATABASE_AUTH_TOKEN"),
    databaseSyncUrl,
    databaseSyncIntervalMs,
    databaseMaxStalenessMs,
    databaseDriver: r.oneOf("DATABASE_DRIVER", ["native", "libsql"] as const, "native"),
    databaseBusyTimeoutMs: r.integer("DATABASE_BUSY_TIMEOUT_MS", 5000, 0, 600_000),
  } satisfies Partial<Config>;
}

const S3_URL = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/;

/** Uploaded files and backups: each a folder, or s3:// with the S3 settings. */
function storageSettings(r: SettingsReader, dataDir: string) {
  const fileStorage = r.read("FILE_STORAGE") ?? `${dataDir}/uploads`;
  if (fileStorage.startsWith("s3:") && !S3_URL.test(fileStorage)) {
    r.problems.push(`FILE_STORAGE must be a folder or s3://bucket/prefix (got "${fileStorage}")`);
  }
  const backupDir = r.read("BACKUP_DIR") ?? `${dataDir}/backups`;
  if (backupDir.startsWith("s3:") && !S3_URL.test(backupDir)) {
    r.problems.push(`BACKUP_DIR must be a folder or s3://bucket/prefix (got "${backupDir}")`);
  }
  const backupSchedule = r.read("BACKUP_SCHEDULE");
  if (backupSchedule !== undefined) {
    try {
      new (loadCron())(backupSchedule, { paused: true, timezone: "Etc/UTC" }).stop();
    } catch (error) {
      r.problems.push(`BACKUP_SCHEDULE must be a cron expression such as "0 3 * * *" (got "${backupSchedule}": ${(error as Error).message})`);
    }
  }
  const rawBackupKey = r.read("BACKUP_ENCRYPTION_KEY");
  const s3 = s3SettingsOf(r);
  for (const [key, value] of [
    ["FILE_STORAGE", fileStorage],
    ["BACKUP_DIR", backupDir],
  ]) {
    if (value.startsWith("s3:") && (!s3.accessKeyId || !s3.secretAccessKey)) {
      r.problems.push(`${key}=s3://… needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)`);
    }
  }
  return {
    fileStorage,
    s3,
    maxUploadBytes: r.integer("MAX_UPLOAD_BYTES", 10 * 1024 * 1024, 1, 2 ** 40),
    backupDir,
    backupSchedule,
    backupKeep: r.integer("BACKUP_KEEP", 7, 1, 10_000),
    backupEncryptionKey: rawBackupKey === undefined ? undefined : base64Key(r, "BACKUP_ENCRYPTION_KEY", rawBackupKey),
  } satisfies Partial<Config>;
}

/** An AES-256 key given as 32 bytes in base64. */
function base64Key(r: SettingsReader, name: string, value: string): Buffer {
  const key = Buffer.from(value, "base64");
  if (key.length !== 32 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) r.problems.push(`${name} must be 32 bytes in base64 (e.g. openssl rand -base64 32)`);
  return key;
}

/** S3_* first, else the AWS_* names the AWS tools use. */
const s3SettingsOf = (r: SettingsReader): Config["s3"] => ({
  endpoint: r.url("S3_ENDPOINT", ["http:", "https:"]) ?? r.url("AWS_ENDPOINT_URL_S3", ["http:", "https:"]) ?? r.url("AWS_ENDPOINT_URL", ["http:", "https:"]),
  region: r.read("S3_REGION") ?? r.read("AWS_REGION") ?? r.read("AWS_DEFAULT_REGION"),
  accessKeyId: r.read("S3_ACCESS_KEY_ID") ?? r.read("AWS_ACCESS_KEY_ID"),
  secretAccessKey: r.read("S3_SECRET_ACCESS_KEY") ?? r.read("AWS_SECRET_ACCESS_KEY"),
  sessionToken: r.read("S3_SESSION_TOKEN") ?? r.read("AWS_SESSION_TOKEN"),
});

/** TOKEN_SIGNING's values (read in any case) as JOSE spells them. */
const SIGNING_ALGS = { hs512: "HS512", eddsa: "EdDSA", es256: "ES256" } as const;

/** Tokens, the bootstrap admin, passwords and the limits on guessing them. */
function accountSettings(r: SettingsReader) {
  const jwtSecret = r.read("JWT_SECRET");
  if (jwtSecret !== undefined && new TextEncoder().encode(jwtSecret).length < MIN_JWT_SECRET_BYTES) {
    r.problems.push(`JWT_SECRET must be at least ${MIN_JWT_SECRET_BYTES} bytes for HS512`);
  }
  const rawEncryptionKey = r.read("DATA_ENCRYPTION_KEY");
  const dataEncryptionKey = rawEncryptionKey === undefined ? undefined : base64Key(r, "DATA_ENCRYPTION_KEY", rawEncryptionKey);
  const dataEncryptionKeysPrevious = (r.read("DATA_ENCRYPTION_KEY_PREVIOUS") ?? "")
    .split(",")
    .map((value) => value.trim())
    .filter(Boolean)
    .map((value) => base64Key(r, "DATA_ENCRYPTION_KEY_PREVIOUS", value));
  const adminEmail = r.read("ADMIN_EMAIL");
  const adminPassword = r.read("ADMIN_PASSWORD");
  if (adminEmail !== undefined && !looksLikeEmail(adminEmail)) r.problems.push(`ADMIN_EMAIL must be an e-mail address (got "${adminEmail}")`);
  if ((adminEmail === undefined) !== (adminPassword === undefined)) {
    r.problems.push("ADMIN_EMAIL and ADMIN_PASSWORD must be set together");
  }
  const passwordPolicy = r.oneOf("PASSWORD_POLICY", ["seed", "strict"] as const, "seed");
  const hibpRangeUrl = r.url("HIBP_RANGE_URL", ["http:", "https:"]);
  if (hibpRangeUrl && passwordPolicy !== "strict") r.problems.push("HIBP_RANGE_URL needs PASSWORD_POLICY=strict (the seed policy checks the seed's rules alone)");
  return {
    jwtSecret,
    dataEncryptionKey,
    dataEncryptionKeysPrevious,
    adminEmail,
    adminPassword,
    requireEmailVerification: r.oneOf("REQUIRE_EMAIL_VERIFICATION", ["true", "false"] as const, "false") === "true",
    resetMaxRequests: r.integer("RESET_MAX_REQUESTS", 5, 1, 1_000_000),
    resetMaxRequestsPerIp: r.integer("RESET_MAX_REQUESTS_PER_IP", 20, 1, 1_000_000),
    passwordPolicy,
    hibpRangeUrl,
    loginMaxFailures: r.integer("LOGIN_MAX_FAILURES", 5, 1, 1_000_000),
    loginMaxFailuresPerIp: r.integer("LOGIN_MAX_FAILURES_PER_IP", 50, 1, 1_000_000),
    loginMaxFailuresGlobal: r.integer("LOGIN_MAX_FAILURES_GLOBAL", 50, 1, 1_000_000),
    emailCheckMaxPerIp: r.integer("EMAIL_CHECK_MAX_PER_IP", 60, 1, 1_000_000),
    registerMaxPerIp: r.integer("REGISTER_MAX_PER_IP", 20, 1, 1_000_000),
    passkeyOptionsMaxPerIp: r.integer("PASSKEY_OPTIONS_MAX_PER_IP", 60, 1, 1_000_000),
    accessTokenTtlS: r.integer("ACCESS_TOKEN_TTL", 18_000, 60, 30 * 86_400),
    sessionMaxAgeMs: r.duration("SESSION_MAX_AGE", 60_000, 3650 * 86_400_000) ?? 30 * 86_400_000,
    sessionIdleTimeoutMs: r.duration("SESSION_IDLE_TIMEOUT", 60_000, 3650 * 86_400_000) ?? 7 * 86_400_000,
    sessionMaxPerUser: r.integer("SESSION_MAX_PER_USER", 50, 1, 10_000),
    refreshReuseGraceS: r.integer("REFRESH_REUSE_GRACE_S", 10, 0, 3600),
    legacyBearerRefresh: r.oneOf("LEGACY_BEARER_REFRESH", ["on", "off"] as const, "on") === "on",
    apiKeyMaxPerUser: r.integer("API_KEY_MAX_PER_USER", 20, 1, 1000),
    apiKeyRateLimit: r.integer("API_KEY_RATE_LIMIT", 600, 1, 1_000_000_000),
    tokenSigning: SIGNING_ALGS[r.oneOf("TOKEN_SIGNING", ["hs512", "eddsa", "es256"] as const, "hs512")],
    tokenKeyRotationDays: r.integer("TOKEN_KEY_ROTATION_DAYS", 30, 1, 3650),
    tokenAudience: r.read("TOKEN_AUDIENCE"),
    ...secondFactorSettings(r),
  } satisfies Partial<Config>;
}

/** Passkeys' relying party (else PUBLIC_URL's host and origin) and the roles that must have a second factor. */
function secondFactorSettings(r: SettingsReader) {
  const rpId = r.read("RP_ID");
  if (rpId !== undefined && !HOST_NAME.test(rpId)) r.problems.push(`RP_ID must be a host name such as id.example.com (got "${rpId}")`);
  const mfaRequiredRoles = (r.read("MFA_REQUIRED_ROLES") ?? "")
    .split(",")
    .map((role) => role.trim().toUpperCase())
    .filter((role) => role !== "");
  for (const role of mfaRequiredRoles)
    if (role !== "USER" && role !== "ADMIN") r.problems.push(`MFA_REQUIRED_ROLES must list roles (USER, ADMIN), comma-separated (got "${role}")`);
  return { rpId, rpOrigins: Object.freeze(corsOriginsOf(r, "RP_ORIGINS")), mfaRequiredRoles: Object.freeze(mfaRequiredRoles) };
}

/** Where notifications go: the webhook, and mail through SMTP with links to PUBLIC_URL. */
function notificationSettings(r: SettingsReader) {
  const notifyWebhookSecret = r.read("NOTIFY_WEBHOOK_SECRET");
  if (notifyWebhookSecret !== undefined && !/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/.test(notifyWebhookSecret)) {
    r.problems.push("NOTIFY_WEBHOOK_SECRET must be whsec_ followed by at least 24 bytes in base64");
  }
  const mailFrom = r.read("MAIL_FROM") ?? "usersvc <no-reply@localhost>";
  if (!/^[^<>]*<[^\s@<>]+@[^\s@<>]+>$|^[^\s@<>]+@[^\s@<>]+$/.test(mailFrom)) r.problems.push(`MAIL_FROM must be an address, or a name and <address> (got "${mailFrom}")`);
  return {
    notifyWebhookUrl: r.url("NOTIFY_WEBHOOK_URL", ["http:", "https:"]),
    notifyWebhookSecret,
    smtpUrl: r.url("SMTP_URL", ["smtp:", "smtps:"]),
    mailFrom,
    publicUrl: r.url("PUBLIC_URL", ["http:", "https:"])?.replace(/\/+$/, ""),
  } satisfies Partial<Config>;
}

/** The OpenID Provider: off unless OAUTH_SERVER=on, which needs PUBLIC_URL for its issuer. */
function oauthSettings(r: SettingsReader) {
  const oauthServer = r.oneOf("OAUTH_SERVER", ["on", "off"] as const, "off") === "on";
  if (oauthServer && r.read("PUBLIC_URL") === undefined) r.problems.push("OAUTH_SERVER=on needs PUBLIC_URL (the issuer its tokens and discovery name)");
  return {
    oauthServer,
    oauthAccessTokenTtlS: Math.floor((r.duration("OAUTH_ACCESS_TOKEN_TTL", 60_000, 86_400_000) ?? 600_000) / 1000),
    oauthDynamicRegistration: r.oneOf("OAUTH_DYNAMIC_REGISTRATION", ["on", "off"] as const, "off") === "on",
    oauthRegisterMaxPerIp: r.integer("OAUTH_REGISTER_MAX_PER_IP", 10, 1, 1_000_000),
  } satisfies Partial<Config>;
}

const orderSettings = (r: SettingsReader) =>
  ({
    orderPaymentTimeoutMs: r.duration("ORDER_PAYMENT_TIMEOUT", 1000, 365 * 86_400_000),
    orderMaxPending: r.read("ORDER_MAX_PENDING") === undefined ? undefined : r.integer("ORDER_MAX_PENDING", 0, 1, 1_000_000),
  }) satisfies Partial<Config>;

/** Traces over OTLP/HTTP: only with an endpoint; the OpenTelemetry SDK's own names for the rest. */
function tracingSettings(r: SettingsReader) {
  const otlpEndpoint = r.url("OTEL_EXPORTER_OTLP_ENDPOINT", ["http:", "https:"]);
  const tracesUrl = r.url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ["http:", "https:"]) ?? (otlpEndpoint && `${otlpEndpoint.replace(/\/+$/, "")}/v1/traces`);
  const headers: Record<string, string> = {};
  // Values are percent-encoded (the OTLP exporter specification): "Authorization=Basic%20…".
  const percentDecoded = (value: string) => {
    try {
      return decodeURIComponent(value);
    } catch {
      r.problems.push("OTEL_EXPORTER_OTLP_HEADERS has a value that is not percent-encoded properly");
      return value;
    }
  };
  for (const pair of (r.read("OTEL_EXPORTER_OTLP_HEADERS") ?? "").split(",").filter((p) => p.trim() !== "")) {
    const at = pair.indexOf("=");
    if (at <= 0) r.problems.push(`OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs, comma-separated (got "${pair.trim()}")`);
    else headers[pair.slice(0, at).trim()] = percentDecoded(pair.slice(at + 1).trim());
  }
  const sampler = r.oneOf("OTEL_TRACES_SAMPLER", TRACE_SAMPLERS, "parentbased_always_on");
  const samplerArg = r.read("OTEL_TRACES_SAMPLER_ARG");
  const samplerRatio = samplerArg === undefined ? 1 : Number(samplerArg);
  if (!(samplerRatio >= 0 && samplerRatio <= 1)) r.problems.push(`OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (got "${samplerArg}")`);
  const tracing: TracingConfig | undefined = tracesUrl
    ? { tracesUrl, headers: Object.freeze(headers), serviceName: r.read("OTEL_SERVICE_NAME") ?? "usersvc", sampler, samplerRatio }
    : undefined;
  return { tracing } satisfies Partial<Config>;
}

/** What a preset fills in: its issuer (for github its web URL), label and scopes. */
const PRESETS: Record<string, { kind: ProviderConfig["kind"]; label: string; issuer?: string; scopes?: string }> = {
  google: { kind: "oidc", label: "Google", issuer: "https://accounts.google.com" },
  microsoft: { kind: "oidc", label: "Microsoft" },
  github: { kind: "github", label: "GitHub", scopes: "read:user user:email" },
};

const LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"];
/** https, or http on loopback only (a stand-in, a development IdP). */
const secureUrl = (raw: string) => {
  try {
    const url = new URL(raw);
    return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK_HOSTS.includes(url.hostname));
  } catch {
    return false;
  }
};

/** Sign-in with other providers: OIDC_PROVIDERS' names, each with its OIDC_<NAME>_* settings. */
function federationSettings(r: SettingsReader) {
  const signup = r.oneOf("OIDC_SIGNUP", ["on", "off"] as const, "on") === "on";
  const oidcReturnUrls = (r.read("OIDC_RETURN_URLS") ?? "")
    .split(",")
    .map((u) => u.trim())
    .filter((u) => u !== "");
  for (const url of oidcReturnUrls) {
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    if (!parsed || !secureUrl(url) || parsed.search || parsed.hash || /^\/(api|oauth2)(\/|$)/.test(parsed.pathname))
      r.problems.push(`OIDC_RETURN_URLS must list https URLs without query or fragment, none under /api/ or /oauth2/ (got "${url}")`);
  }
  const names = (r.read("OIDC_PROVIDERS") ?? "")
    .split(",")
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== "");
  const providers = names.flatMap((name, at): ProviderConfig[] => {
    if (!/^[a-z][a-z0-9]{0,31}$/.test(name) || names.indexOf(name) !== at) {
      r.problems.push(`OIDC_PROVIDERS must list distinct names of letters and digits, comma-separated (got "${name}")`);
      return [];
    }
    return [providerSettings(r, name)];
  });
  return {
    federation: providers.length > 0 ? { providers: Object.freeze(providers), signup } : undefined,
    oidcReturnUrls: Object.freeze(oidcReturnUrls),
    oidcStartMaxPerIp: r.integer("OIDC_START_MAX_PER_IP", 60, 1, 1_000_000),
  };
}

function providerSettings(r: SettingsReader, name: string): ProviderConfig {
  const preset = PRESETS[name];
  const setting = (key: ProviderSettingKey) => r.provider(name, key);
  const problem = (key: ProviderSettingKey, text: string) => r.problems.push(`${providerSettingName(name, key)} ${text}`);
  const clientId = setting("CLIENT_ID") ?? "";
  if (clientId === "") problem("CLIENT_ID", "is required for the provider in OIDC_PROVIDERS");
  const onOff = (key: "TRUST_EMAIL" | "KEEP_TOKENS") => {
    const value = setting(key)?.toLowerCase() ?? "off";
    if (value !== "on" && value !== "off") problem(key, `must be on or off (got "${value}")`);
    return value === "on";
  };
  const tenant = setting("TENANT");
  const tenants = (setting("TENANTS") ?? "")
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "");
  if (name === "microsoft") {
    if (!tenant) problem("TENANT", "is required: a tenant id, or common with OIDC_MICROSOFT_TENANTS");
    else if (tenant === "common" && tenants.length === 0) problem("TENANTS", "must list the tenant ids allowed when the tenant is common");
  }
  const microsoftIssuer = tenant && `https://login.microsoftonline.com/${tenant}/v2.0`;
  const kind = preset?.kind ?? "oidc";
  const issuer = kind === "github" ? (setting("WEB_URL") ?? "https://github.com") : (setting("ISSUER") ?? preset?.issuer ?? (name === "microsoft" ? microsoftIssuer : undefined));
  const issuerKey = kind === "github" ? "WEB_URL" : "ISSUER";
  if (!issuer) problem("ISSUER", "is required for a provider that is not a preset (google, microsoft, github)");
  else if (!secureUrl(issuer)) problem(issuerKey, `must be an https URL (http only on loopback) (got "${issuer}")`);
  const apiUrl = kind === "github" ? (setting("API_URL") ?? "https://api.github.com") : undefined;
  if (apiUrl && !secureUrl(apiUrl)) problem("API_URL", `must be an https URL (http only on loopback) (got "${apiUrl}")`);
  return {
    name,
    label: setting("LABEL") ?? preset?.label ?? name,
    kind,
    // An OIDC issuer stays as given: discovery compares it with the metadata's exactly.
    issuer: kind === "github" ? (issuer ?? "").replace(/\/+$/, "") : (issuer ?? ""),
    clientId,
    clientSecret: setting("CLIENT_SECRET"),
    scopes: setting("SCOPES") ?? preset?.scopes ?? "openid email profile",
    trustEmail: onOff("TRUST_EMAIL"),
    keepTokens: onOff("KEEP_TOKENS"),
    ...(name === "microsoft" && { tenants: Object.freeze(tenant === "common" ? tenants : [tenant ?? ""]) }),
    ...(apiUrl && { apiUrl: apiUrl.replace(/\/+$/, "") }),
  };
}

export function loadConfig(env: Env, cores = navigator.hardwareConcurrency): Config {
  const r = settingsReader(env);
  const dataDir = r.read("DATA_DIR") ?? "./data";
  const config: Config = {
    ...serverSettings(r, cores),
    ...databaseSettings(r, dataDir),
    dataDir,
    ...storageSettings(r, dataDir),
    ...accountSettings(r),
    ...notificationSettings(r),
    ...oauthSettings(r),
    ...orderSettings(r),
    ...tracingSettings(r),
    ...federationSettings(r),
  };
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return Object.freeze(config);
}
