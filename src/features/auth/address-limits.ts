/**
 * Limits per client address on the open routes that need no account (e-mail checks,
 * registrations, passwordless sign-in's challenges): every request counts, in its own fixed window, shared by every worker
 * (store/throttle.ts addressCounter); one over `max` is refused with 429 and Retry-After until
 * the window ends.
 */
import type { Database } from "../../db/database";
import { refuseUntil } from "../../security/password-check";
import { addressCounter } from "../../store/throttle";

function addressLimit(prefix: string, windowMs: number) {
  const count = addressCounter(prefix, windowMs);
  return async (deps: { db: Database; now: () => number }, address: string, max: number) => {
    const now = deps.now();
    const { requests, endsAt } = await count(deps.db, address, now);
    if (requests > max) refuseUntil(endsAt, now);
  };
}

/** GET /api/auth/validate-email: EMAIL_CHECK_MAX_PER_IP a minute. */
export const countEmailCheck = addressLimit("email-check", 60 * 1000);
/** Registration attempts that passed validation (409s too): REGISTER_MAX_PER_IP in 10 minutes. */
export const countRegistration = addressLimit("register", 10 * 60 * 1000);
/** POST /api/auth/passkey/options (each challenge, once answered, is kept 6 minutes as used): PASSKEY_OPTIONS_MAX_PER_IP a minute. */
export const countPasskeyOptions = addressLimit("passkey-options", 60 * 1000);
