/** The OpenID Provider's client shapes (/api/oauth/clients). */
import { t } from "elysia";

const Uri = t.String({ minLength: 1, maxLength: 2000 });
const GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials"] as const;

export const ClientBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  redirectUris: t.Array(Uri, { maxItems: 20 }),
  public: t.Optional(t.Boolean()),
  scopes: t.Optional(t.Array(t.String({ maxLength: 50 }), { maxItems: 20 })),
  grantTypes: t.Optional(t.Array(t.Union(GRANT_TYPES.map((g) => t.Literal(g))), { minItems: 1, maxItems: 3 })),
  firstParty: t.Optional(t.Boolean()),
  postLogoutRedirectUris: t.Optional(t.Array(Uri, { maxItems: 20 })),
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
});
export type OAuthClient = typeof OAuthClient.static;

export const CreatedClient = t.Composite([OAuthClient, t.Object({ clientSecret: t.Optional(t.String()) })]);

export const ClientIdParams = t.Object({ clientId: t.String({ minLength: 1, maxLength: 100 }) });
