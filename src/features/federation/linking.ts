/**
 * Which account a provider's identity lands in, so that no sign-in becomes a takeover:
 * an identity already linked signs in to its account; else an account with the same e-mail is
 * linked only when the provider is trusted for e-mail (OIDC_<NAME>_TRUST_EMAIL=on), asserts the
 * address verified, the account's own address is verified, and the account is neither an ADMIN
 * nor protected by a second factor (mailed IDENTITY_LINKED); else ACCOUNT_EXISTS. No account:
 * a new one (role USER, no password) unless OIDC_SIGNUP=off, counted as a registration.
 */
import type { ProviderConfig } from "../../config";
import type { Db } from "../../db/database";
import { integrityKind } from "../../db/errors";
import { AppError } from "../../errors";
import { refuseUntil } from "../../security/password-check";
import { verificationRows } from "../../store/account-tokens";
import { auditStatement } from "../../store/audit";
import { accountByEmail, accountOfIdentity, type FederatedAccount, linkIdentityStatement } from "../../store/identities";
import { enqueueNotification } from "../../store/outbox";
import { addressCounter } from "../../store/throttle";
import { createdUserRows, markEmailVerified, normalizeEmail } from "../../store/users";
import type { FederationDeps } from "./deps";
import type { ProviderIdentity } from "./providers";

export interface LinkedAccount {
  account: FederatedAccount;
  identityId: number;
}

/** Registrations per client address, with the registration route's own counter (REGISTER_MAX_PER_IP in 10 minutes). */
const countRegistration = addressCounter("register", 10 * 60_000);

/** The identity's new link and what tells of it: the audit row and, for an existing account, IDENTITY_LINKED. */
async function link(tx: Db, provider: ProviderConfig, account: { id: number; email: string }, identity: ProviderIdentity, now: Date, mail: boolean) {
  const row = {
    userId: account.id,
    provider: provider.name,
    issuer: identity.issuer,
    subject: identity.subject,
    email: identity.email,
    tokensSealed: identity.tokensSealed ?? null,
  };
  const [{ id }] = await linkIdentityStatement(tx, row, now);
  await auditStatement(
    tx,
    { action: "IDENTITY_LINKED", actor: account.email, subjectType: "User", subjectId: account.id, details: { provider: provider.name, identityId: id } },
    now,
  );
  if (mail) await enqueueNotification(tx, "IDENTITY_LINKED", account.email, { userId: account.id, provider: provider.label }, now);
  return id;
}

/** An e-mail match may link only under every one of these. */
const mayLinkByEmail = (provider: ProviderConfig, identity: ProviderIdentity, account: FederatedAccount) =>
  provider.trustEmail && identity.emailVerified && account.emailVerified && !account.admin && account.secondFactors === 0;

/** A provider's display name fitted to the User's rules (2–100 characters), else the address's local part. */
function fittedName(identity: ProviderIdentity, email: string) {
  const name = (identity.name ?? "").trim().replace(/\s+/g, " ").slice(0, 100);
  if (name.length >= 2) return name;
  const local = email.split("@")[0].slice(0, 100);
  return local.length >= 2 ? local : "User";
}

export async function accountFor(deps: FederationDeps, provider: ProviderConfig, identity: ProviderIdentity, address: string): Promise<LinkedAccount> {
  const linked = await accountOfIdentity(deps.db, identity.issuer, identity.subject);
  if (linked) return { account: linked, identityId: linked.identityId };
  if (!identity.email) throw new AppError("PROVIDER_REJECTED");
  const email = normalizeEmail(identity.email);
  const now = new Date(deps.now());
  const existing = await accountByEmail(deps.db, email);
  if (existing) {
    if (!mayLinkByEmail(provider, identity, existing)) throw new AppError("ACCOUNT_EXISTS");
    const identityId = await linkedOnce(() => deps.db.write((tx) => link(tx, provider, existing, identity, now, true)));
    return { account: existing, identityId };
  }
  if (!deps.config.federation.signup) throw new AppError("SIGNUP_DISABLED");
  const { requests, endsAt } = await countRegistration(deps.db, address, now.getTime());
  if (requests > deps.config.registerMaxPerIp) refuseUntil(endsAt, now.getTime());
  const identityId = await linkedOnce(() =>
    deps.db.write(async (tx) => {
      for (const statement of createdUserRows(
        tx,
        { name: fittedName(identity, email), email, phone: null, passwordHash: null },
        { actor: email, details: { email, via: provider.name } },
        now,
      ))
        await statement;
      const made = await accountByEmail(tx, email);
      if (!made) throw new AppError("ACCOUNT_EXISTS");
      // The provider vouched for the address, or our own mail must first.
      if (identity.emailVerified) await markEmailVerified(tx, made.id);
      else for (const statement of verificationRows(tx, made.id, email, now.getTime())) await statement;
      return link(tx, provider, made, identity, now, false);
    }),
  );
  const account = await accountByEmail(deps.db, email);
  if (!account) throw new AppError("ACCOUNT_EXISTS");
  return { account, identityId };
}

/** A unique index refusing the write: the identity (or the new account's e-mail) was taken by a sign-in racing this one. */
async function linkedOnce(write: () => Promise<number>): Promise<number> {
  try {
    return await write();
  } catch (error) {
    if (integrityKind(error) === "duplicate") throw new AppError("ACCOUNT_EXISTS");
    throw error;
  }
}

/** A link from the security page: the identity joins the caller's account, unless another account holds it. */
export async function linkToCaller(deps: FederationDeps, provider: ProviderConfig, caller: { id: number; email: string }, identity: ProviderIdentity) {
  const linked = await accountOfIdentity(deps.db, identity.issuer, identity.subject);
  if (linked && linked.id !== caller.id) throw new AppError("IDENTITY_IN_USE");
  if (linked) return linked.identityId;
  try {
    return await deps.db.write((tx) => link(tx, provider, caller, identity, new Date(deps.now()), true));
  } catch (error) {
    if (integrityKind(error) === "duplicate") throw new AppError("IDENTITY_IN_USE");
    throw error;
  }
}
