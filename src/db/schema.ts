/**
 * Every table in one place. Times are epoch milliseconds (indexable, compare cheaply) and
 * are rendered as ISO 8601 UTC at the edge; money is integer cents, never a binary float.
 */
import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

const now = sql`(unixepoch('subsec') * 1000)`;
const millis = (name: string) => integer(name, { mode: "timestamp_ms" });

export const departments = sqliteTable("departments", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  name: text("name").notNull().unique(),
  description: text("description"),
  createdAt: millis("created_at").notNull().default(now),
});

export const users = sqliteTable(
  "users",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    name: text("name").notNull(),
    /** Stored trimmed and lower-cased: the unique index is the one arbiter of "taken". */
    email: text("email").notNull(),
    departmentId: integer("department_id").references(() => departments.id, { onDelete: "set null" }),
    phone: text("phone"),
    active: integer("active", { mode: "boolean" }).notNull().default(true),
    age: integer("age"),
    salaryCents: integer("salary_cents"),
    passwordHash: text("password_hash"),
    /** Bumped by logout and password changes: tokens carrying an older value are refused. */
    tokenVersion: integer("token_version").notNull().default(0),
    /** Optimistic-lock version, +1 on every update. */
    version: integer("version").notNull().default(0),
    createdAt: millis("created_at").notNull(),
    updatedAt: millis("updated_at").notNull(),
    lastLogin: millis("last_login"),
    /** False at creation and after an e-mail change; true once a verification link is confirmed. */
    emailVerified: integer("email_verified", { mode: "boolean" }).notNull().default(false),
    /** The e-mails' language: "en" or "zh-TW" (from Accept-Language at registration). */
    language: text("language").notNull().default("en"),
    /** When the e-mail last changed (null: never): a token without the account's id issued before it is refused. */
    emailChangedAt: millis("email_changed_at"),
  },
  (t) => [
    uniqueIndex("users_email_unique").on(t.email),
    // Partial: a user without a department or an age (every user an ADMIN creates) writes no
    // entry. Every query of them names a value (department IN …, age = ?), which implies NOT NULL.
    index("users_department_idx").on(t.departmentId).where(sql`${t.departmentId} is not null`),
    index("users_active_age_idx").on(t.active, t.age).where(sql`${t.age} is not null`),
    index("users_last_login_idx").on(t.lastLogin),
    index("users_created_at_idx").on(t.createdAt),
    // sort=name / sortBy=name: pages come off the index (name, then id) instead of sorting every user.
    index("users_name_idx").on(t.name),
  ],
);

export const roles = sqliteTable("roles", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  /** RoleName, stored as text: USER, ADMIN. */
  name: text("name").notNull().unique(),
  description: text("description"),
});

export const userRoles = sqliteTable(
  "user_roles",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    roleId: integer("role_id")
      .notNull()
      .references(() => roles.id, { onDelete: "cascade" }),
  },
  (t) => [primaryKey({ columns: [t.userId, t.roleId] }), index("user_roles_role_idx").on(t.roleId)],
);

export const userProfiles = sqliteTable("user_profiles", {
  /** Shares the user's id (one-to-one). */
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id, { onDelete: "cascade" }),
  avatarUrl: text("avatar_url"),
  bio: text("bio"),
  /** yyyy-MM-dd */
  birthDate: text("birth_date"),
  address: text("address"),
});

export const userSkills = sqliteTable(
  "user_skills",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** As the user wrote it. */
    name: text("name").notNull(),
    /** Lower-cased, for case-insensitive matching and de-duplication. */
    nameKey: text("name_key").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.nameKey] }), index("user_skills_name_key_idx").on(t.nameKey)],
);

/** Failed-login counters; in the database so every worker process shares them. */
export const loginThrottle = sqliteTable("login_throttle", {
  /** "email:<address>" or "ip:<address>" */
  key: text("key").primaryKey(),
  failures: integer("failures").notNull(),
  windowStartedAt: millis("window_started_at").notNull(),
});

export const files = sqliteTable(
  "files",
  {
    /** The generated storage name: <uuid><.ext>. */
    id: text("id").primaryKey(),
    originalName: text("original_name").notNull(),
    contentType: text("content_type").notNull(),
    size: integer("size").notNull(),
    sha256: text("sha256").notNull(),
    uploadedBy: integer("uploaded_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: millis("created_at").notNull(),
  },
  (t) => [index("files_uploaded_by_idx").on(t.uploadedBy)],
);

export const products = sqliteTable(
  "products",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    name: text("name").notNull(),
    code: text("code").notNull().unique(),
    priceCents: integer("price_cents").notNull(),
    description: text("description"),
    /** ProductStatus: ACTIVE, INACTIVE, DISCONTINUED. */
    status: text("status").notNull(),
    stock: integer("stock").notNull().default(0),
    createdAt: millis("created_at").notNull(),
    updatedAt: millis("updated_at").notNull(),
    createdBy: text("created_by"),
    updatedBy: text("updated_by"),
  },
  (t) => [check("products_stock_non_negative", sql`${t.stock} >= 0`), check("products_price_non_negative", sql`${t.priceCents} >= 0`)],
);

export const orders = sqliteTable(
  "orders",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id),
    /** OrderStatus: PENDING, PROCESSING (claimed for payment), PAID, PAYMENT_FAILED. */
    status: text("status").notNull(),
    totalCents: integer("total_cents").notNull(),
    paymentId: text("payment_id"),
    paidAt: millis("paid_at"),
    createdAt: millis("created_at").notNull(),
    updatedAt: millis("updated_at").notNull(),
  },
  (t) => [
    index("orders_user_idx").on(t.userId),
    // The payment-timeout sweep's oldest PENDING orders (ORDER_PAYMENT_TIMEOUT), without a scan of every order.
    index("orders_pending_created_idx").on(t.createdAt).where(sql`${t.status} = 'PENDING'`),
  ],
);

export const orderItems = sqliteTable(
  "order_items",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    orderId: integer("order_id")
      .notNull()
      .references(() => orders.id, { onDelete: "cascade" }),
    productId: integer("product_id")
      .notNull()
      .references(() => products.id),
    productName: text("product_name").notNull(),
    quantity: integer("quantity").notNull(),
    unitPriceCents: integer("unit_price_cents").notNull(),
    totalPriceCents: integer("total_price_cents").notNull(),
  },
  (t) => [index("order_items_order_idx").on(t.orderId)],
);

/**
 * Transactional outbox: written with the change it describes, delivered later on two channels,
 * each with its own state, so one channel's outage never delays or repeats the other. A channel's
 * status is pending, sent, failed (gave up after its retries), skipped (nothing to send on it)
 * or resolving (a password reset whose address the sender has not looked up yet).
 * The webhook channel keeps the columns it had before mail existed (attempts, next_attempt_at,
 * delivered_at, last_error).
 */
export const outbox = sqliteTable(
  "outbox",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** WELCOME, VERIFY_EMAIL, PASSWORD_RESET, PASSWORD_CHANGED, EMAIL_CHANGED, USER_UPDATED, ORDER_CREATED, PAYMENT_SUCCESS, PAYMENT_FAILED, API_KEY_CREATED */
    kind: text("kind").notNull(),
    recipient: text("recipient"),
    payload: text("payload", { mode: "json" }).notNull(),
    /** A raw verify/reset token for the mail's link; erased once mailed, given up or expired. */
    token: text("token"),
    createdAt: millis("created_at").notNull(),
    webhookStatus: text("webhook_status").notNull().default("pending"),
    webhookAttempts: integer("attempts").notNull().default(0),
    webhookNextAttemptAt: millis("next_attempt_at").notNull(),
    webhookSentAt: millis("delivered_at"),
    webhookLastError: text("last_error"),
    mailStatus: text("mail_status").notNull().default("pending"),
    mailAttempts: integer("mail_attempts").notNull().default(0),
    mailNextAttemptAt: millis("mail_next_attempt_at").notNull().default(sql`0`),
    mailSentAt: millis("mail_sent_at"),
    mailLastError: text("mail_last_error"),
    /** The W3C traceparent of the unit that wrote the row (with tracing on): its deliveries continue that trace. */
    traceparent: text("traceparent"),
  },
  (t) => [
    index("outbox_webhook_due_idx").on(t.webhookStatus, t.webhookNextAttemptAt),
    index("outbox_mail_due_idx").on(t.mailStatus, t.mailNextAttemptAt),
    // Partial: the sender's token erasing (about once a second) looks only at rows still holding
    // a token, not the whole outbox; a notification without a token writes no entry.
    index("outbox_token_idx").on(t.kind, t.createdAt).where(sql`${t.token} is not null`),
  ],
);

/** Verification and password-reset tokens: only a SHA-256 of each, one live token per user and purpose. */
export const accountTokens = sqliteTable(
  "account_tokens",
  {
    /** Hex SHA-256 of the raw token (32 random bytes, base64url). */
    tokenHash: text("token_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** VERIFY_EMAIL or PASSWORD_RESET */
    purpose: text("purpose").notNull(),
    expiresAt: millis("expires_at").notNull(),
  },
  (t) => [uniqueIndex("account_tokens_user_purpose_unique").on(t.userId, t.purpose)],
);

/** Password-reset request counters ("email:<address>" / "ip:<address>"), apart from login's. */
export const resetThrottle = sqliteTable("reset_throttle", {
  key: text("key").primaryKey(),
  requests: integer("requests").notNull(),
  windowStartedAt: millis("window_started_at").notNull(),
});

export const auditLog = sqliteTable(
  "audit_log",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    action: text("action").notNull(),
    /** E-mail of the caller, or "system". */
    actor: text("actor").notNull(),
    subjectType: text("subject_type").notNull(),
    subjectId: text("subject_id").notNull(),
    details: text("details", { mode: "json" }),
    createdAt: millis("created_at").notNull(),
  },
  // No index on created_at: the trail is read newest first by id, and every write paid for one.
  // Backups only, by action (a partial index: other audit writes pay nothing): the last backup
  // for health and metrics, and the restore windows the orphan sweep keeps.
  (t) => [index("audit_log_backups_idx").on(t.action).where(sql`${t.subjectType} = 'backup'`)],
);

/**
 * Who holds what, across processes and the CLI: a row per lease, valid until `expires_at`,
 * renewed by its holder. Bun has no flock and a PID file goes stale after kill -9; an expired
 * row is simply taken over. Names: "serve:<holder>" per serving process, "backup", "restore".
 */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: millis("expires_at").notNull(),
});

/**
 * Signed-in devices: a row per completed sign-in. A session is open while it has not ended, is
 * younger than its absolute expiry, was seen within SESSION_IDLE_TIMEOUT, and carries the user's
 * token version: whatever bumps the version (password change or reset, an e-mail change,
 * revoke-tokens, deactivation, logout with a sid-less token) ends every session of the user at once.
 */
export const sessions = sqliteTable(
  "sessions",
  {
    /** 16 random bytes, base64url: the access token's `sid`. */
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** The user's token version the session belongs to. */
    tokenVersion: integer("token_version").notNull(),
    createdAt: millis("created_at").notNull(),
    /** Written at most once a minute (security/session-activity.ts). */
    lastSeenAt: millis("last_seen_at").notNull(),
    /** The absolute end: createdAt + SESSION_MAX_AGE. */
    expiresAt: millis("expires_at").notNull(),
    /** Set by logout, by ending it from a list, by the per-user cap and by a replayed refresh token. */
    endedAt: millis("ended_at"),
    address: text("address").notNull(),
    userAgent: text("user_agent"),
    /** "Chrome 142 on Linux", from the user agent. */
    device: text("device"),
    /** How it signed in, comma-separated (pwd, otp, hwk, rec). */
    amr: text("amr").notNull(),
  },
  (t) => [index("sessions_user_idx").on(t.userId, t.lastSeenAt)],
);

/** Rotating refresh tokens: only a SHA-256 of each; a rotated one names its successor (and the one sibling its grace answered). */
export const refreshTokens = sqliteTable(
  "refresh_tokens",
  {
    /** base64url SHA-256 of the raw token (32 random bytes, base64url). */
    tokenHash: text("token_hash").primaryKey(),
    sessionId: text("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    createdAt: millis("created_at").notNull(),
    rotatedAt: millis("rotated_at"),
    successor: text("successor"),
    sibling: text("sibling"),
  },
  (t) => [index("refresh_tokens_session_idx").on(t.sessionId)],
);

// ── Account protection (#29): global login lockouts, device tokens, known devices ──

/**
 * An e-mail's global login lockout (LOGIN_MAX_FAILURES_GLOBAL failures across networks): until when,
 * and its length, which doubles with each further lockout that starts within 24 h of the last one's end (up to 24 h).
 */
export const loginLockouts = sqliteTable(
  "login_lockouts",
  {
    email: text("email").primaryKey(),
    lockedUntil: millis("locked_until").notNull(),
    durationMs: integer("duration_ms").notNull(),
  },
  (t) => [index("login_lockouts_until_idx").on(t.lockedUntil)],
);

/**
 * deviceTokens a successful login hands out (OWASP's device cookie): only a SHA-256 of each, bound to
 * its account; a sign-in presenting one counts only its own failures, and 5 of them void it.
 */
export const deviceTokens = sqliteTable(
  "device_tokens",
  {
    /** base64url SHA-256 of the raw token (32 random bytes, base64url). */
    tokenHash: text("token_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: millis("created_at").notNull(),
    /** createdAt + 90 days. */
    expiresAt: millis("expires_at").notNull(),
    /** Wrong passwords sent with it since its last success. */
    failures: integer("failures").notNull().default(0),
  },
  (t) => [index("device_tokens_user_idx").on(t.userId, t.createdAt), index("device_tokens_expiry_idx").on(t.expiresAt)],
);

/** Where an account has signed in from: a device label and a client network (/24, /48), kept 90 days after last use. */
export const knownDevices = sqliteTable(
  "known_devices",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** The session's device label ("Chrome 142 on Linux"); empty without a user agent. */
    device: text("device").notNull(),
    network: text("network").notNull(),
    firstSeenAt: millis("first_seen_at").notNull(),
    /** Written at most once a day per device. */
    lastUsedAt: millis("last_used_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.device, t.network] }), index("known_devices_last_used_idx").on(t.lastUsedAt)],
);

// ── API keys (#28) ──

/**
 * API keys (`usk_<prefix>_<secret>`): the prefix finds the row, the secret exists only in the
 * answer that created it; the table keeps its SHA-256. A key acts as its owner narrowed to its
 * scopes; deleting the owner deletes the keys, deactivating them stops them (the guard's read).
 */
export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** 8 base62 characters, random: the key's public part and its lookup. */
    prefix: text("prefix").notNull().unique(),
    /** base64url SHA-256 of the secret (the part after the prefix). */
    secretHash: text("secret_hash").notNull(),
    /** Comma-separated, e.g. `users:read,orders:write`. */
    scopes: text("scopes").notNull(),
    createdAt: millis("created_at").notNull(),
    /** None: the key lives until revoked. */
    expiresAt: millis("expires_at"),
    /** Written at most once a minute per key (security/api-keys.ts). */
    lastUsedAt: millis("last_used_at"),
    lastUsedFrom: text("last_used_from"),
  },
  (t) => [index("api_keys_user_idx").on(t.userId)],
);

// ── Signing keys (#26) ──

/**
 * Token signing keys (TOKEN_SIGNING=EdDSA|ES256), shared by every instance on one primary. A key is
 * published (in the JWKS) from createdAt and signs from signsFrom: the latest key whose signsFrom
 * has come signs. The private half is sealed with DATA_ENCRYPTION_KEY (security/data-encryption.ts).
 * The row `HS512` holds no key: its createdAt records the switch from HS512, before which an HS512
 * token must have been issued to count.
 */
export const signingKeys = sqliteTable("signing_keys", {
  kid: text("kid").primaryKey(),
  /** EdDSA, ES256, or HS512 (the switch record). */
  alg: text("alg").notNull(),
  /** The public JWK as served (JSON); null for the HS512 record. */
  publicJwk: text("public_jwk"),
  /** The private JWK, sealed; null for the HS512 record. */
  privateJwk: text("private_jwk"),
  createdAt: millis("created_at").notNull(),
  signsFrom: millis("signs_from").notNull(),
  /** Withdrawn by `usersvc keys rotate --revoke`: its tokens are refused at once. */
  revokedAt: millis("revoked_at"),
  /** Whose key: `tokens` (user tokens) or `provider` (the OpenID Provider's); none on rows from before, where RS256 was the provider's and the rest the tokens'. */
  ring: text("ring"),
});

/* ---- Second factors (issue 27): TOTP, recovery codes, passkeys, and the ceremonies between two requests ---- */

/** A user's TOTP authenticator: pending until a first code confirms it. */
export const mfaTotp = sqliteTable("mfa_totp", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id, { onDelete: "cascade" }),
  /** The base32 secret sealed by the data cipher (security/data-encryption.ts); never plain. */
  secretSealed: text("secret_sealed").notNull(),
  createdAt: millis("created_at").notNull(),
  /** Null while pending. */
  confirmedAt: millis("confirmed_at"),
  /** The last 30-second step a code was accepted for: a code of it or any earlier one is refused. */
  lastStep: integer("last_step").notNull().default(0),
  lastUsedAt: millis("last_used_at"),
});

/** Recovery codes: a SHA-256 of each (≥ 50 random bits), single use. */
export const mfaRecoveryCodes = sqliteTable(
  "mfa_recovery_codes",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    codeHash: text("code_hash").notNull(),
    createdAt: millis("created_at").notNull(),
    usedAt: millis("used_at"),
  },
  (t) => [index("mfa_recovery_codes_user_idx").on(t.userId, t.codeHash)],
);

/** WebAuthn credentials (discoverable): the public key, its signature counter, and the user's name for it. */
export const passkeys = sqliteTable(
  "passkeys",
  {
    /** Random, the id in the API (never the credential id). */
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** base64url credential id, as the authenticator names it in an assertion. */
    credentialId: text("credential_id").notNull(),
    /** COSE public key, base64url. */
    publicKey: text("public_key").notNull(),
    counter: integer("counter").notNull(),
    /** Comma-separated transports the browser reported. */
    transports: text("transports"),
    name: text("name").notNull(),
    createdAt: millis("created_at").notNull(),
    lastUsedAt: millis("last_used_at"),
  },
  (t) => [uniqueIndex("passkeys_credential_idx").on(t.credentialId), index("passkeys_user_idx").on(t.userId)],
);

/**
 * What lives between two requests of a sign-in or a ceremony, in the database so any instance on
 * one primary can finish it: a passkey registration's challenge (`register`, deleted when used),
 * and the records of the sealed mfaTokens and passwordless challenges, which are not stored
 * themselves: used (`mfa-used`, `passkey-used`) and an mfaToken's wrong codes (`mfa-failures`);
 * and a first enrolment's code under MFA_REQUIRED_ROLES (`enrol-code`: its hash and wrong tries)
 * with the count of codes mailed (`enrol-code-mailed`); see store/mfa.ts. Keyed by a SHA-256 of
 * the token, challenge or key; each row expires.
 */
export const mfaChallenges = sqliteTable(
  "mfa_challenges",
  {
    id: text("id").primaryKey(),
    purpose: text("purpose").notNull(),
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    /** The WebAuthn challenge (base64url) an mfaToken's passkeyOptions carried; an enrolment code's hash. */
    challenge: text("challenge"),
    /** How the first step signed in (an mfaToken: pwd). */
    amr: text("amr"),
    /** Wrong codes (`mfa-failures`, `enrol-code`), or codes mailed in the window (`enrol-code-mailed`). */
    failures: integer("failures").notNull().default(0),
    expiresAt: millis("expires_at").notNull(),
  },
  (t) => [index("mfa_challenges_expiry_idx").on(t.expiresAt)],
);

// ── First run (#27) ──

/**
 * First run: the one setup token (row "setup", one at a time across instances, as a lease's row),
 * only its SHA-256; it lets `POST /api/account/setup` create the first ADMIN while none exists.
 */
export const setupTokens = sqliteTable("setup_tokens", {
  name: text("name").primaryKey(),
  tokenHash: text("token_hash").notNull(),
  createdAt: millis("created_at").notNull(),
  expiresAt: millis("expires_at").notNull(),
});

// ── Sign-in with other providers (#43) ──

/**
 * Accounts at other providers (an OpenID Connect issuer, or GitHub) that sign in to a user:
 * keyed by the provider's (issuer, subject), which never changes, unlike the e-mail either side
 * may hold; one identity belongs to one user. Deleting the user deletes its identities.
 */
export const identities = sqliteTable(
  "identities",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** The configured provider's name (OIDC_PROVIDERS), lower-case. */
    provider: text("provider").notNull(),
    /** The ID token's `iss` (GitHub: its web URL). */
    issuer: text("issuer").notNull(),
    /** The ID token's `sub` (GitHub: the numeric user id). */
    subject: text("subject").notNull(),
    /** The address the provider gave at the last sign-in, for the user's list. */
    email: text("email"),
    createdAt: millis("created_at").notNull(),
    lastUsedAt: millis("last_used_at"),
    /** OIDC_<NAME>_KEEP_TOKENS=on: the provider's tokens of the last sign-in, JSON sealed by the data cipher; else null. */
    tokensSealed: text("tokens_sealed"),
  },
  (t) => [uniqueIndex("identities_issuer_subject_unique").on(t.issuer, t.subject), index("identities_user_idx").on(t.userId)],
);

/**
 * A federated sign-in between its requests, in the database so any instance finishes what another
 * began: a started flow (`state`: its PKCE verifier, nonce, the page's code challenge and
 * returnTo; 10 minutes) and the one-time code the callback hands the page (`code`: the account it
 * signs in to; 60 seconds). Keyed by a SHA-256 of the state or code; taken (deleted) when used.
 */
export const federationFlows = sqliteTable(
  "federation_flows",
  {
    id: text("id").primaryKey(),
    /** state or code */
    kind: text("kind").notNull(),
    provider: text("provider").notNull(),
    /** JSON: what the next step checks and does. */
    data: text("data", { mode: "json" }).notNull(),
    expiresAt: millis("expires_at").notNull(),
  },
  (t) => [index("federation_flows_expiry_idx").on(t.expiresAt)],
);

// ── OpenID Provider (#44) ──

/** The apps that sign their users in through usersvc (features/oauth-server). A confidential client's secret: only its SHA-256. */
export const oauthClients = sqliteTable("oauth_clients", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  /** Random, public: the `client_id` the app sends. */
  clientId: text("client_id").notNull().unique(),
  name: text("name").notNull(),
  /** base64url SHA-256 of the secret; none for a public client. */
  secretHash: text("secret_hash"),
  /** JSON arrays of exact URIs. */
  redirectUris: text("redirect_uris").notNull(),
  postLogoutRedirectUris: text("post_logout_redirect_uris").notNull(),
  /** Comma-separated: what the client may ask for beyond openid, profile and email. */
  scopes: text("scopes").notNull(),
  /** Comma-separated: authorization_code, refresh_token, client_credentials. */
  grantTypes: text("grant_types").notNull(),
  firstParty: integer("first_party", { mode: "boolean" }).notNull().default(false),
  /** Registered by the app itself (RFC 7591): consent always shown. */
  dynamic: integer("dynamic", { mode: "boolean" }).notNull().default(false),
  createdAt: millis("created_at").notNull(),
  /** The algorithm its ID tokens are signed with (OIDC Registration's `id_token_signed_response_alg`): RS256, ES256 or EdDSA. */
  idTokenSignedResponseAlg: text("id_token_signed_response_alg").notNull().default("RS256"),
});

/** A user's consent to a client, for a set of scopes, until withdrawn. */
export const oauthConsents = sqliteTable(
  "oauth_consents",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    clientId: integer("client_id")
      .notNull()
      .references(() => oauthClients.id, { onDelete: "cascade" }),
    /** Comma-separated, sorted. */
    scopes: text("scopes").notNull(),
    createdAt: millis("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.clientId] })],
);

/**
 * What one authorization (or one client_credentials token) granted: every code, access and refresh
 * token names its grant, and revoking the grant ends them all. A grant without offline_access is
 * bound to the sign-in's session and ends with it.
 */
export const oauthGrants = sqliteTable(
  "oauth_grants",
  {
    /** 16 random bytes, base64url: the access tokens' `gid`. */
    id: text("id").primaryKey(),
    clientId: integer("client_id")
      .notNull()
      .references(() => oauthClients.id, { onDelete: "cascade" }),
    /** None for client_credentials (the client itself). */
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    sessionId: text("session_id").references(() => sessions.id, { onDelete: "cascade" }),
    /** The user's token version at the grant: a password change or deactivation ends it. */
    tokenVersion: integer("token_version"),
    scopes: text("scopes").notNull(),
    authTime: millis("auth_time"),
    amr: text("amr"),
    createdAt: millis("created_at").notNull(),
    revokedAt: millis("revoked_at"),
  },
  (t) => [index("oauth_grants_user_idx").on(t.userId, t.clientId)],
);

/** Authorization codes: only a SHA-256, single use, bound to the redirect URI and the PKCE challenge. */
export const oauthCodes = sqliteTable(
  "oauth_codes",
  {
    codeHash: text("code_hash").primaryKey(),
    grantId: text("grant_id")
      .notNull()
      .references(() => oauthGrants.id, { onDelete: "cascade" }),
    redirectUri: text("redirect_uri").notNull(),
    codeChallenge: text("code_challenge"),
    nonce: text("nonce"),
    expiresAt: millis("expires_at").notNull(),
    usedAt: millis("used_at"),
  },
  (t) => [index("oauth_codes_expiry_idx").on(t.expiresAt)],
);

/** A grant's rotating refresh tokens: only a SHA-256 of each, as refresh_tokens keeps the sessions'. */
export const oauthRefreshTokens = sqliteTable(
  "oauth_refresh_tokens",
  {
    tokenHash: text("token_hash").primaryKey(),
    grantId: text("grant_id")
      .notNull()
      .references(() => oauthGrants.id, { onDelete: "cascade" }),
    createdAt: millis("created_at").notNull(),
    rotatedAt: millis("rotated_at"),
    /** The grace after its rotation answered once more. */
    graceUsed: integer("grace_used", { mode: "boolean" }).notNull().default(false),
  },
  (t) => [index("oauth_refresh_tokens_grant_idx").on(t.grantId)],
);
