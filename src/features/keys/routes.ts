/** Feature folder keys/: the public keys other services verify our tokens with. */
/**
 * GET /.well-known/jwks.json (open): the published public signing keys (TOKEN_SIGNING=EdDSA|ES256,
 * and the OpenID Provider's RS256, ES256 and EdDSA keys when it is on), the next one included before
 * it signs; an empty set under HS512 without the provider, HS512's key never published.
 */
import { Elysia, t } from "elysia";
import type { AppContext } from "../../context";
import { JWKS_MAX_AGE_S } from "../../security/signing-keys";
import { routeSamples } from "../../http/route-sample";

const PublicJwk = t.Union(
  [
    t.Object(
      {
        kty: t.Union([t.Literal("OKP"), t.Literal("EC")]),
        crv: t.Union([t.Literal("Ed25519"), t.Literal("P-256")]),
        x: t.String(),
        y: t.Optional(t.String({ description: "EC keys only" })),
        kid: t.String(),
        alg: t.Union([t.Literal("EdDSA"), t.Literal("ES256")]),
        use: t.Literal("sig"),
      },
      { additionalProperties: false },
    ),
    // The OpenID Provider's RS256 keys (OAUTH_SERVER=on): its ID and access tokens.
    t.Object({ kty: t.Literal("RSA"), n: t.String(), e: t.String(), kid: t.String(), alg: t.Literal("RS256"), use: t.Literal("sig") }, { additionalProperties: false }),
  ],
  { title: "PublicJwk" },
);

export const JsonWebKeySet = t.Object({ keys: t.Array(PublicJwk) }, { title: "JsonWebKeySet", additionalProperties: false });

export const keysRoutes = (ctx: AppContext) =>
  new Elysia({ tags: ["Authentication"] }).use(routeSamples).get(
    "/.well-known/jwks.json",
    async ({ set }) => {
      set.headers["cache-control"] = `public, max-age=${JWKS_MAX_AGE_S}`;
      return (await ctx.tokens.jwks()) as typeof JsonWebKeySet.static;
    },
    {
      sample: () => ({ path: "/.well-known/jwks.json", token: undefined, status: 200 }),
      response: { 200: JsonWebKeySet },
      detail: {
        summary: "The public keys that verify our tokens (JWKS)",
        description: `Every key that signs, will sign within 10 minutes, or signed a token not yet expired. Cached for ${JWKS_MAX_AGE_S} s.`,
      },
    },
  );
