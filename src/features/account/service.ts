/**
 * Address verification and password reset. Tokens travel only in the mail (store/account-tokens.ts
 * keeps their hashes); every mail goes through the outbox in the same transaction as the change.
 *
 * A reset request does the same work whatever the address: it counts the request against the
 * e-mail's and the client address's own limits (never login's counters) and enqueues a
 * PASSWORD_RESET row that the sender resolves; an unknown address is dropped there. So the
 * answer, its status and its cost tell nothing about which addresses have accounts.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import { existing, type User } from "../../models/user";
import type { Caller } from "../../security/caller";
import { assertPasswordAllowed, type PasswordPolicyDeps } from "../../security/password-policy";
import { hashPassword } from "../../security/passwords";
import { consumeToken, enqueueVerification, liveTokenOwner, revokeAccountTokens } from "../../store/account-tokens";
import { writeAudit } from "../../store/audit";
import { forgetDeviceTokens } from "../../store/devices";
import { beforeFirstProofRows } from "../../store/identities";
import { enqueueNotification } from "../../store/outbox";
import { anyAdmin, setupTokenState } from "../../store/setup-tokens";
import { addressKey, countResetRequest, emailKey } from "../../store/throttle";
import { emailVerifiedOf, findUser, markEmailVerified, normalizeEmail, resetPassword } from "../../store/users";
import type { ResetConfirmBody } from "./model";
import type { SetupUnavailable } from "./page";

export interface AccountDeps extends PasswordPolicyDeps {
  db: Database;
  now: () => number;
  config: Pick<Config, "resetMaxRequests" | "resetMaxRequestsPerIp" | "passwordPolicy" | "hibpRangeUrl">;
}

/** False when the caller's address is verified already (nothing is sent). */
export async function requestVerification(deps: AccountDeps, caller: Caller): Promise<boolean> {
  return deps.db.write(async (tx) => {
    const verified = await emailVerifiedOf(tx, caller.id);
    if (verified !== false) return false;
    await enqueueVerification(tx, caller.id, caller.email, deps.now());
    return true;
  });
}

export async function confirmVerification(deps: AccountDeps, token: string): Promise<User> {
  const userId = await deps.db.write(async (tx) => {
    const id = await consumeToken(tx, token, "VERIFY_EMAIL", deps.now());
    if (id === undefined) throw new AppError("INVALID_TOKEN");
    // Pre-account hijacking: whatever was added before the address was ever proven goes.
    for (const statement of beforeFirstProofRows(tx, id)) await statement;
    await markEmailVerified(tx, id);
    return id;
  });
  return findUser(deps.db, userId).then(existing(userId));
}

export async function requestPasswordReset(deps: AccountDeps, rawEmail: string, address: string) {
  const email = normalizeEmail(rawEmail);
  const now = deps.now();
  await deps.db.write(async (tx) => {
    const perEmail = await countResetRequest(tx, emailKey(email), now);
    const perAddress = await countResetRequest(tx, addressKey(address), now);
    const over = [perEmail.requests > deps.config.resetMaxRequests && perEmail.endsAt, perAddress.requests > deps.config.resetMaxRequestsPerIp && perAddress.endsAt];
    const blockedUntil = Math.max(0, ...over.map(Number));
    if (blockedUntil > now) {
      const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
      throw new AppError("TOO_MANY_REQUESTS", {}, { headers: { "retry-after": String(seconds) } });
    }
    await enqueueNotification(tx, "PASSWORD_RESET", email, {}, new Date(now), { resolve: true });
  });
}

/**
 * Sets the new password, revokes every bearer token, every earlier e-mail token and every deviceToken
 * of the user (a device that knew the old password signs in as a stranger again), and sends PASSWORD_CHANGED (audited PASSWORD_RESET). Completing a reset proves the mailbox is the user's, so the
 * address counts as verified too (a user whose verification link expired is never locked out).
 */
export async function confirmPasswordReset(deps: AccountDeps, input: ResetConfirmBody) {
  const now = deps.now();
  // A dead token costs no argon2; a live one is hashed for before the transaction, so the write
  // lock is never held through argon2 (and is checked again there, as it may be used meanwhile).
  const email = await liveTokenOwner(deps.db, input.token, "PASSWORD_RESET", now);
  if (email === undefined) throw new AppError("INVALID_TOKEN");
  await assertPasswordAllowed(deps, input.newPassword, email, "newPassword");
  const passwordHash = await hashPassword(input.newPassword);
  await deps.db.write(async (tx) => {
    const id = await consumeToken(tx, input.token, "PASSWORD_RESET", now);
    if (id === undefined) throw new AppError("INVALID_TOKEN");
    for (const statement of beforeFirstProofRows(tx, id)) await statement;
    const recipient = await resetPassword(tx, id, passwordHash, new Date(now));
    await revokeAccountTokens(tx, id);
    await forgetDeviceTokens(tx, id);
    await enqueueNotification(tx, "PASSWORD_CHANGED", recipient, { userId: id }, new Date(now));
    await writeAudit(tx, { action: "PASSWORD_RESET", actor: recipient, subjectType: "User", subjectId: id }, new Date(now));
  });
}

/**
 * What the setup link's page shows for its token: `live`, the setup page; otherwise why not
 * (page/index.ts). Once an ADMIN exists that is all there is to say, token or none. A read only:
 * looking at a link never spends it.
 */
export async function setupLinkState(deps: Pick<AccountDeps, "db" | "now">, token: string | null): Promise<SetupUnavailable | "live"> {
  if (token) return setupTokenState(deps.db, token, new Date(deps.now()));
  return (await anyAdmin(deps.db)) ? "done" : "none";
}
