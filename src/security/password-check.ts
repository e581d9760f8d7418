/**
 * Checking an account's password, as login, the password change and one's own e-mail change do,
 * with failed-login throttling (docs/security.md, "Throttling and lockout"): after
 * `loginMaxFailures` failures for one e-mail from one client network (/24, /48) within 15 minutes,
 * or `loginMaxFailuresPerIp` from one client address, further attempts from there get 429 with
 * Retry-After until that window passes, even with the right password; a stranger elsewhere cannot
 * lock the owner out. `loginMaxFailuresGlobal` failures of one e-mail across networks lock it out
 * everywhere (store/throttle.ts: 15 minutes, doubling with each further lockout within a day).
 * An attempt that presents the account's deviceToken (store/devices.ts) counts only its own
 * failures and is refused by none of these counts: the owner's device gets in during a lockout
 * (its second step too, when the account has a second factor: the mfaToken carries the token).
 * A successful login clears the e-mail's count for that network, and the deviceToken's. Windows
 * are fixed: they start at the first failure and reset once 15 minutes have passed.
 *
 * Counters live in login_throttle (store/throttle.ts) so every worker process shares them. Only failures are
 * counted (counting attempts in flight would lock out a user whose clients log in in parallel).
 * So that parallel guesses cannot all pass the check before any failure is recorded, attempts
 * for one e-mail run one after another within a process: the limit is exact with one process,
 * and with N worker processes at most N - 1 guesses can slip past it. Attempts from one
 * address are not serialized (a proxy's clients would queue behind each other), so a burst
 * of C concurrent guesses can overrun the per-address limit by at most C - 1.
 */
import type { Database, Db, Reader, Statement, UnitAnswers } from "../db/database";
import type { ReadSource } from "../db/miss";
import { AppError, Violations } from "../errors";
import { clientNetwork } from "../http/client-network";
import { auditStatement, type AuditRecord } from "../store/audit";
import { attemptStateRows, type CopyJudgement, gateOf, primaryDisagreed } from "../store/login-gate";
import { DEVICE_TOKEN_MAX_FAILURES, deviceFailureStatement, deviceSuccessStatement, deviceTokenRows, type DeviceTokenRow } from "../store/devices";
import {
  addressKey,
  type AttemptOrigin,
  clearLoginFailures,
  countLoginFailure,
  LOGIN_WINDOW_MS,
  loginLockoutRows,
  loginThrottleRows,
  pairKey,
  type ThrottleRow,
} from "../store/throttle";
import { type LoginAccount, loginAccount } from "../store/users";
import type { Caller } from "./caller";
import { hashPassword, verifyPassword } from "./passwords";

export interface PasswordCheckDeps {
  db: Database;
  now: () => number;
  config: { loginMaxFailures: number; loginMaxFailuresPerIp: number; loginMaxFailuresGlobal: number };
}

/** Where an attempt comes from: the client address, and the deviceToken it presents, if any. */
export interface AttemptClient {
  address: string;
  deviceToken?: string;
}

/** The end of the last turn of each e-mail's attempts in this process. */
const turns = new Map<string, Promise<void>>();

/**
 * The e-mail's turn among its attempts in this process, once every earlier one has ended: the
 * attempt ends its turn by disposing of it (`using turn = await attemptTurn(email)`).
 */
export async function attemptTurn(email: string): Promise<Disposable> {
  const previous = turns.get(email);
  let end!: () => void;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  turns.set(email, ended);
  await previous;
  return {
    [Symbol.dispose]() {
      end();
      if (turns.get(email) === ended) turns.delete(email);
    },
  };
}

/**
 * Where the second step reads the counters that protect the account: an embedded replica's
 * primary, where every edge counts its failures (its own copy would not know yet of the failures
 * counted at other edges since its last pull, nor of a device made there).
 */
const countersAt = (db: Database) => db.primary ?? db;

/**
 * Throws 429 with Retry-After while the e-mail from this network or the address has used up its
 * failures, or the e-mail is locked out everywhere (until `lockedUntil`).
 */
function assertNotThrottled(deps: PasswordCheckDeps, origin: AttemptOrigin, rows: ThrottleRow[], lockedUntil: number) {
  const limits = new Map([
    [pairKey(origin.email, origin.network), deps.config.loginMaxFailures],
    [addressKey(origin.address), deps.config.loginMaxFailuresPerIp],
  ]);
  const spent = rows.filter((row) => row.failures >= (limits.get(row.key) ?? Number.POSITIVE_INFINITY)).map((row) => row.windowStartedAt.getTime() + LOGIN_WINDOW_MS);
  refuseUntil(Math.max(lockedUntil, ...spent), deps.now());
}

/**
 * The second step of a sign-in (a code after the password): refused with 429 while the e-mail from
 * this network or the address is throttled, or the e-mail is locked out, as a login would be,
 * unless the password step presented the account's deviceToken and it is still good: then, as
 * there, only its own failures count. Answers what its success clears (and whose failure a wrong
 * code is: countFailure), and what `alongside` read in the same read unit (the factor the step
 * checks: one round trip to a remote primary).
 */
export async function assertLoginAllowed<const A extends Record<string, Statement | undefined> = Record<never, never>>(
  deps: PasswordCheckDeps,
  account: { id: number; email: string },
  client: AttemptClient,
  alongside?: (db: Reader) => A,
): Promise<FailuresToClear & { alongside: UnitAnswers<A> }> {
  const { email } = account;
  const origin = { email, address: client.address, network: clientNetwork(client.address) };
  const now = deps.now();
  const {
    throttle,
    lockout,
    device: rows,
    ...read
  } = await countersAt(deps.db).readAll((db) => ({
    ...(alongside?.(db) as A),
    throttle: loginThrottleRows(db, origin, now),
    lockout: loginLockoutRows(db, email),
    device: client.deviceToken === undefined ? undefined : deviceTokenRows(db, client.deviceToken),
  }));
  const device = trustedDevice(client.deviceToken, rows?.[0], account, now);
  if (!device) assertNotThrottled(deps, origin, throttle, lockout[0]?.lockedUntil.getTime() ?? 0);
  const pairHasFailures = throttle.some((row) => row.key === pairKey(email, origin.network));
  return { origin, pairHasFailures, device, alongside: read as UnitAnswers<A> };
}

/**
 * A failed attempt (a wrong password or second-step code) counted and audited as `audit`: as the
 * deviceToken's own failure when the attempt presented a good one, else for the e-mail from its
 * network, the e-mail everywhere (with the lockout it may reach) and the address; one unit.
 */
export async function countFailure(deps: PasswordCheckDeps, attempt: Pick<FailuresToClear, "origin" | "device" | "judged">, audit: AuditRecord, userId?: number) {
  const { origin, device, judged } = attempt;
  const now = deps.now();
  const gate = (tx: Db) => gateOf(tx, judged);
  if (device) await deps.db.writeAll((tx) => [...gate(tx), deviceFailureStatement(tx, device.token), auditStatement(tx, audit, new Date(now))]);
  else await countLoginFailure(deps.db, { ...origin, now, audit, globalLimit: deps.config.loginMaxFailuresGlobal, userId }, gate);
}

/** 429 TOO_MANY_REQUESTS with Retry-After (whole seconds, at least one) while `blockedUntil` is ahead. */
export function refuseUntil(blockedUntil: number, now: number) {
  if (blockedUntil <= now) return;
  const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
  throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
}

/** Hashed once per process, on first need, with the same parameters as real hashes. */
let dummyHash: Promise<string> | undefined;
const dummy = () => (dummyHash ??= hashPassword(crypto.randomUUID()));

/** A right password's check: the account, where the attempt came from, and what its success clears. */
export interface CheckedPassword {
  account: LoginAccount & { passwordHash: string };
  origin: AttemptOrigin;
  /** The e-mail has failures from this network in its current window. */
  pairHasFailures: boolean;
  /** The account's own deviceToken, when the attempt presented one that is still good. */
  device?: { token: string; failures: number };
  /** What an embedded replica's copy judged the attempt on, for the gate of its unit at the primary (store/login-gate.ts). */
  judged?: CopyJudgement;
}

/** The presented deviceToken, if it is the account's, not expired and not void by its own failures. */
function trustedDevice(token: string | undefined, row: DeviceTokenRow | undefined, account: { id: number } | undefined, now: number) {
  const good = token !== undefined && row && account && row.userId === account.id && row.expiresAt > now && row.failures < DEVICE_TOKEN_MAX_FAILURES;
  return good ? { token, failures: row.failures } : undefined;
}

/**
 * The account if `password` is its password, where the attempt came from and what its success
 * clears (in the unit the caller writes anyway: failuresCleared); undefined otherwise, the failure
 * counted and audited as `failure` (never with the password). Refused with 429 while the e-mail
 * from this network, the address or the e-mail everywhere is throttled, unless the attempt
 * presents the account's deviceToken: then only that token's own failures count. The throttle
 * rows, the lockout, the deviceToken and the account are one read unit. Wrong e-mail and wrong
 * password take the same path and the same time: an unknown account is checked against a dummy
 * argon2id hash. Run it in the e-mail's turn (attemptTurn), so parallel guesses see each other's
 * failures; use the answer through withPassword, which judges the attempt again at the primary
 * when the copy misjudged it.
 *
 * On an embedded replica that read is the local copy's (no round trip): it only spares the hash of
 * an attempt the copy already knows to refuse, and a refusal is read again at the primary before
 * it answers 429 (the copy may not know yet of an unlock, or of a success that cleared a count).
 * What decides is the gate at the head of the attempt's unit (store/login-gate.ts): the
 * failure's unit, or the caller's unit of a right password, fails at the primary when the
 * primary's counters refuse the attempt or its account or deviceToken is not as the copy had it.
 */
async function checkPassword(
  deps: PasswordCheckDeps,
  email: string,
  password: string,
  client: AttemptClient,
  failure: AuditRecord,
  source: ReadSource = deps.db,
): Promise<CheckedPassword | undefined> {
  const origin = { email, address: client.address, network: clientNetwork(client.address) };
  const now = deps.now();
  // Set when `source` is an embedded replica's copy: where the attempt is judged again when the copy misjudged it.
  const primary = source === deps.db ? deps.db.primary : undefined;
  const read = await source.readAll((db) => ({
    throttle: loginThrottleRows(db, origin, now),
    lockout: loginLockoutRows(db, email),
    account: loginAccount(db, email),
    device: client.deviceToken === undefined ? undefined : deviceTokenRows(db, client.deviceToken),
    state: primary ? attemptStateRows(db, email, client.deviceToken) : undefined,
  }));
  const [account] = read.account;
  const device = trustedDevice(client.deviceToken, read.device?.[0], account, now);
  try {
    if (!device) assertNotThrottled(deps, origin, read.throttle, read.lockout[0]?.lockedUntil.getTime() ?? 0);
  } catch (refused) {
    if (!primary) throw refused;
    return checkPassword(deps, email, password, client, failure, primary);
  }
  const limits = { pair: deps.config.loginMaxFailures, address: deps.config.loginMaxFailuresPerIp };
  const judged = read.state && { origin, deviceToken: client.deviceToken, state: read.state[0].state, throttled: !device, limits, now };
  const stored = account?.passwordHash;
  const matches = await verifyPassword(stored ?? (await dummy()), password);
  if (!account || !stored || !matches) {
    try {
      await countFailure(deps, { origin, device, judged }, failure, account?.id);
    } catch (error) {
      if (!primary || !primaryDisagreed(error)) throw error;
      return checkPassword(deps, email, password, client, failure, primary);
    }
    return undefined;
  }
  // A copy cannot tell whether another edge counted failures from this network since its last pull: cleared anyway.
  const pairHasFailures = primary !== undefined || read.throttle.some((row) => row.key === pairKey(email, origin.network));
  return { account: { ...account, passwordHash: stored }, origin, pairHasFailures, device, judged };
}

/**
 * `use` of a password check (undefined: the password was wrong, its failure counted). When the
 * check read an embedded replica's copy and the gate in the unit `use` writes refused it there
 * (the primary judges the attempt otherwise), the attempt is checked again at the primary and
 * `use` runs on that check; elsewhere this is `use(checkPassword(…))`.
 */
export async function withPassword<T>(
  deps: PasswordCheckDeps,
  attempt: { email: string; password: string; client: AttemptClient; failure: AuditRecord },
  use: (checked: CheckedPassword | undefined) => Promise<T>,
): Promise<T> {
  const { email, password, client, failure } = attempt;
  const checked = await checkPassword(deps, email, password, client, failure);
  try {
    return await use(checked);
  } catch (error) {
    if (!checked?.judged || !deps.db.primary || !primaryDisagreed(error)) throw error;
    return use(await checkPassword(deps, email, password, client, failure, deps.db.primary));
  }
}

/** What a sign-in's success clears: its origin's count (when it has failures) and the deviceToken's. */
export type FailuresToClear = Pick<CheckedPassword, "origin" | "pairHasFailures" | "device" | "judged">;

/**
 * What a right password clears, as statements of the unit its caller writes: the e-mail's count
 * from that network, and the deviceToken's failures; after a copy's check, led by its gate (which
 * must come before anything in the unit that changes the account).
 */
export function failuresCleared(tx: Db, checked: FailuresToClear) {
  const { origin, device } = checked;
  return [
    ...gateOf(tx, checked.judged),
    ...(checked.pairHasFailures ? [clearLoginFailures(tx, origin.email, origin.network)] : []),
    ...(device && device.failures > 0 ? [deviceSuccessStatement(tx, device.token)] : []),
  ];
}

/** A wrong current password: a 400 on `currentPassword`, wherever a change needs it. */
export const wrongCurrentPassword = () => new Violations("body", [{ path: "currentPassword", key: "field.currentPassword.wrong" }]);

/**
 * The caller's current password, before a change that needs it (their own e-mail address):
 * checked and throttled like a login, so a stolen token is no password oracle; a wrong one is a
 * 400 on `currentPassword`, as in the password change.
 */
export async function confirmPassword(deps: PasswordCheckDeps, caller: Caller, password: string, address: string) {
  using _turn = await attemptTurn(caller.email);
  const failure = { action: "PASSWORD_CHECK_FAILED", actor: caller.email, subjectType: "User", subjectId: caller.id, details: { address } };
  await withPassword(deps, { email: caller.email, password, client: { address }, failure }, async (checked) => {
    if (!checked) throw wrongCurrentPassword();
    if (checked.pairHasFailures) await deps.db.writeAll((tx) => failuresCleared(tx, checked));
  });
}
