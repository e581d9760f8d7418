/**
 * A password attempt judged on an embedded replica's copy, confirmed at the primary inside the
 * attempt's own unit (docs/edge.md, "The counters that protect accounts decide at the primary"):
 * the copy may lag failures counted at other edges, a lockout, a password or second factor changed
 * there, a deviceToken's failures. So the unit holds the gate, before anything in it that changes
 * the account or the counters: it fails the whole unit (nothing of it is written) when the primary
 * would judge the attempt otherwise than the copy did, and the attempt is judged again on the
 * primary's state. A batch has no way to stop midway but a failing statement, so the gate
 * fails on purpose: a row with no count, which login_throttle refuses (NOT NULL).
 */
import { type SQL, sql } from "drizzle-orm";
import type { Db, Reader, Statement } from "../db/database";
import { causeChain } from "../db/errors";
import { secondFactorsOf } from "./mfa";
import { refreshHash } from "./sessions";
import { addressKey, type AttemptOrigin, LOGIN_WINDOW_MS, pairKey } from "./throttle";

/**
 * What the copy judged the attempt on, besides the counters: the account by its e-mail and the
 * presented deviceToken's row, as one string the copy and the primary compute alike (or null).
 */
const stateOf = (email: string, deviceToken: string | undefined) => sql`json_array(
  (select json_array(users.id, users.password_hash, users.active, users.token_version, users.email_verified, ${secondFactorsOf()}) from users where users.email = ${email}),
  (select json_array(device_tokens.user_id, device_tokens.expires_at, device_tokens.failures) from device_tokens where device_tokens.token_hash = ${deviceToken === undefined ? null : refreshHash(deviceToken)}))`;

/** The account's and the deviceToken's state as the copy has it: a statement of the attempt's read unit. */
export const attemptStateRows = (db: Reader, email: string, deviceToken: string | undefined) =>
  // Cast as in primaryAgrees: a raw read is a statement of a read unit like any select.
  db.all(sql`select ${stateOf(email, deviceToken)} as state`) as unknown as Statement<{ state: string }[]>;

/** What the copy judged: its state, and (unless a good deviceToken let it past them) the limits it found the counters under. */
export interface CopyJudgement {
  origin: AttemptOrigin;
  deviceToken: string | undefined;
  state: string;
  /** The attempt answers to the counters (it presented no good deviceToken). */
  throttled: boolean;
  limits: { pair: number; address: number };
  now: number;
}

/** The primary would refuse the attempt: its e-mail from that network or its address has used up its failures, or the e-mail is locked out. */
const refusedAtPrimary = ({ origin, limits, now }: CopyJudgement): SQL => sql`(
  exists(select 1 from login_throttle where window_started_at > ${now - LOGIN_WINDOW_MS}
    and ((key = ${pairKey(origin.email, origin.network)} and failures >= ${limits.pair}) or (key = ${addressKey(origin.address)} and failures >= ${limits.address})))
  or exists(select 1 from login_lockouts where email = ${origin.email} and locked_until > ${now}))`;

/** The gate: a statement of the attempt's unit, failing it when the primary's state is not the copy's, or its counters refuse the attempt. */
function primaryAgrees(tx: Db, judged: CopyJudgement): Statement {
  const differs = sql`${stateOf(judged.origin.email, judged.deviceToken)} is not ${judged.state}`;
  const refused = judged.throttled ? sql` or ${refusedAtPrimary(judged)}` : sql``;
  // Cast: Db is a union of drivers, whose raw statements drizzle types apart.
  return tx.run(sql`insert into login_throttle (key, failures, window_started_at) select 'gate', null, 0 where ${differs}${refused}`) as Statement;
}

/** The gate's statement when the attempt was judged on a copy (`judged`), else none: what a unit puts first among its changes. */
export const gateOf = (tx: Db, judged: CopyJudgement | undefined): Statement[] => (judged ? [primaryAgrees(tx, judged)] : []);

/** The gate failed its unit: the primary judges the attempt otherwise than the copy did. */
export const primaryDisagreed = (error: unknown): boolean =>
  causeChain(error).some((cause) => typeof cause.message === "string" && cause.message.includes("NOT NULL constraint failed: login_throttle.failures"));
