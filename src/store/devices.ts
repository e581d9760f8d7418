/**
 * Device tokens and known devices (device_tokens, known_devices): every statement on them.
 *
 * A deviceToken exists raw only in the login answer that hands it out (and in the client that
 * sends it back); the table keeps a SHA-256, its account, its end and its own failures. A known
 * device is a device label and client network an account has signed in from: a sign-in from one
 * the account does not know mails NEW_SIGN_IN, in the sign-in's own unit.
 */
import { and, eq, lte, sql } from "drizzle-orm";
import type { Db, Reader } from "../db/database";
import { bound, placeholder, prepared } from "../db/prepared";
import { deviceTokens, knownDevices, outbox, users } from "../db/schema";
import { notificationSelection, traced } from "./outbox";
import { refreshHash as tokenHash } from "./sessions";

const DAY_MS = 24 * 60 * 60 * 1000;
/** A deviceToken lives 90 days from the login that handed it out. */
export const DEVICE_TOKEN_LIFETIME_MS = 90 * DAY_MS;
/** Wrong passwords sent with a deviceToken that void it. */
export const DEVICE_TOKEN_MAX_FAILURES = 5;
/** A known device is forgotten 90 days after its last sign-in. */
export const KNOWN_DEVICE_KEPT_MS = 90 * DAY_MS;
/** The newest this many deviceTokens of an account are kept (a client that never sends its token back gets a new one each login). */
const DEVICE_TOKENS_PER_USER = 50;

/** A deviceToken's row, as a login judges it (instants in ms). */
export interface DeviceTokenRow {
  userId: number;
  expiresAt: number;
  failures: number;
}

const deviceByHash = prepared((db: Reader) =>
  db
    .select({ userId: deviceTokens.userId, expiresAt: sql<number>`${deviceTokens.expiresAt}`, failures: deviceTokens.failures })
    .from(deviceTokens)
    .where(eq(deviceTokens.tokenHash, sql.placeholder("tokenHash")))
    .prepare(),
);
/** The row of a presented deviceToken (none for an unknown one): a statement for a login's read unit. */
export const deviceTokenRows = (db: Reader, token: string) => bound(deviceByHash(db), { tokenHash: tokenHash(token) });

const insertDeviceToken = prepared((tx: Db) =>
  tx
    .insert(deviceTokens)
    .values({ tokenHash: sql.placeholder("tokenHash"), userId: sql.placeholder("userId"), createdAt: placeholder<Date>("now"), expiresAt: placeholder<Date>("expiresAt") })
    .prepare(),
);
const dropBeyondCap = prepared((tx: Db) =>
  tx
    .delete(deviceTokens)
    .where(
      sql`${deviceTokens.tokenHash} in (select token_hash from device_tokens where user_id = ${sql.placeholder("userId")}
        order by created_at desc limit -1 offset ${DEVICE_TOKENS_PER_USER})`,
    )
    .prepare(),
);
/** A new deviceToken of the account, keeping its newest DEVICE_TOKENS_PER_USER: statements for the sign-in's unit. */
export function newDeviceTokenRows(tx: Db, token: string, userId: number, now: Date) {
  const expiresAt = new Date(now.getTime() + DEVICE_TOKEN_LIFETIME_MS);
  return [bound(insertDeviceToken(tx), { tokenHash: tokenHash(token), userId, now, expiresAt }), bound(dropBeyondCap(tx), { userId })];
}

const setDeviceFailures = prepared((tx: Db, shape) =>
  tx
    .update(deviceTokens)
    .set({ failures: shape === "failed" ? sql`${deviceTokens.failures} + 1` : 0 })
    .where(eq(deviceTokens.tokenHash, sql.placeholder("tokenHash")))
    .prepare(),
);
/** One more failure of the deviceToken's own: a statement for the failure's unit. */
export const deviceFailureStatement = (tx: Db, token: string) => bound(setDeviceFailures(tx, "failed"), { tokenHash: tokenHash(token) });
/** The deviceToken's failures cleared by a success: a statement for the sign-in's unit. */
export const deviceSuccessStatement = (tx: Db, token: string) => bound(setDeviceFailures(tx, "cleared"), { tokenHash: tokenHash(token) });

/** Every deviceToken of the account void (a password reset): a statement for its unit. */
export const forgetDeviceTokens = (tx: Db, userId: number) => tx.delete(deviceTokens).where(eq(deviceTokens.userId, userId));

/** NEW_SIGN_IN to the account's owner, unless the account knows the device label and network already. */
const newSignInMail = prepared((tx: Db) =>
  tx
    .insert(outbox)
    .select(
      tx
        .select(
          notificationSelection(
            "NEW_SIGN_IN",
            placeholder<string>("email"),
            sql`json_object('userId', ${sql.placeholder("userId")}, 'device', ${sql.placeholder("device")}, 'address', ${sql.placeholder("address")}, 'signedInAt', ${sql.placeholder("at")})`,
            placeholder<Date>("at"),
          ),
        )
        .from(users)
        .where(
          and(
            eq(users.id, sql.placeholder("userId")),
            sql`not exists (select 1 from ${knownDevices} where ${knownDevices.userId} = ${sql.placeholder("userId")}
              and ${knownDevices.device} = ${sql.placeholder("device")} and ${knownDevices.network} = ${sql.placeholder("network")})`,
          ),
        ),
    )
    .prepare(),
);

/** The device noted as known (its last use written at most once a day). */
const noteKnownDevice = prepared((tx: Db) =>
  tx
    .insert(knownDevices)
    .values({
      userId: sql.placeholder("userId"),
      device: sql.placeholder("device"),
      network: sql.placeholder("network"),
      firstSeenAt: placeholder<Date>("now"),
      lastUsedAt: placeholder<Date>("now"),
    })
    .onConflictDoUpdate({
      target: [knownDevices.userId, knownDevices.device, knownDevices.network],
      set: { lastUsedAt: sql`${sql.placeholder("at")}` },
      setWhere: sql`${knownDevices.lastUsedAt} <= ${sql.placeholder("at")} - ${DAY_MS}`,
    })
    .prepare(),
);

/** A sign-in's device, as known_devices keys it. */
export interface SignInDevice {
  userId: number;
  email: string;
  /** The device label; none without a user agent. */
  device: string | null;
  network: string;
  address: string;
}

/**
 * The sign-in's device noted as known, and first, unless `quiet`, NEW_SIGN_IN to the owner if it
 * was not: statements for the sign-in's unit (no read of their own).
 */
export function knownDeviceRows(tx: Db, signIn: SignInDevice, now: Date, quiet: boolean) {
  const values = { userId: signIn.userId, device: signIn.device ?? "", network: signIn.network };
  const noted = bound(noteKnownDevice(tx), { ...values, now, at: now.getTime() });
  if (quiet) return [noted];
  const mail = bound(newSignInMail(tx), traced({ ...values, email: signIn.email, address: signIn.address, at: now.getTime() }));
  return [mail, noted];
}

const endedDeviceTokens = prepared((tx: Db) =>
  tx
    .delete(deviceTokens)
    .where(lte(deviceTokens.expiresAt, sql.placeholder("now")))
    .prepare(),
);
const unusedDevices = prepared((tx: Db) =>
  tx
    .delete(knownDevices)
    .where(lte(knownDevices.lastUsedAt, sql.placeholder("before")))
    .prepare(),
);

/** Ended deviceTokens and devices unused for 90 days go: statements of the outbox sender's housekeeping. */
export const forgetStaleDevices = (tx: Db, now: number) => [bound(endedDeviceTokens(tx), { now }), bound(unusedDevices(tx), { before: now - KNOWN_DEVICE_KEPT_MS })];
