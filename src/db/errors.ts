/**
 * What a database failure means, whichever driver raised it; services ask here, never read
 * error text themselves. How each driver reports a failure:
 *
 * | driver                  | where                    | e.g. a duplicate key                                   |
 * |-------------------------|--------------------------|--------------------------------------------------------|
 * | bun:sqlite              | SQLiteError code, errno  | code SQLITE_CONSTRAINT_UNIQUE, errno 2067              |
 * | @libsql/client, file:   | LibsqlError extendedCode | code SQLITE_CONSTRAINT, extendedCode …_UNIQUE, rawCode |
 * | @libsql/client, remote  | LibsqlError code, text   | code SQLITE_CONSTRAINT[_UNIQUE], "UNIQUE constraint failed" |
 * | a replica's forwarding  | text only                | RemoteSqliteFailure(3, 2067, "UNIQUE constraint failed: …") |
 *
 * drizzle wraps each in a DrizzleQueryError (the driver's error is its cause), so the chain is walked.
 * A remote primary that cannot be reached (refused, reset, a proxy's 5xx, a stream it forgot in a
 * restart, no answer within DATABASE_BUSY_TIMEOUT_MS, a replica's pull cut off) is "unreachable": answered 503 like "busy", but never retried, since a write whose
 * answer was lost may have committed (only a read that met a refused frame is read again, once: isRefusedFrame, libsql.ts).
 */

export type IntegrityKind = "duplicate" | "foreignKey" | "other";
export type Failure = IntegrityKind | "busy" | "unreachable";

/** SQLite's extended result codes (https://sqlite.org/rescode.html). */
const BY_CODE: Record<string, Failure> = {
  SQLITE_CONSTRAINT_UNIQUE: "duplicate",
  SQLITE_CONSTRAINT_PRIMARYKEY: "duplicate",
  SQLITE_CONSTRAINT_FOREIGNKEY: "foreignKey",
  SQLITE_BUSY: "busy",
  SQLITE_LOCKED: "busy",
};
/** Bun's fetch and the socket layer (code), and @libsql/client's own codes for a lost server. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ConnectionRefused",
  "ConnectionClosed",
  "FailedToOpenSocket",
  "SERVER_ERROR",
  "HRANA_WEBSOCKET_ERROR",
  "HRANA_CLOSED_ERROR",
  "STREAM_EXPIRED",
]);
const BY_NUMBER: Record<number, Failure> = { 2067: "duplicate", 1555: "duplicate", 787: "foreignKey" };
const PRIMARY_CONSTRAINT = 19;
const PRIMARY_BUSY = 5;
const PRIMARY_LOCKED = 6;

/** Remote servers (sqld) may send only the primary code: their message names the constraint. */
const BY_TEXT: [RegExp, Failure][] = [
  [/UNIQUE constraint failed/, "duplicate"],
  [/FOREIGN KEY constraint failed/, "foreignKey"],
  [/database is locked|SQLITE_BUSY/, "busy"],
  // An embedded replica's pull that could not reach its primary (no code, only this text): after
  // a unit, the write may have committed but the copy cannot show it yet.
  [/^Replication\(/, "unreachable"],
];

/** A write an embedded replica forwarded to its primary (`unguarded`), refused there: the primary and extended codes are in the text. */
const FORWARDED = /^RemoteSqliteFailure\(\d+, (\d+),/;

/** What drivers put on their errors, any of it possibly absent. */
type DriverError = { extendedCode?: unknown; code?: unknown; rawCode?: unknown; errno?: unknown; name?: unknown; message?: unknown; cause?: unknown };

function classifyOne(e: DriverError): Failure | undefined {
  const codes = [e.extendedCode, e.code].filter((c): c is string => typeof c === "string");
  for (const code of codes) {
    const known = BY_CODE[code] ?? (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") ? "busy" : undefined);
    if (known) return known;
    if (UNREACHABLE.has(code)) return "unreachable";
  }
  // A round trip past its deadline (AbortSignal.timeout, libsql.ts): the primary did not answer in time.
  if (e.name === "TimeoutError") return "unreachable";
  const message = typeof e.message === "string" ? e.message : "";
  const forwarded = FORWARDED.exec(message);
  const number =
    typeof e.rawCode === "number" ? e.rawCode : typeof e.errno === "number" && codes.some((c) => c.startsWith("SQLITE_")) ? e.errno : forwarded ? Number(forwarded[1]) : undefined;
  if (number !== undefined) {
    if (BY_NUMBER[number]) return BY_NUMBER[number];
    const primary = number & 0xff;
    if (primary === PRIMARY_BUSY || primary === PRIMARY_LOCKED) return "busy";
  }
  for (const [pattern, failure] of BY_TEXT) if (pattern.test(message)) return failure;
  if (codes.some((c) => c.startsWith("SQLITE_CONSTRAINT")) || (number !== undefined && (number & 0xff) === PRIMARY_CONSTRAINT)) return "other";
  return undefined;
}

/**
 * @libsql/client over ws:// whose WebSocket refused one of the server's frames ("Protocol error -
 * RSV2 and RSV3 must be clear"): Bun's client (1.4.4 and 1.4.5) does that now and then to frames
 * sqld sent well-formed, and fails the connection; the client opens a new one for the next request.
 */
export const isRefusedFrame = (error: unknown) =>
  causeChain(error).some((e) => e.code === "HRANA_WEBSOCKET_ERROR" && typeof e.message === "string" && e.message.includes("Protocol error"));

/** `error` and its cause chain (drizzle's DrizzleQueryError wraps the driver's), at most five deep. */
export function causeChain(error: unknown): DriverError[] {
  const chain: DriverError[] = [];
  for (let e = error as DriverError | undefined; e && typeof e === "object" && chain.length < 5; e = e.cause as DriverError | undefined) chain.push(e);
  return chain;
}

/** The failure kind of `error` or anything in its cause chain; undefined for anything else. */
export function classifyDatabaseError(error: unknown): Failure | undefined {
  for (const e of causeChain(error)) {
    if (e instanceof DatabaseBusyError) return "busy";
    const kind = classifyOne(e);
    if (kind) return kind;
  }
  return undefined;
}

export function integrityKind(error: unknown): IntegrityKind | undefined {
  const kind = classifyDatabaseError(error);
  return kind === "busy" || kind === "unreachable" ? undefined : kind;
}

export const isBusy = (error: unknown) => classifyDatabaseError(error) === "busy";

/** Busy or unreachable: the database cannot serve this request now (503 with Retry-After). */
export const isUnavailable = (error: unknown) => {
  const kind = classifyDatabaseError(error);
  return kind === "busy" || kind === "unreachable";
};

/** A unit of work that could not get the write lock within DATABASE_BUSY_TIMEOUT_MS; nothing was written. */
export class DatabaseBusyError extends Error {
  constructor(
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    super(`database busy: the write lock stayed taken for ${waitedMs} ms`, options);
  }
}
