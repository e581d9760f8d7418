/**
 * The end of a sign-in through another provider (the federation feature proves the identity and
 * hands the account here, wired by app.ts): the same refusals, throttle, second step, session,
 * device, NEW_SIGN_IN and LOGIN audit as a password's, with `amr` fed. A provider is a first
 * factor only: an account with TOTP or a passkey gets the second step's challenge.
 */
import type { Db } from "../../db/database";
import { AppError } from "../../errors";
import { assertLoginAllowed, attemptTurn } from "../../security/password-check";
import { completeSignIn } from "../../security/sign-in-completion";
import { LoginAnswer, type MfaRequired, type TokenResponse } from "./model";
import { type ChallengeDeps, secondStepChallenge } from "./second-step";
import { newSession, runSignedIn, type SessionDeps, type SignInClient, signedInRows, tokenAnswer } from "./session-answer";

export interface FederatedAccount {
  id: number;
  email: string;
  tokenVersion: number;
  active: boolean;
  emailVerified: boolean;
  lastLogin: Date | null;
  /** 1 an active TOTP, +2 a passkey (store/mfa.ts secondFactorsOf). */
  secondFactors: number;
}

/** What the federation feature is given: the sign-in's end, and the schema of its answer (the login answer). */
export const federatedSignIn = (deps: SessionDeps & ChallengeDeps) => ({
  answer: LoginAnswer,
  /** `also`: the caller's statements for the sign-in's unit (the identity's last use, its audit row). */
  async complete(account: FederatedAccount, client: SignInClient, also: (tx: Db) => Promise<unknown>): Promise<TokenResponse | MfaRequired> {
    const { email } = account;
    if (!account.active) throw new AppError("ACCOUNT_DISABLED");
    if (deps.config.requireEmailVerification && !account.emailVerified) throw new AppError("EMAIL_NOT_VERIFIED");
    using _turn = await attemptTurn(email);
    // Locked out by wrong passwords from here: a provider does not open the door either.
    const toClear = await assertLoginAllowed(deps, account, { address: client.address });
    if (account.secondFactors > 0) {
      await deps.db.write(also);
      return secondStepChallenge(deps, account, account.secondFactors, { firstStep: "fed" });
    }
    const now = new Date(deps.now());
    const session = newSession(deps, now, ["fed"]);
    const completed = completeSignIn({ userId: account.id, email, firstSignIn: account.lastLogin === null, ...client }, now);
    const user = await deps.db.write(async (tx) => {
      await also(tx);
      return runSignedIn(signedInRows(tx, deps, account, client, session, { toClear, completed }));
    });
    return { ...(await tokenAnswer(deps, account, user, session)), deviceToken: completed.deviceToken };
  },
});

export type FederatedSignIn = ReturnType<typeof federatedSignIn>;
