/** The OpenID Provider's client shapes (/api/oauth/clients). */
import { t } from "elysia";

const Uri = t.String({ minLength: 1, maxLength: 2000 });
const GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials"] as const;
/** As tokens.ts ID_TOKEN_ALGS (OIDC Registration's id_token_signed_response_alg). */
const IdTokenAlg = t.Union([t.Literal("RS256"), t.Literal("ES256"), t.Literal("EdDSA")], {
  description: "What the client's ID tokens are signed with: RS256 (the default), ES256 or EdDSA (Ed25519); keys of each are in the JWKS",
});

export const ClientBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  redirectUris: t.Array(Uri, { maxItems: 20 }),
  public: t.Optional(t.Boolean()),
  scopes: t.Optional(t.Array(t.String({ maxLength: 50 }), { maxItems: 20 })),
  grantTypes: t.Optional(t.Array(t.Union(GRANT_TYPES.map((g) => t.Literal(g))), { minItems: 1, maxItems: 3 })),
  firstParty: t.Optional(t.Boolean()),
  postLogoutRedirectUris: t.Optional(t.Array(Uri, { maxItems: 20 })),
  idTokenSignedResponseAlg: t.Optional(IdTokenAlg),
});
export type ClientBody = typeof ClientBody.static;

export const OAuthClient = t.Object({
  id: t.Integer(),
  clientId: t.String(),
  name: t.String(),
  redirectUris: t.Array(t.String()),
  postLogoutRedirectUris: t.Array(t.String()),
  public: t.Boolean(),
  scopes: t.Array(t.String()),
  grantTypes: t.Array(t.String()),
  firstParty: t.Boolean(),
  createdAt: t.String({ format: "date-time" }),
  idTokenSignedResponseAlg: IdTokenAlg,
});
export type OAuthClient = typeof OAuthClient.static;

export const CreatedClient = t.Composite([OAuthClient, t.Object({ clientSecret: t.Optional(t.String()) })]);

export const ClientIdParams = t.Object({ clientId: t.String({ minLength: 1, maxLength: 100 }) });

// ── The protocol's answers (/oauth2/*, discovery), as the RFCs shape them: for the OpenAPI document ──

const Strings = t.Array(t.String());

/** RFC 6749 §5.2: every protocol error (not the API's envelope). */
export const OAuthErrorAnswer = t.Object({ error: t.String(), error_description: t.String() }, { title: "OAuthError" });

/** RFC 6749 §5.1 (an ID token with `openid`, a refresh token with `offline_access`). */
export const TokenAnswer = t.Object(
  {
    access_token: t.String({ description: "A JWT of typ at+jwt (RFC 9068), signed RS256" }),
    token_type: t.Literal("Bearer"),
    expires_in: t.Integer(),
    scope: t.String(),
    id_token: t.Optional(t.String()),
    refresh_token: t.Optional(t.String()),
  },
  { title: "OAuthTokenAnswer" },
);

export const UserInfoAnswer = t.Object(
  { sub: t.String(), name: t.Optional(t.String()), email: t.Optional(t.String()), email_verified: t.Optional(t.Boolean()) },
  { title: "OAuthUserInfo" },
);

/** RFC 7662 §2.2: `{active: false}` alone for a token that is not (or not this client's). */
export const IntrospectionAnswer = t.Object(
  {
    active: t.Boolean(),
    client_id: t.Optional(t.String()),
    scope: t.Optional(t.String()),
    sub: t.Optional(t.String()),
    iss: t.Optional(t.String()),
    token_type: t.Optional(t.String()),
    exp: t.Optional(t.Integer()),
    iat: t.Optional(t.Integer()),
  },
  { title: "OAuthIntrospection" },
);

/** RFC 7591 §3.2.1. */
export const RegisteredClient = t.Object(
  {
    client_id: t.String(),
    client_id_issued_at: t.Integer(),
    client_name: t.String(),
    redirect_uris: Strings,
    token_endpoint_auth_method: t.String(),
    grant_types: Strings,
    response_types: Strings,
    scope: t.String(),
    id_token_signed_response_alg: t.String(),
  },
  { title: "OAuthRegisteredClient" },
);

/** OpenID Connect Discovery 1.0 §3. */
export const DiscoveryDocument = t.Object(
  {
    issuer: t.String(),
    authorization_endpoint: t.String(),
    token_endpoint: t.String(),
    userinfo_endpoint: t.String(),
    jwks_uri: t.String(),
    revocation_endpoint: t.String(),
    introspection_endpoint: t.String(),
    end_session_endpoint: t.String(),
    registration_endpoint: t.Optional(t.String({ description: "With OAUTH_DYNAMIC_REGISTRATION=on" })),
    response_types_supported: Strings,
    response_modes_supported: Strings,
    grant_types_supported: Strings,
    subject_types_supported: Strings,
    id_token_signing_alg_values_supported: Strings,
    token_endpoint_auth_methods_supported: Strings,
    code_challenge_methods_supported: Strings,
    scopes_supported: Strings,
    claims_supported: Strings,
    prompt_values_supported: Strings,
    authorization_response_iss_parameter_supported: t.Boolean(),
  },
  { title: "OpenIdConfiguration" },
);

/** A page the browser shows (an error that cannot go back to the app, or "signed out"). */
export const Page = t.String({ description: "An HTML page", contentMediaType: "text/html" });
/** A browser navigation onward: to the app's registered address, or to the account pages. */
export const Onward = t.Void({ description: "On to Location" });

/** An application/x-www-form-urlencoded body a route reads itself (FORM_ROUTES), for the document only. */
export const formBody = (properties: Record<string, { description: string; required?: true }>) => ({
  requestBody: {
    required: true,
    content: {
      "application/x-www-form-urlencoded": {
        schema: {
          type: "object" as const,
          properties: Object.fromEntries(Object.entries(properties).map(([name, { description }]) => [name, { type: "string" as const, description }])),
          required: Object.entries(properties)
            .filter(([, p]) => p.required)
            .map(([name]) => name),
        },
      },
    },
  },
});
