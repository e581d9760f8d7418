/**
 * First run: while no ADMIN exists (and ADMIN_EMAIL does not name one), a one-time link to
 * /account/setup lets whoever started the service create the first ADMIN. The token is 32 random
 * bytes, kept only as a SHA-256 (store/setup-tokens.ts), lives an hour, works once, and is void as
 * soon as any ADMIN exists, however that ADMIN came to be: the setup checks for one in the unit
 * that spends the token.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError, integrityKind } from "../../errors";
import { assertPasswordAllowed } from "../../security/password-policy";
import { hashPassword } from "../../security/passwords";
import { auditStatement } from "../../store/audit";
import { completeSignIn } from "../../security/sign-in-completion";
import { randomToken } from "../../store/sessions";
import { anyAdmin, claimSetupToken, consumeSetupToken, liveSetupTokenExpiry, setupTokenHash, setupTokenState } from "../../store/setup-tokens";
import { emailTaken, grantRoles, insertVerifiedUser, normalizeEmail } from "../../store/users";
import type { SetupBody, TokenResponse } from "./model";
import { newSession, runSignedIn, type SessionDeps, type SignInClient, signedInRows, tokenAnswer } from "./session-answer";

export const SETUP_TOKEN_TTL_MS = 60 * 60 * 1000;

type LinkConfig = Pick<Config, "publicUrl" | "port" | "basePath">;

/** The link the token travels in: PUBLIC_URL, else this machine's port. */
export const setupLinkOf = (config: LinkConfig, token: string) => `${config.publicUrl ?? `http://localhost:${config.port}`}${config.basePath}/account/setup?token=${token}`;

/** Whether the service still waits for its first ADMIN: none exists, and ADMIN_EMAIL does not name the one to make. */
export async function setupPending(db: Database, config: Pick<Config, "adminEmail">): Promise<boolean> {
  return !config.adminEmail && !(await anyAdmin(db));
}

export type SetupLink = { link: string } | { liveUntil: Date } | { adminExists: true };

/**
 * A fresh setup link when no ADMIN exists. `replace` (the setup-link command) voids a live token;
 * otherwise (a start) a live token made elsewhere is left alone and only its expiry is answered,
 * so instances starting together print one link between them.
 */
export async function issueSetupLink(db: Database, config: LinkConfig, now: Date, replace: boolean): Promise<SetupLink> {
  if (await anyAdmin(db)) return { adminExists: true };
  const token = randomToken(32);
  if (await claimSetupToken(db, setupTokenHash(token), now, new Date(now.getTime() + SETUP_TOKEN_TTL_MS), replace)) return { link: setupLinkOf(config, token) };
  const liveUntil = await liveSetupTokenExpiry(db, now);
  // Expired between the two statements: a start simply tries again.
  return liveUntil ? { liveUntil } : issueSetupLink(db, config, now, replace);
}

/**
 * The plain stderr line a start writes (outside the JSON log stream, which log shippers collect):
 * the link, or where to get one when another instance's link is still live; nothing once an ADMIN exists.
 */
export function setupNotice(issued: SetupLink): string | undefined {
  if ("link" in issued) return `usersvc: no ADMIN yet. Create the first one at ${issued.link} (works once, for 1 hour; \`usersvc setup-link\` prints a fresh one)\n`;
  if ("liveUntil" in issued) {
    return `usersvc: no ADMIN yet. A setup link was already issued, valid until ${issued.liveUntil.toISOString()}; \`usersvc setup-link\` prints a fresh one\n`;
  }
  return undefined;
}

/**
 * The first ADMIN, from the setup page: the token spent, the account created verified with the
 * roles USER and ADMIN, and signed in as by a login (session, deviceToken, device, last login,
 * LOGIN audited: session-answer.ts), all in one unit. A used, expired or void token (an ADMIN
 * exists by now) is 400 INVALID_TOKEN and nothing is written.
 */
export async function completeSetup(deps: SessionDeps, input: SetupBody, client: SignInClient): Promise<TokenResponse> {
  const email = normalizeEmail(input.email);
  await assertPasswordAllowed(deps, input.password, email);
  const at = new Date(deps.now());
  const tokenHash = setupTokenHash(input.token);
  // A dead token costs no argon2 (the unit checks again: it may be spent meanwhile).
  if ((await setupTokenState(deps.db, input.token, at)) !== "live") throw new AppError("INVALID_TOKEN");
  if (await emailTaken(deps.db, email, { spares: true })) throw new AppError("DUPLICATE_EMAIL", { email });
  // Hashed before the unit: the write lock is never held through argon2.
  const passwordHash = await hashPassword(input.password);
  // A sign-in now: enrolling a passkey or an app right after needs no second one (recent authentication).
  const session = newSession(deps, at, ["pwd"]);
  try {
    const { account, user, deviceToken } = await deps.db.write(async (tx) => {
      if (!(await consumeSetupToken(tx, tokenHash, at)) || (await anyAdmin(tx))) throw new AppError("INVALID_TOKEN");
      const id = await insertVerifiedUser(tx, { name: input.name.trim(), email, passwordHash }, at);
      await grantRoles(tx, id, ["USER", "ADMIN"]);
      await auditStatement(tx, { action: "USER_CREATED", actor: email, subjectType: "User", subjectId: id, details: { email, via: "setup" } }, at);
      // A new account's token version is 0; its first sign-in mails no NEW_SIGN_IN.
      const account = { id, email, tokenVersion: 0 };
      const completed = completeSignIn({ userId: id, email, firstSignIn: true, ...client }, at);
      return { account, user: await runSignedIn(signedInRows(tx, deps, account, client, session, { completed })), deviceToken: completed.deviceToken };
    });
    return { ...(await tokenAnswer(deps, account, user, session)), deviceToken };
  } catch (error) {
    throw integrityKind(error) === "duplicate" ? new AppError("DUPLICATE_EMAIL", { email }) : error;
  }
}
