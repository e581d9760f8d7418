#!/usr/bin/env bun
/**
 * The program: the only place with side effects at start (configuration, database,
 * migrations, listening) and the only place that exits. `usersvc --help` lists the commands.
 */
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { createApp } from "./app";
import { ConfigError, loadConfig, looksLikeEmail, type Config, type Env } from "./config";
import { optionOf, SETTING_NAMES, settingsHelp } from "./settings";
import type { Lifecycle } from "./context";
import { openDatabase } from "./db/open";
import { migrate } from "./db/migrate";
import { ensureAdmin } from "./features/auth/bootstrap";
import { issueSetupLink, setupNotice } from "./features/auth/first-run";
import { issueEnrolCode } from "./features/mfa/enrol-code";
import { messageOf, translate } from "./catalogue";
import { AppError, Violations } from "./errors";
import { createDataCipher } from "./security/data-encryption";
import { resolveDataEncryptionKey, resolveJwtSecret } from "./security/kept-secrets";
import { configuredTokens } from "./security/bearer-tokens";
import { rotateRings, UnknownKeyError, type Keyring } from "./security/signing-keys";
import { createLogging, logStream } from "./logging/logger";
import { redactUrl } from "./logging/redact-url";
import { normalizeEmail, tokenHolder } from "./store/users";
import { createMetrics } from "./metrics";
import { startOutboxSender } from "./features/notifications/sender";
import { channelsFor } from "./features/notifications/channels";
import { createFileStore, type FileStore } from "./storage/files";
import { sweepOrphanedFiles } from "./features/files/service";
import { startNameIndexUpkeep } from "./features/search/index-upkeep";
import { ordersDeps, startPaymentTimeoutSweep } from "./features/orders/service";
import type { Database } from "./db/database";
import type { Logging } from "./logging/logger";
import type { Metrics } from "./metrics";
import { VERSION } from "./version";
import { startTracing, type Tracing } from "./tracing";
import { backupCommand, restoreCommand } from "./features/backups/commands";
import { clientsCommand } from "./features/oauth-server/commands";
import { providerKeyrings } from "./features/oauth-server/tokens";
import { startBackupDuties } from "./features/backups/schedule";
import { runSnapshotChild, SNAPSHOT_COMMAND } from "./features/backups/snapshot-process";
import { isWorkerChild, joinMetricsPeers, metricsSocketsDir, stopWhenOrphaned, superviseWorkers } from "./workers";

const HELP = `usersvc ${VERSION.version} — user-management service

Usage:
  usersvc [serve] [--port N] [--workers N|auto] [--<setting> VALUE…]   migrate, then serve
  usersvc migrate                                           apply database migrations and exit
  usersvc admin create --email E --password P [--name N]    create or promote an ADMIN
  usersvc token --email E                                   print a bearer token (local development)
  usersvc keys rotate [--revoke KID]                        publish the next signing keys, the provider's RS256 too (sign in 10 minutes); --revoke withdraws KID at once
  usersvc keys rewrap                                       seal the private signing keys under the current DATA_ENCRYPTION_KEY
  usersvc clients create --name N --redirect-uri URI… [--public] [--scopes S,…] [--id-token-alg RS256|ES256|EdDSA]
                                                            register an OpenID Provider client; prints its id and, once, its secret
  usersvc clients list | clients delete CLIENT_ID           the registered clients
  usersvc setup-link                                        print a fresh one-time link to create the first ADMIN
  usersvc mfa enrol-code --email E                          print a code that confirms E's first second factor (MFA_REQUIRED_ROLES without SMTP; 10 minutes)
  usersvc backup [--output DIR]                             write a backup archive, print its path
  usersvc restore ARCHIVE [--discard-secrets]               restore a backup (the server stopped); --discard-secrets drops the sealed secrets no key at hand opens
  usersvc --help | --version

Settings come from the environment or the same-named flag (DATABASE_URL or --database-url):
${settingsHelp()}
`;

/** Exit code 2: the command line or the configuration is wrong. */
class UsageError extends Error {}

/** A rethrow that turns PASSWORD_POLICY's refusal of a bootstrap password into `asError`'s one line ("… is too common"). */
const refusedPassword =
  (asError: (problem: string) => Error) =>
  (error: unknown): never => {
    if (error instanceof Violations) throw asError(error.violations.map((v) => translate(v.key, "en", v.params)).join(", "));
    throw error;
  };

/** The command line, with flag errors in our words (node's parseArgs text quotes unevenly). */
function parseCommandLine(argv: string[]) {
  const options: Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }> = {
    help: { type: "boolean", short: "h" },
    version: { type: "boolean", short: "v" },
    email: { type: "string" },
    password: { type: "string" },
    name: { type: "string" },
    output: { type: "string" },
    revoke: { type: "string" },
    "discard-secrets": { type: "boolean" },
    "redirect-uri": { type: "string", multiple: true },
    public: { type: "boolean" },
    scopes: { type: "string" },
    "id-token-alg": { type: "string" },
  };
  for (const name of SETTING_NAMES) options[optionOf(name)] = { type: "string" };
  const parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: false, tokens: true });
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    const option = options[token.name];
    if (!option) throw new UsageError(`unknown flag ${token.rawName}`);
    if (option.type === "string" && token.value === undefined) throw new UsageError(`${token.rawName} needs a value`);
    if (option.type === "boolean" && token.value !== undefined) throw new UsageError(`${token.rawName} takes no value`);
  }
  return parsed as { values: Record<string, string | string[] | boolean | undefined>; positionals: string[] };
}

function configFrom(values: Record<string, unknown>): Config {
  const env: Env = { ...process.env };
  for (const name of SETTING_NAMES) {
    const flag = values[optionOf(name)];
    if (typeof flag === "string") env[name] = flag;
  }
  return loadConfig(env);
}

/** With tracing, the database makes a span per unit of work inside a trace, counting its round trips. */
async function openConfigured(config: Config, tracing?: Tracing) {
  const database = await openDatabase({
    url: config.databaseUrl,
    authToken: config.databaseAuthToken,
    syncUrl: config.databaseSyncUrl,
    syncIntervalMs: config.databaseSyncIntervalMs,
    maxStalenessMs: config.databaseMaxStalenessMs,
    driver: config.databaseDriver,
    busyTimeoutMs: config.databaseBusyTimeoutMs,
    onRoundTrip: tracing?.roundTrip,
  });
  return tracing ? tracing.database(database) : database;
}

async function openMigrated(config: Config, tracing?: Tracing) {
  const database = await openConfigured(config, tracing);
  await migrate(database);
  return database;
}

/**
 * The data folder as serve and `admin create` leave it: database migrated, JWT key kept, upload
 * storage there. A --workers child (`runMigrations: false`) finds the database migrated by its primary.
 */
async function prepareDataFolder(config: Config, logger: Logger, { runMigrations = true, tracing }: { runMigrations?: boolean; tracing?: Tracing } = {}) {
  const database = runMigrations ? await openMigrated(config, tracing) : await openConfigured(config, tracing);
  try {
    const secret = resolveJwtSecret(config.jwtSecret, config.dataDir, logger);
    const cipher = createDataCipher(resolveDataEncryptionKey(config.dataEncryptionKey, config.dataDir, logger), config.dataEncryptionKeysPrevious);
    const files = await createFileStore(config.fileStorage, config.s3);
    return { database, secret, cipher, files };
  } catch (error) {
    database.close();
    throw error;
  }
}

/** A one-shot command's logs: stderr, so stdout carries only its result (`TOKEN=$(usersvc token …)`). */
const commandLogger = (config: Config) => createLogging(config.logLevel, config.logFormat, logStream(config.logFormat, 2)).get("cli");

/** The bootstrap admin of ADMIN_EMAIL and ADMIN_PASSWORD, created or promoted (the primary's step: a child finds it done). */
async function ensureConfiguredAdmin(config: Config, database: Database, logger: Logger, now: () => number) {
  if (!config.adminEmail || !config.adminPassword) return;
  const { created } = await ensureAdmin(database, { email: config.adminEmail, password: config.adminPassword }, now, { config, logger }).catch(
    refusedPassword((problem) => new ConfigError([`ADMIN_PASSWORD ${problem}`])),
  );
  logger.info({ email: config.adminEmail, created }, "admin account ensured");
}

/**
 * First run: while no ADMIN exists and ADMIN_EMAIL is unset, one plain line on stderr with the
 * one-time setup link (instances starting together: one of them gets the link). A failure only warns.
 */
async function announceSetupLink(config: Config, database: Database, logger: Logger, port: number, now: () => number) {
  if (config.adminEmail) return;
  try {
    const notice = setupNotice(await issueSetupLink(database, { ...config, port }, new Date(now()), false));
    if (notice) process.stderr.write(notice);
  } catch (error) {
    logger.warn({ err: error }, "could not issue the first-run setup link: `usersvc setup-link` prints one");
  }
}

/**
 * The binary starts with a reluctant JIT (scripts/build.ts), kept while only start-up code and
 * health probes have run: their call counts would otherwise tier up hundreds of functions right
 * after listening, ~5 MiB of compiled code and compiler pages in a server nobody uses yet
 * (npm run bench -- --idle 9). The first answer to anything else gives the normal policy.
 */
function startingLifecycle(): Lifecycle {
  const lifecycle: Lifecycle = {
    ready: false,
    serving: () => {
      Bun.unsafe.setJITPolicy(1);
      lifecycle.serving = undefined;
    },
    // The first readiness probe's answer built the app's request path (~1 MiB of code and garbage
    // an idle server keeps otherwise): handed back once it is written.
    probed: () => {
      lifecycle.probed = undefined;
      setTimeout(handBackStartup, 0);
    },
  };
  return lifecycle;
}

/** The metrics registry; under --workers, joined with the other processes' so any of them answers for all. */
function sharedMetrics(config: Config) {
  const metrics = createMetrics();
  const peers = config.workers > 1 ? joinMetricsPeers(metrics.own, metricsSocketsDir()) : undefined;
  if (peers) metrics.current = peers.current;
  return { metrics, peers };
}

function listen(app: ReturnType<typeof createApp>, config: Config) {
  // SO_REUSEPORT only for --workers (their children share the setting): otherwise a second
  // instance started by mistake would silently share the port instead of failing to start.
  try {
    app.listen({ port: config.port, hostname: config.host, reusePort: config.workers > 1 });
  } catch (error) {
    // Bun's own text ("ENOENT … listen" for an unknown host) does not say what it tried.
    throw new Error(`cannot listen on ${config.host}:${config.port}: ${(error as Error).message}`);
  }
}

/** Removes uploaded bytes whose row a crash kept from committing; logs what it did. */
const orphanedFileSweep = (deps: { database: Database; files: FileStore; logger: Logger; now: () => number }) => () =>
  sweepOrphanedFiles({ db: deps.database, files: deps.files }, deps.now()).then(
    ({ removed, kept }) => {
      if (removed > 0) deps.logger.info({ removed }, "removed stored files that had no record");
      if (kept > 0) deps.logger.info({ kept }, "kept stored files without a record: uploaded after the restored backup was taken");
    },
    (error) => deps.logger.warn({ err: error }, "orphaned-file sweep failed"),
  );

/**
 * What only the primary process does, once for the whole service: deliver the outbox (its state
 * is in the table, so a restart resumes it), supervise the --workers children, sweep orphaned
 * files (now and hourly), fail orders left unpaid past ORDER_PAYMENT_TIMEOUT, and keep the
 * name-search index in one piece after bursts of writes.
 */
function startPrimaryDuties(deps: {
  config: Config;
  database: Database;
  files: FileStore;
  logging: Logging;
  metrics: Metrics;
  logger: Logger;
  now: () => number;
  tracing?: Tracing;
}) {
  const { config, database, logging, logger, now } = deps;
  const channels = channelsFor(config, database, logging.get("outbox"), now);
  const sender = startOutboxSender({ db: database, logger: logging.get("outbox"), channels, metrics: deps.metrics, now, tracing: deps.tracing });
  if (config.notifyWebhookUrl && !config.notifyWebhookSecret) {
    logger.warn("NOTIFY_WEBHOOK_SECRET is not set: webhook deliveries are unsigned, so the receiver cannot tell them from forgeries");
  }
  if (config.mfaRequiredRoles.length > 0 && !config.smtpUrl) {
    logger.warn("MFA_REQUIRED_ROLES is set without SMTP_URL: no enrolment code can be mailed, so `usersvc mfa enrol-code --email E` must give each first second factor's code");
  }
  // A shared database means other instances: a folder of files is this one's alone.
  if (!config.fileStorage.startsWith("s3:") && (config.databaseSyncUrl || !config.databaseUrl.startsWith("file:"))) {
    logger.warn(
      "FILE_STORAGE is a folder on a shared database (a remote primary or an embedded replica): files uploaded here are missing on every other instance; use s3://bucket/prefix",
    );
  }
  const supervisor = config.workers > 1 ? superviseWorkers(config.workers - 1, logger) : undefined;
  const sweep = orphanedFileSweep({ ...deps, logger });
  const sweeper = setInterval(sweep, 60 * 60 * 1000);
  const paymentTimeouts = startPaymentTimeoutSweep(ordersDeps({ db: database, logging, config, now }));
  const upkeep = startNameIndexUpkeep(database, logging.get("search"), deps.metrics);
  return {
    firstSweep: sweep(),
    /** Starts stopping the worker children; settles once they have exited. */
    stopWorkers: () => supervisor?.stop(),
    async stop() {
      await sender.stop();
      for (const channel of channels) channel.close?.();
      clearInterval(sweeper);
      await paymentTimeouts?.stop();
      await upkeep.stop();
    },
  };
}

/**
 * Start-up is over once the first sweep has settled. A full collection, then Bun.shrink (JSC's
 * shrinkFootprintWhenIdle: frees code and heap blocks it can rebuild; typed deprecated, no
 * successor) hand back what migrations, route building and run-once code left: ~1.5 MiB of idle RSS.
 */
function handBackStartup() {
  Bun.gc(true);
  Bun.shrink();
}

const settleAfterStart = (started: Promise<unknown>) => void started.then(handBackStartup);

/** SIGTERM or SIGINT (or, for a child, its primary gone): stop taking requests, drain them for up to 20 s, stop every duty, exit 0. */
function stopOnSignal(steps: {
  app: ReturnType<typeof createApp>;
  lifecycle: Lifecycle;
  logging: Logging;
  logger: Logger;
  stopWorkers?: () => Promise<void> | undefined;
  stopDuties: () => Promise<void>;
}) {
  const { app, lifecycle, logger } = steps;
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    lifecycle.ready = false;
    logger.info({ signal }, "draining in-flight requests");
    const children = steps.stopWorkers?.();
    const drained = app.server?.stop(false);
    const timedOut = await Promise.race([drained?.then(() => false), Bun.sleep(20_000).then(() => true)]);
    if (timedOut) {
      logger.warn("requests still running after 20 s: closing their connections");
      await app.server?.stop(true);
    }
    await children;
    await steps.stopDuties();
    logger.info("stopped");
    steps.logging.root.flush();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  return shutdown;
}

/**
 * Serves until a signal. The primary (or the only process) migrates the database and ensures the
 * admin before listening, then runs the service-wide duties; a --workers child finds both done
 * and only answers requests, stopping when its primary is gone.
 */
async function serve(config: Config) {
  // Loads the OpenTelemetry SDK only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set.
  const tracing = await startTracing(config.tracing, VERSION.version);
  const logging = createLogging(config.logLevel, config.logFormat, undefined, tracing?.logFields);
  const logger = logging.get("main");
  // The app's one clock: every timestamp the service makes comes from here.
  const now = Date.now;
  const child = isWorkerChild();
  const { database, secret, cipher, files } = await prepareDataFolder(config, logger, { runMigrations: !child, tracing });
  if (!child) await ensureConfiguredAdmin(config, database, logger, now);
  // Its lease tells `usersvc restore` the data folder is in use; the primary also runs BACKUP_SCHEDULE.
  const backups = await startBackupDuties({ config, db: database, logger: logging.get("backup"), now }, { primary: !child });
  const lifecycle = startingLifecycle();
  const { metrics, peers } = sharedMetrics(config);
  const tokens = configuredTokens(config, secret, database, cipher, now);
  // Under EdDSA/ES256 the key set is brought up to date (one instance creates the first key) before serving.
  await tokens.keyring.signer();
  const app = createApp({ config, db: database, metrics, logging, tokens, cipher, lifecycle, files, now, tracing });
  listen(app, config);
  lifecycle.ready = true;
  const duties = child ? undefined : startPrimaryDuties({ config, database, files, logging, metrics, logger, now, tracing });
  settleAfterStart(duties?.firstSweep ?? Promise.resolve());
  if (!child) {
    await announceSetupLink(config, database, logger, app.server?.port ?? config.port, now);
    logger.info(
      { port: app.server?.port, host: config.host, basePath: config.basePath || "/", database: redactUrl(config.databaseUrl), workers: config.workers, version: VERSION.version },
      "usersvc listening",
    );
  }
  const shutdown = stopOnSignal({
    app,
    lifecycle,
    logging,
    logger,
    stopWorkers: duties?.stopWorkers,
    async stopDuties() {
      peers?.close();
      await duties?.stop();
      await backups.stop();
      database.close();
      await tracing?.shutdown();
    },
  });
  if (child) stopWhenOrphaned(() => void shutdown("primary gone"));
}

/** `keys rotate`'s lines, one a ring: which key signs from when (and which was withdrawn). */
async function rotateCommand(rings: Keyring[], revoke: string | undefined) {
  const rotated = await rotateRings(rings, revoke).catch((error) => {
    throw error instanceof UnknownKeyError ? new UsageError(error.message) : error;
  });
  return rotated.map((r) => `${r.revoked ? `revoked ${r.revoked}; ` : ""}key ${r.kid} signs from ${new Date(r.signsFrom).toISOString()}`).join("\n");
}

/** The commands other than serve have no app, so their clock is the system's: each passes `Date.now` explicitly. */
async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv);
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${VERSION.name} ${VERSION.version} (${VERSION.commit}, ${VERSION.runtime})\n`);
    return 0;
  }
  const [command = "serve", ...rest] = positionals;
  const expectNoMore = (n: number) => {
    if (rest.length > n) throw new UsageError(`unexpected argument "${rest[n]}"`);
  };
  switch (command) {
    case "serve":
      expectNoMore(0);
      await serve(configFrom(values));
      return -1; // keeps running
    case "migrate": {
      expectNoMore(0);
      const database = await openMigrated(configFrom(values));
      database.close();
      process.stdout.write("migrations applied\n");
      return 0;
    }
    case "admin": {
      if (rest[0] !== "create") throw new UsageError(rest[0] === undefined ? "admin needs a command: admin create --email E --password P" : `unknown admin command "${rest[0]}"`);
      expectNoMore(1);
      if (typeof values.email !== "string" || typeof values.password !== "string") throw new UsageError("admin create needs --email and --password");
      if (!looksLikeEmail(values.email)) throw new UsageError(`--email must be an e-mail address (got "${values.email}")`);
      const config = configFrom(values);
      const { database } = await prepareDataFolder(config, commandLogger(config));
      const { id, created } = await ensureAdmin(database, { email: values.email, password: values.password, name: values.name as string | undefined }, Date.now, {
        config,
        logger: commandLogger(config),
      }).catch(refusedPassword((problem) => new UsageError(`--password ${problem}`)));
      database.close();
      process.stdout.write(`${created ? "created" : "promoted"} admin ${values.email} (id ${id})\n`);
      return 0;
    }
    case "token": {
      expectNoMore(0);
      if (typeof values.email !== "string") throw new UsageError("token needs --email");
      const config = configFrom(values);
      // The data folder's keys: under EdDSA/ES256 the token is signed by the database's current key.
      const { database, secret, cipher } = await prepareDataFolder(config, commandLogger(config));
      try {
        const user = await tokenHolder(database, normalizeEmail(values.email));
        if (!user?.active) {
          process.stderr.write(`usersvc: no active user with e-mail ${values.email}\n`);
          return 1;
        }
        process.stdout.write(`${await configuredTokens(config, secret, database, cipher, Date.now).issue(user.email, user.tokenVersion, user.id)}\n`);
        return 0;
      } finally {
        database.close();
      }
    }
    case "clients": {
      const sub = rest[0];
      if (sub !== "create" && sub !== "list" && sub !== "delete")
        throw new UsageError(sub === undefined ? "clients needs a command: clients create | list | delete CLIENT_ID" : `unknown clients command "${sub}"`);
      expectNoMore(sub === "delete" ? 2 : 1);
      if (sub === "delete" && rest[1] === undefined) throw new UsageError("clients delete needs a CLIENT_ID");
      if (sub === "create" && (typeof values.name !== "string" || values["redirect-uri"] === undefined)) throw new UsageError("clients create needs --name and --redirect-uri");
      const config = configFrom(values);
      const { database } = await prepareDataFolder(config, commandLogger(config));
      try {
        const args = {
          name: values.name as string | undefined,
          redirectUris: (values["redirect-uri"] as string[] | undefined) ?? [],
          public: values.public === true,
          scopes: values.scopes as string | undefined,
          idTokenAlg: values["id-token-alg"] as string | undefined,
          clientId: rest[1],
        };
        process.stdout.write(
          `${await clientsCommand(database, Date.now, sub, args).catch((error) => {
            throw error instanceof AppError ? new UsageError(messageOf(error.code, "en", error.params)) : error;
          })}\n`,
        );
      } finally {
        database.close();
      }
      return 0;
    }
    case "keys": {
      if (rest[0] !== "rotate" && rest[0] !== "rewrap")
        throw new UsageError(rest[0] === undefined ? "keys needs a command: keys rotate [--revoke KID] | keys rewrap" : `unknown keys command "${rest[0]}"`);
      expectNoMore(1);
      if (rest[0] === "rewrap" && values.revoke !== undefined) throw new UsageError("--revoke goes with keys rotate");
      const config = configFrom(values);
      const { database, secret, cipher } = await prepareDataFolder(config, commandLogger(config));
      try {
        const { keyring } = configuredTokens(config, secret, database, cipher, Date.now);
        const revoke = values.revoke as string | undefined;
        // The OpenID Provider's rings too (RS256, ES256, EdDSA): when it serves, or a kid to withdraw may be one of theirs.
        const provider = config.oauthServer || revoke !== undefined ? providerKeyrings(config, database, cipher, Date.now) : [];
        const rings = [...(config.tokenSigning === "HS512" ? [] : [keyring]), ...provider];
        process.stdout.write(
          // Under HS512 with no provider, the user ring's rotate says why there is nothing to rotate.
          `${rest[0] === "rotate" ? await rotateCommand(rings.length > 0 ? rings : [keyring], revoke) : `resealed ${await keyring.rewrap()} private signing keys`}\n`,
        );
      } finally {
        database.close();
      }
      return 0;
    }
    case "setup-link": {
      expectNoMore(0);
      const config = configFrom(values);
      const database = await openMigrated(config);
      const issued = await issueSetupLink(database, config, new Date(), true).finally(() => database.close());
      if (!("link" in issued)) {
        process.stderr.write(`usersvc: an ADMIN exists already; sign in at ${config.publicUrl ?? `http://localhost:${config.port}`}${config.basePath}/admin\n`);
        return 1;
      }
      process.stdout.write(`${issued.link}\n`);
      return 0;
    }
    case "mfa": {
      if (rest[0] !== "enrol-code") throw new UsageError(rest[0] === undefined ? "mfa needs a command: mfa enrol-code --email E" : `unknown mfa command "${rest[0]}"`);
      expectNoMore(1);
      if (typeof values.email !== "string") throw new UsageError("mfa enrol-code needs --email");
      const config = configFrom(values);
      const database = await openMigrated(config);
      const issued = await issueEnrolCode({ db: database, now: Date.now }, values.email).finally(() => database.close());
      if ("refused" in issued) {
        process.stderr.write(`usersvc: ${issued.refused}\n`);
        return 1;
      }
      process.stdout.write(`${issued.code}\n`);
      return 0;
    }
    case "backup": {
      expectNoMore(0);
      const config = configFrom(values);
      const database = await openMigrated(config);
      try {
        process.stdout.write(`${await backupCommand(config, database, commandLogger(config), Date.now, values.output as string | undefined)}\n`);
      } finally {
        database.close();
      }
      return 0;
    }
    case "restore": {
      expectNoMore(1);
      if (!rest[0]) throw new UsageError("restore needs the archive: usersvc restore ARCHIVE");
      const config = configFrom(values);
      const discardSecrets = values["discard-secrets"] === true;
      process.stdout.write(`${await restoreCommand(config, rest[0], commandLogger(config), Date.now, { discardSecrets })}\n`);
      return 0;
    }
    case SNAPSHOT_COMMAND:
      return runSnapshotChild();
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (error) => {
    if (error instanceof ConfigError) {
      process.stderr.write(`usersvc: invalid configuration: ${error.problems.join("; ")}\n`);
      process.exit(2);
    }
    if (error instanceof UsageError) {
      process.stderr.write(`usersvc: ${error.message} (see usersvc --help)\n`);
      process.exit(2);
    }
    process.stderr.write(`usersvc: ${(error as Error)?.message ?? error}\n`);
    process.exit(1);
  },
);
