/** A step-up (security/step-up.ts) as the API carries it: the token a change takes, and the answer that hands it out. */
import { t } from "elysia";

export const StepUpToken = t.String({
  minLength: 1,
  maxLength: 1000,
  description: "A step-up token (POST /api/account/step-up, or a fresh sign-in at a linked provider): single use, 5 minutes, this session's",
});

export const StepUp = t.Object(
  {
    stepUpToken: t.String({ description: "Single use, for this session, until expiresIn seconds from now" }),
    expiresIn: t.Integer({ minimum: 1 }),
    method: t.UnionEnum(["pwd", "otp", "hwk", "fed"], { description: "How it was proved: the password, an authenticator code, a passkey, a provider" }),
  },
  { title: "StepUp" },
);
