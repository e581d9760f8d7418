/**
 * Every setting the service reads, declared once: its name, its default as a person reads it, and
 * what it means. config.ts reads only names declared here (the type says so), `usersvc --help`
 * prints a line for each, every one is a --kebab-case flag too, and the README's configuration
 * table is rendered from this list (`npm run docs:settings`; test/settings.test.ts keeps the
 * three in step and checks that every declared setting is read).
 */
export interface Setting {
  /** The default: a literal value, or "(…)" words for one that is not ("(generated)"); "" for none. */
  readonly default: string;
  /** Markdown (backticks for literals); --help prints it plain. */
  readonly meaning: string;
}

const setting = (defaultValue: string, meaning: string): Setting => ({ default: defaultValue, meaning });

export const SETTINGS = {
  PORT: setting("8080", "the port to listen on"),
  HOST: setting("0.0.0.0", "the address to listen on"),
  BASE_PATH: setting("", "context-path prefix, e.g. `/svc`"),
  WORKERS: setting("1", "processes sharing the port (`auto` = cores)"),
  TRUST_PROXY: setting("0", "reverse proxies of yours in front: how many `X-Forwarded-For` hops name the client"),
  MAX_BODY_BYTES: setting("2097152", "JSON bodies; larger: 413 PAYLOAD_TOO_LARGE"),
  CORS_ORIGINS: setting("", "browser origins allowed to call the API, comma-separated (`https://app.example.com,http://localhost:5173`); none: no CORS headers"),
  HSTS_MAX_AGE: setting("", "seconds: adds `Strict-Transport-Security: max-age=N` (set it when clients reach you over HTTPS)"),
  LOG_LEVEL: setting("info", "`trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`"),
  LOG_FORMAT: setting("json", "structured logs on stdout, one JSON object a line (`pretty` for a terminal)"),
  METRICS_TOKEN: setting("", "a bearer token that may scrape /actuator/prometheus"),

  DATA_DIR: setting(
    "./data",
    "where the default database, secret and uploads live; folders the service makes are 0700, the database (with its -wal/-shm), secret and uploads 0600, whatever the umask",
  ),
  DATABASE_URL: setting("file:./data/usersvc.db", "libSQL URL: `file:` (embedded), `libsql://`, `http(s)://`, `ws(s)://` (a libSQL server / Turso)"),
  DATABASE_AUTH_TOKEN: setting("", "token for a remote libSQL server / Turso"),
  DATABASE_SYNC_URL: setting("", "with a `file:` URL: an embedded replica of this primary"),
  DATABASE_SYNC_INTERVAL: setting("1s", "an embedded replica pulls from its primary this often (and after each write of its own): `500ms`, `1s`, `2m`"),
  DATABASE_MAX_STALENESS: setting(
    "60s",
    "an embedded replica that has not reached its primary for this long answers every authenticated request 503 with Retry-After, and readiness DOWN (reads from its copy go on until then); longer than DATABASE_SYNC_INTERVAL",
  ),
  DATABASE_DRIVER: setting("native", "for a `file:` URL: `native` (Bun's own SQLite) or `libsql` (@libsql/client); remote URLs and replicas always use @libsql/client"),
  DATABASE_BUSY_TIMEOUT_MS: setting("5000", "how long a write retries while another process holds the lock, then 503 with Retry-After"),

  FILE_STORAGE: setting("./data/uploads", "a folder, or `s3://bucket/prefix` (the bucket must exist: checked at start)"),
  MAX_UPLOAD_BYTES: setting("10485760", "larger uploads: 413 PAYLOAD_TOO_LARGE"),
  S3_ENDPOINT: setting("(AWS)", "for an `s3://` FILE_STORAGE or BACKUP_DIR: the endpoint (else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)"),
  S3_REGION: setting("us-east-1", "the region (else AWS_REGION, AWS_DEFAULT_REGION)"),
  S3_ACCESS_KEY_ID: setting("", "the access key (else AWS_ACCESS_KEY_ID)"),
  S3_SECRET_ACCESS_KEY: setting("", "the secret key (else AWS_SECRET_ACCESS_KEY)"),
  S3_SESSION_TOKEN: setting("", "a session token (else AWS_SESSION_TOKEN)"),
  AWS_ENDPOINT_URL_S3: setting("", "the AWS tools' name, read when S3_ENDPOINT is unset"),
  AWS_ENDPOINT_URL: setting("", "the AWS tools' name, read when S3_ENDPOINT and AWS_ENDPOINT_URL_S3 are unset"),
  AWS_REGION: setting("", "the AWS tools' name, read when S3_REGION is unset"),
  AWS_DEFAULT_REGION: setting("", "the AWS tools' name, read when S3_REGION and AWS_REGION are unset"),
  AWS_ACCESS_KEY_ID: setting("", "the AWS tools' name, read when S3_ACCESS_KEY_ID is unset"),
  AWS_SECRET_ACCESS_KEY: setting("", "the AWS tools' name, read when S3_SECRET_ACCESS_KEY is unset"),
  AWS_SESSION_TOKEN: setting("", "the AWS tools' name, read when S3_SESSION_TOKEN is unset"),
  BACKUP_DIR: setting("./data/backups", "where backups go: a folder, or `s3://bucket/prefix` (the S3 settings above)"),
  BACKUP_SCHEDULE: setting("", "a cron expression in UTC (`0 3 * * *`; six fields for seconds) for scheduled backups"),
  BACKUP_KEEP: setting("7", "how many scheduled archives to keep (manual ones are never pruned)"),
  BACKUP_ENCRYPTION_KEY: setting(
    "",
    "32 bytes in base64 (`openssl rand -base64 32`): each archive is then encrypted whole (AES-256-GCM, `….tar.gz.enc`) and carries `jwt.secret` and `encryption.key`; unset, archives carry neither key file. `usersvc restore` reads it from the environment",
  ),

  JWT_SECRET: setting("(generated)", "HS512 key, ≥ 64 bytes. Unset: generated once into `./data/jwt.secret` (0600)"),
  DATA_ENCRYPTION_KEY: setting(
    "(generated)",
    "32 bytes in base64 (`openssl rand -base64 32`): AES-256-GCM key for secrets at rest (private signing keys, TOTP secrets). Unset: generated once into `./data/encryption.key` (0600; carried in backups only when encrypted, BACKUP_ENCRYPTION_KEY). Give every instance on one primary the same key",
  ),
  DATA_ENCRYPTION_KEY_PREVIOUS: setting("", "comma-separated earlier keys: they only open what they sealed, until `usersvc keys rewrap` re-seals it under the current key"),
  ADMIN_EMAIL: setting("", "with ADMIN_PASSWORD: that ADMIN exists after start (created, or promoted with this password; an ADMIN already is left as it is)"),
  ADMIN_PASSWORD: setting("", "the bootstrap ADMIN's password (with ADMIN_EMAIL)"),
  ACCESS_TOKEN_TTL: setting("18000", "seconds an access token lives (the login answer's `expiresIn`)"),
  SESSION_MAX_AGE: setting("30d", "a session's absolute lifetime (seconds, or with s/m/h/d)"),
  SESSION_IDLE_TIMEOUT: setting("7d", "how long a session lives without a request or refresh (seconds, or with s/m/h/d)"),
  SESSION_MAX_PER_USER: setting("50", "open sessions per user; a new sign-in ends the least recently used"),
  LEGACY_BEARER_REFRESH: setting(
    "on",
    "`off` refuses (401) `POST /api/auth/refresh` by the bearer alone for a session token; set it `off` once no old client (one that never sends `refreshToken`) remains. Either way a session that has used its refresh token refuses the bearer-only refresh",
  ),
  REFRESH_REUSE_GRACE_S: setting("10", "seconds a rotated refresh token is accepted once more (answering a sibling); replayed later, it ends its session"),
  TOKEN_SIGNING: setting(
    "HS512",
    "`HS512` (JWT_SECRET), `EdDSA` (Ed25519) or `ES256`: asymmetric keys live in the database, private halves encrypted, public ones at `/.well-known/jwks.json`",
  ),
  TOKEN_KEY_ROTATION_DAYS: setting("30", "days an asymmetric key signs; the next is published 10 minutes before it takes over (`usersvc keys rotate` does it now)"),
  TOKEN_AUDIENCE: setting("", "the `aud` tokens carry and must carry (`iss` is PUBLIC_URL, else `usersvc`)"),
  PASSWORD_POLICY: setting(
    "seed",
    "`seed`: the old service's password rules alone (its clients keep registering with `Passw0rd!`); `strict` (recommended for new deployments): NIST SP 800-63B",
  ),
  HIBP_RANGE_URL: setting("", "with `strict`: Have I Been Pwned's range API (`https://api.pwnedpasswords.com/range/`), asked by k-anonymity"),
  REQUIRE_EMAIL_VERIFICATION: setting("false", "`true`: an unverified user's login gets 403 `EMAIL_NOT_VERIFIED`"),
  RESET_MAX_REQUESTS: setting("5", "password-reset requests an hour per e-mail"),
  RESET_MAX_REQUESTS_PER_IP: setting("20", "password-reset requests an hour per client address"),
  LOGIN_MAX_FAILURES: setting("5", "failed logins per e-mail and client network (/24, /48) in 15 minutes, then 429"),
  LOGIN_MAX_FAILURES_PER_IP: setting("50", "failed logins per client address in 15 minutes, then 429"),
  LOGIN_MAX_FAILURES_GLOBAL: setting(
    "50",
    "failed logins of one e-mail across networks in 15 minutes before it is locked out everywhere (15 minutes, doubling with each further lockout within a day, up to a day)",
  ),
  EMAIL_CHECK_MAX_PER_IP: setting("60", "`GET /api/auth/validate-email` requests a minute per client address (then 429 with Retry-After)"),
  REGISTER_MAX_PER_IP: setting("20", "registration attempts that pass validation (409s included) per client address in 10 minutes (then 429)"),
  PASSKEY_OPTIONS_MAX_PER_IP: setting("60", "`POST /api/auth/passkey/options` (passwordless sign-in's challenges) a minute per client address (then 429, no challenge written)"),
  RP_ID: setting("(PUBLIC_URL's host)", "the passkeys' relying party (a host name); neither RP_ID nor PUBLIC_URL: passkey routes answer 400 PASSKEYS_NOT_CONFIGURED"),
  RP_ORIGINS: setting("(PUBLIC_URL's origin)", "the origins a passkey ceremony may come from (comma-separated)"),
  MFA_REQUIRED_ROLES: setting(
    "",
    "comma-separated roles (e.g. `ADMIN`) that must have a second factor: without one they sign in to a session that may only enrol one (403 MFA_ENROLMENT_REQUIRED elsewhere), and that first enrolment takes a code mailed to the verified address (without SMTP_URL: `usersvc mfa enrol-code`, and start-up warns)",
  ),
  API_KEY_MAX_PER_USER: setting("20", "API keys one user may hold (409 TOO_MANY_API_KEYS beyond)"),
  API_KEY_RATE_LIMIT: setting("600", "requests a minute one API key may make, **per instance** (429 beyond)"),

  OIDC_PROVIDERS: setting(
    "",
    "sign-in with other providers, comma-separated names (`google,github,corp`): each a preset (`google`, `microsoft`, `github`) or any OpenID Connect issuer, configured by the OIDC_<NAME>_* settings below (docs/sign-in-providers.md)",
  ),
  OIDC_SIGNUP: setting("on", "`off`: a provider's sign-in never creates an account (403 SIGNUP_DISABLED); it only signs in to linked ones"),
  OIDC_START_MAX_PER_IP: setting("60", "federated sign-ins started a minute per client address (then 429)"),
  OIDC_RETURN_URLS: setting(
    "",
    "pages elsewhere a federated sign-in may return to, listed exactly (origin and path), comma-separated; the exchange route answers their origins' CORS",
  ),

  NOTIFY_WEBHOOK_URL: setting("", "where notifications are POSTed; unset: outbox table and log"),
  NOTIFY_WEBHOOK_SECRET: setting("", "`whsec_<base64>`: webhook deliveries are signed (Standard Webhooks)"),
  SMTP_URL: setting("", "e-mail delivery (`smtp://user:pass@host:587`, `smtps://user:pass@host:465`); unset: no e-mail"),
  MAIL_FROM: setting("usersvc <no-reply@localhost>", "the sender of every mail"),
  PUBLIC_URL: setting("", "the service's public base URL, for links in e-mails (`https://id.example.com`)"),

  OAUTH_SERVER: setting("off", "`on`: usersvc is an OpenID Provider for your other apps (needs PUBLIC_URL, the issuer; docs/openid-provider.md)"),
  OAUTH_ACCESS_TOKEN_TTL: setting("10m", "how long a client's access token lives (seconds, or with s/m/h/d)"),
  OAUTH_DYNAMIC_REGISTRATION: setting("off", "`on`: apps may register themselves (RFC 7591) as public clients asking `openid profile email` only"),
  OAUTH_REGISTER_MAX_PER_IP: setting("10", "with OAUTH_DYNAMIC_REGISTRATION=on: registrations an hour per client address (then 429)"),

  ORDER_PAYMENT_TIMEOUT: setting(
    "(off)",
    'seconds, or with s/m/h/d (`30m`): a PENDING order older than this fails (PAYMENT_FAILED, "payment timeout"), its stock released, audited and notified; paying it is refused. Recommended: `30m`',
  ),
  ORDER_MAX_PENDING: setting("(off)", "unpaid orders one user may hold; another gets 409 `TOO_MANY_PENDING_ORDERS`. Recommended: `5` (with ORDER_PAYMENT_TIMEOUT)"),

  OTEL_EXPORTER_OTLP_ENDPOINT: setting(
    "",
    "an OTLP/HTTP collector (`http://collector:4318`): traces are sent to its `/v1/traces`; unset, with no traces endpoint either: no tracing code is loaded",
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: setting("", "the full traces URL instead (`https://otlp.example.com/v1/traces`)"),
  OTEL_EXPORTER_OTLP_HEADERS: setting("", "`key=value,…` (values percent-encoded) sent with every export, e.g. a vendor's API key"),
  OTEL_SERVICE_NAME: setting("usersvc", "the traces' `service.name`"),
  OTEL_TRACES_SAMPLER: setting("parentbased_always_on", "`always_on`, `always_off`, `traceidratio`, each also `parentbased_` (follow the caller's sampled flag)"),
  OTEL_TRACES_SAMPLER_ARG: setting("1", "the ratio for the `traceidratio` samplers"),
} as const satisfies Record<string, Setting>;

/**
 * Each provider named in OIDC_PROVIDERS has its own settings, `OIDC_<NAME>_<KEY>` (NAME upper-case):
 * declared once here, read by config.ts for each name, printed and tabled like the rest.
 */
export const PROVIDER_SETTINGS = {
  CLIENT_ID: setting("", "the client id registered at the provider (required)"),
  CLIENT_SECRET: setting("", "its client secret"),
  ISSUER: setting(
    "(the preset's)",
    "the OpenID Connect issuer, discovered at `<issuer>/.well-known/openid-configuration` (required unless a preset; `http://` only on loopback); for a preset, its endpoints overridden",
  ),
  LABEL: setting("(the name)", "the button's text: Sign in with LABEL"),
  SCOPES: setting("openid email profile", "the scopes asked for"),
  TRUST_EMAIL: setting(
    "off",
    "`on`: a sign-in whose verified e-mail is a verified account's links to it (not an ADMIN, nor an account with a second factor), mailed IDENTITY_LINKED; `off`: 409 ACCOUNT_EXISTS",
  ),
  KEEP_TOKENS: setting(
    "off",
    "`on`: the provider's tokens of each sign-in (access, refresh, ID token) are kept with the identity, sealed with DATA_ENCRYPTION_KEY like TOTP secrets; `off`: none is kept",
  ),
  TENANT: setting("", "microsoft: the tenant id, or `common` with OIDC_<NAME>_TENANTS"),
  TENANTS: setting("", "microsoft with `common`: the tenant ids allowed, comma-separated"),
  API_URL: setting("https://api.github.com", "github: its API (for GitHub Enterprise, and tests)"),
  WEB_URL: setting("https://github.com", "github: its sign-in pages (for GitHub Enterprise, and tests)"),
} as const satisfies Record<string, Setting>;

export type ProviderSettingKey = keyof typeof PROVIDER_SETTINGS;
const PROVIDER_KEYS = Object.keys(PROVIDER_SETTINGS) as ProviderSettingKey[];

/** A provider's setting as the environment names it: `corp`, `CLIENT_ID` → `OIDC_CORP_CLIENT_ID`. */
export const providerSettingName = (provider: string, key: ProviderSettingKey) => `OIDC_${provider.toUpperCase()}_${key}`;

export type SettingName = keyof typeof SETTINGS;
export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

/** The command line's option for a setting: `DATABASE_URL` ↔ `--database-url`. */
export const optionOf = (name: SettingName) => name.toLowerCase().replaceAll("_", "-");

const plain = (markdown: string) => markdown.replaceAll("`", "").replaceAll("**", "");

/** `usersvc --help`'s lines: one a setting, with its flag and default. */
export function settingsHelp(): string {
  return allSettings()
    .map(([name, { default: fallback, meaning }]) => `  ${name}${fallback ? ` (${plain(fallback)})` : ""}: ${plain(meaning)}`)
    .join("\n");
}

/** Every setting with its name, a provider's as `OIDC_<NAME>_KEY` after OIDC_PROVIDERS' own. */
function allSettings(): [string, Setting][] {
  return SETTING_NAMES.flatMap((name): [string, Setting][] => [
    [name, SETTINGS[name]],
    ...(name === "OIDC_RETURN_URLS" ? PROVIDER_KEYS.map((key): [string, Setting] => [providerSettingName("<NAME>", key), PROVIDER_SETTINGS[key]]) : []),
  ]);
}

/** The README's configuration table. */
export function settingsTable(): string {
  const cell = (text: string) => text.replaceAll("|", "\\|");
  const rows = allSettings().map(([name, { default: fallback, meaning }]) => {
    return `| ${name} | ${fallback === "" ? "" : cell(fallback.startsWith("(") ? fallback : `\`${fallback}\``)} | ${cell(meaning)} |`;
  });
  return ["| variable | default | meaning |", "|---|---|---|", ...rows].join("\n");
}
