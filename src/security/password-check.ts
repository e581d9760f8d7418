/**
 * Checking an account's password, as login, the password change and one's own e-mail change do,
 * with failed-login throttling (decisions.md): after `loginMaxFailures` failures for one e-mail
 * within 15 minutes, or `loginMaxFailuresPerIp` from one client address, further attempts get
 * 429 with Retry-After until that window passes, even with the right password. A successful
 * login clears the e-mail's count. Windows are fixed: they start at the first failure and
 * reset once 15 minutes have passed.
 *
 * Counters live in login_throttle (store/throttle.ts) so every worker process shares them. Only failures are
 * counted (counting attempts in flight would lock out a user whose clients log in in parallel).
 * So that parallel guesses cannot all pass the check before any failure is recorded, attempts
 * for one e-mail run one after another within a process: the limit is exact with one process,
 * and with N worker processes at most N - 1 guesses can slip past it. Attempts from one
 * address are not serialized (a proxy's clients would queue behind each other), so a burst
 * of C concurrent guesses can overrun the per-address limit by at most C - 1.
 */
import type { Database } from "../db/database";
import { AppError, Violations } from "../errors";
import type { AuditRecord } from "../store/audit";
import { clearLoginFailures, countLoginFailure, emailKey, LOGIN_WINDOW_MS, loginThrottleRows, type ThrottleRow } from "../store/throttle";
import { loginAccount } from "../store/users";
import type { Caller } from "./caller";
import { hashPassword, verifyPassword } from "./passwords";

export interface PasswordCheckDeps {
  db: Database;
  now: () => number;
  config: { loginMaxFailures: number; loginMaxFailuresPerIp: number };
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
 * Throws 429 with Retry-After when the e-mail or the address has used up its failures;
 * otherwise tells whether the e-mail has failures in its current window (to clear on success).
 */
function assertNotThrottled(deps: PasswordCheckDeps, email: string, rows: ThrottleRow[]): { emailHasFailures: boolean } {
  const now = deps.now();
  const limitOf = (key: string) => (key.startsWith("email:") ? deps.config.loginMaxFailures : deps.config.loginMaxFailuresPerIp);
  const blockedUntil = Math.max(0, ...rows.filter((row) => row.failures >= limitOf(row.key)).map((row) => row.windowStartedAt.getTime() + LOGIN_WINDOW_MS));
  refuseUntil(blockedUntil, now);
  return { emailHasFailures: rows.some((row) => row.key === emailKey(email)) };
}

/**
 * The second step of a sign-in (a code after the password): refused with 429 while the e-mail or
 * the address is throttled, as a login would be; tells whether the e-mail has failures to clear.
 */
export async function assertLoginAllowed(deps: PasswordCheckDeps, email: string, address: string) {
  const [throttle] = await deps.db.readAll((db) => [loginThrottleRows(db, email, address, deps.now())]);
  return assertNotThrottled(deps, email, throttle);
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

/**
 * The account if `password` is its password, and whether the e-mail has failures to clear
 * (in the unit the caller writes anyway); undefined otherwise, the failure counted and audited
 * as `failure` (never with the password). Refused
 * with 429 while the e-mail or the address is throttled. The throttle rows and the account are
 * one read unit (one round trip to a remote primary). Wrong e-mail and wrong password take the
 * same path and the same time: an unknown account is checked against a dummy argon2id hash.
 * Run it in the e-mail's turn (attemptTurn), so parallel guesses see each other's failures.
 */
export async function checkPassword(deps: PasswordCheckDeps, email: string, password: string, address: string, failure: AuditRecord) {
  const [throttle, [account]] = await deps.db.readAll((db) => [loginThrottleRows(db, email, address, deps.now()), loginAccount(db, email)]);
  const { emailHasFailures } = assertNotThrottled(deps, email, throttle);
  const stored = account?.passwordHash;
  const matches = await verifyPassword(stored ?? (await dummy()), password);
  if (!account || !stored || !matches) {
    await countLoginFailure(deps.db, email, address, deps.now(), failure);
    return undefined;
  }
  return { account: { ...account, passwordHash: stored }, emailHasFailures };
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
  const checked = await checkPassword(deps, caller.email, password, address, failure);
  if (!checked) throw wrongCurrentPassword();
  if (checked.emailHasFailures) await deps.db.writeAll((tx) => [clearLoginFailures(tx, caller.email)]);
}
