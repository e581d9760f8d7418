/** What API key routes take and answer: the key itself only in the creation's answer, never its hash. */
import { t, type Static } from "elysia";
import { SCOPES, type Scope } from "../../security/caller";
import { UserIdParams } from "../../models/user";
import { Instant, QueryInteger } from "../../validation";

export const CreateApiKeyBody = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 100, description: "What the key is for, e.g. `nightly export`" }),
    scopes: t.Array(t.UnionEnum(SCOPES as [Scope, ...Scope[]]), {
      minItems: 1,
      maxItems: SCOPES.length,
      description: "`<area>:read` (GET) or `<area>:write` (anything else), areas users, files, orders, products",
    }),
    expiresAt: t.Optional(Instant),
  },
  { title: "CreateApiKeyBody" },
);
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;

const keyFields = {
  id: t.Integer(),
  name: t.String(),
  prefix: t.String({ description: "The 8 characters after `usk_`: how the key is recognised in lists and logs" }),
  scopes: t.Array(t.String(), { examples: [["users:read"]] }),
  createdAt: t.String({ format: "date-time" }),
  expiresAt: t.Nullable(t.String({ format: "date-time" })),
};

export const ApiKey = t.Object(
  {
    ...keyFields,
    lastUsedAt: t.Nullable(t.String({ format: "date-time", description: "Written at most once a minute" })),
    lastUsedFrom: t.Nullable(t.String({ description: "The client address of that use" })),
  },
  { title: "ApiKey" },
);
export type ApiKey = Static<typeof ApiKey>;

export const CreatedApiKey = t.Object(
  { ...keyFields, key: t.String({ description: "`usk_<prefix>_<secret>`: shown only in this answer", pattern: "^usk_[0-9A-Za-z]{8}_[0-9A-Za-z]{43}$" }) },
  { title: "CreatedApiKey" },
);
export type CreatedApiKey = Static<typeof CreatedApiKey>;

const KeyId = QueryInteger({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
export const ApiKeyIdParams = t.Object({ id: KeyId });
export const UserApiKeyParams = t.Object({ ...UserIdParams.properties, keyId: KeyId });
