/** Sign-in with other providers: the shapes of its routes. */
import { type Static, t } from "elysia";
import { StepUpToken } from "../../models/step-up";

const base64url = (description: string, minLength: number, maxLength: number) => t.String({ pattern: "^[A-Za-z0-9_-]+$", minLength, maxLength, description });

export const ProviderParams = t.Object({ provider: t.String({ pattern: "^[A-Za-z][A-Za-z0-9]{0,31}$", description: "The provider's name in OIDC_PROVIDERS" }) });

export const StartQuery = t.Object({
  returnTo: t.String({
    minLength: 1,
    maxLength: 2000,
    description: "A page under /account or /admin, or a URL listed in OIDC_RETURN_URLS: the code comes back there in the fragment",
  }),
  codeChallenge: base64url("S256 of the page's verifier (43 characters, base64url): only that verifier redeems the code", 43, 43),
});

/** A step-up at a provider linked to the caller: where the code comes back, and the page's challenge. */
export const StepUpStartBody = t.Object({
  returnTo: StartQuery.properties.returnTo,
  codeChallenge: StartQuery.properties.codeChallenge,
});

/** A link needs a step-up first (POST /api/account/step-up, or one at another linked provider). */
export const LinkStartBody = t.Object({
  returnTo: StartQuery.properties.returnTo,
  codeChallenge: StartQuery.properties.codeChallenge,
  stepUpToken: StepUpToken,
});

export const CodeExchangeBody = t.Object({
  code: base64url("The one-time code from the fragment (#code=…)", 16, 200),
  codeVerifier: base64url("The verifier whose S256 challenge began the flow (RFC 7636: 43–128 characters)", 43, 128),
});
export type CodeExchangeBody = Static<typeof CodeExchangeBody>;

export const Redirect = t.Object({ url: t.String({ description: "Where the browser goes next: the provider's sign-in page" }) }, { title: "ProviderRedirect" });

export const Identity = t.Object(
  {
    id: t.Integer(),
    provider: t.String({ description: "The provider's name in OIDC_PROVIDERS" }),
    label: t.String({ description: "The provider's label (Google, Corp …)" }),
    email: t.Nullable(t.String({ description: "The address the provider gave at the last sign-in" })),
    linkedAt: t.String({ format: "date-time" }),
    lastUsedAt: t.Nullable(t.String({ format: "date-time" })),
  },
  { title: "Identity" },
);
export type Identity = Static<typeof Identity>;

export const IdentityIdParams = t.Object({ id: t.Numeric({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });

export const ProviderButton = t.Object(
  {
    name: t.String(),
    label: t.String(),
    stepUp: t.Boolean({ description: "Whether it can confirm a fresh sign-in for a step-up (OpenID Connect: prompt=login, auth_time); GitHub cannot" }),
  },
  { title: "SignInProvider" },
);
