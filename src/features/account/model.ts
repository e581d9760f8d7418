/** TypeBox shapes of the account e-mail routes (/api/auth/verify-email/*, /api/auth/password-reset/*). */
import { t, type Static } from "elysia";
import { NotBlankString } from "../../validation";
import { Email, matchingNewPassword, Password } from "../../models/user";

const Token = t.String({
  minLength: 1,
  maxLength: 200,
  description: "The token from the e-mail's link",
  messages: { required: "field.token.blank", minLength: "field.token.blank" },
});

export const TokenBody = t.Object({ token: Token });
export type TokenBody = Static<typeof TokenBody>;

export const ResetRequestBody = t.Object({ email: Email });
export type ResetRequestBody = Static<typeof ResetRequestBody>;

export const ResetConfirmBody = t.Object(
  {
    token: Token,
    newPassword: Password,
    confirmNewPassword: NotBlankString({ messages: { required: "field.confirmPassword.blank", blank: "field.confirmPassword.blank" } }),
  },
  { refine: matchingNewPassword },
);
export type ResetConfirmBody = Static<typeof ResetConfirmBody>;
