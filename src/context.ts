/**
 * What createApp hands every feature: built once per app, passed as an argument (never
 * imported as a global), so tests and worker processes can build as many apps as they like.
 */
import type { Config } from "./config";
import type { Database } from "./db/database";
import type { Success } from "./envelope";
import type { Logging } from "./logging/logger";
import type { Metrics } from "./metrics";
import type { Authenticator, authPlugin } from "./security/guard";
import type { Tokens } from "./security/bearer-tokens";
import type { DataCipher } from "./security/data-encryption";
import type { SessionActivity } from "./security/session-activity";
import type { KeyActivity } from "./security/api-keys";
import type { PaymentGateway } from "./payment-gateway";
import type { FileStore } from "./storage/files";
import type { Tracing } from "./tracing";

/** Whether the process accepts traffic; readiness reports DOWN while starting or draining. */
export interface Lifecycle {
  ready: boolean;
  /**
   * Called after the first answer of a route other than the health probes (checked once per
   * route, never per request): main.ts gives the binary's JIT its normal policy then.
   */
  serving?: () => void;
  /** Called after the first answer of a health probe (likewise once): main.ts hands back start-up's leftovers then. */
  probed?: () => void;
}

export interface AppDeps {
  config: Config;
  /** Reads, and units of work for writes (src/db/database.ts). */
  db: Database;
  metrics: Metrics;
  logging: Logging;
  tokens: Tokens;
  /** Seals secrets kept in the database (DATA_ENCRYPTION_KEY). */
  cipher: DataCipher;
  /** Uploaded files: a local folder or S3 (FILE_STORAGE). */
  files: FileStore;
  lifecycle: Lifecycle;
  /** The clock, injectable where a test is about time (login throttling windows). */
  now?: () => number;
  /** Card payments; the built-in simulator when absent. */
  paymentGateway?: PaymentGateway;
  /** A span per request (OTEL_EXPORTER_OTLP_ENDPOINT); absent: no tracing hook runs. */
  tracing?: Tracing;
}

export interface AppContext extends AppDeps {
  now: () => number;
  /** A success envelope (data, message) stamped by `now`. */
  ok: <T>(data: T, message?: string) => Success<T>;
  logger: Logging["root"];
  authenticator: Authenticator;
  /** Notes when sessions were used; written in batches (security/session-activity.ts). */
  sessionActivity: SessionActivity;
  /** Notes when API keys were used; written in batches (security/api-keys.ts). */
  keyActivity: KeyActivity;
  /** The access guard plugin: `.use(ctx.auth)`, then `access: { allow: "USER" }` on a route or group (security/caller.ts `Access`). */
  auth: ReturnType<typeof authPlugin>;
}
