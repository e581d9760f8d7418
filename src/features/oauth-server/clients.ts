/**
 * Clients, as ADMIN (and `usersvc clients …`) manages them: a confidential client's secret is in
 * the creating answer only, kept as its SHA-256. Deleting a client ends everything it was granted.
 */
import type { Database } from "../../db/database";
import { sha256Base64url } from "../../digest";
import { AppError } from "../../errors";
import { allClients, type ClientRow, deleteClient, insertClient } from "../../store/oauth";
import { GRANTABLE_SCOPES, OAuthError, OPEN_SCOPES } from "./service";
import type { ClientBody, OAuthClient } from "./model";
import { ID_TOKEN_ALGS, type IdTokenAlg } from "./tokens";

const random = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url");

export const clientView = (row: ClientRow): OAuthClient => ({
  id: row.id,
  clientId: row.clientId,
  name: row.name,
  redirectUris: row.redirectUris,
  postLogoutRedirectUris: row.postLogoutRedirectUris,
  public: row.secretHash === null,
  scopes: row.scopes,
  grantTypes: row.grantTypes,
  firstParty: row.firstParty,
  createdAt: row.createdAt.toISOString(),
  idTokenSignedResponseAlg: row.idTokenSignedResponseAlg,
});

const invalid = (reason: string) => new AppError("OAUTH_CLIENT_INVALID", { reason });

const isIdTokenAlg = (alg: unknown): alg is IdTokenAlg => (ID_TOKEN_ALGS as readonly unknown[]).includes(alg);
/** The refusal of an algorithm not offered, in the words each door uses for the field. */
const algRefusal = (field: string, alg: unknown) => `${field} must be ${ID_TOKEN_ALGS.join(", ")}, not ${JSON.stringify(alg)}`;

function checkedUri(uri: string) {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw invalid(`${uri} is not an absolute URI`);
  }
  if (url.hash) throw invalid(`${uri} has a fragment`);
  return uri;
}

export async function createClient(deps: { db: Database; now: () => number }, body: ClientBody, dynamic = false) {
  const isPublic = body.public === true;
  const grantTypes = body.grantTypes ?? ["authorization_code", "refresh_token"];
  const scopes = [...new Set(body.scopes ?? [])];
  const unknown = scopes.filter((scope) => !GRANTABLE_SCOPES.includes(scope) && !["openid", "profile", "email"].includes(scope));
  if (unknown.length > 0) throw invalid(`unknown scope ${unknown.join(", ")}`);
  if (isPublic && grantTypes.includes("client_credentials")) throw invalid("a public client cannot use client_credentials");
  if (grantTypes.includes("authorization_code") && body.redirectUris.length === 0) throw invalid("redirectUris is empty");
  // The API's schema refuses it first; the command line comes here unchecked.
  const idTokenAlg = body.idTokenSignedResponseAlg ?? "RS256";
  if (!isIdTokenAlg(idTokenAlg)) throw invalid(algRefusal("idTokenSignedResponseAlg", idTokenAlg));
  const secret = isPublic ? undefined : random(32);
  const row = await insertClient(deps.db, {
    clientId: random(16),
    name: body.name,
    secretHash: secret === undefined ? null : sha256Base64url(secret),
    redirectUris: body.redirectUris.map(checkedUri),
    postLogoutRedirectUris: (body.postLogoutRedirectUris ?? []).map(checkedUri),
    scopes,
    grantTypes,
    firstParty: body.firstParty === true,
    dynamic,
    createdAt: new Date(deps.now()),
    idTokenSignedResponseAlg: idTokenAlg,
  });
  return { ...clientView(row), ...(secret !== undefined && { clientSecret: secret }) };
}

/** RFC 7591's metadata, as far as usersvc reads it (anything else is ignored, as §2 allows). */
export interface ClientMetadata {
  redirect_uris?: unknown;
  client_name?: unknown;
  token_endpoint_auth_method?: unknown;
  grant_types?: unknown;
  response_types?: unknown;
  scope?: unknown;
  id_token_signed_response_alg?: unknown;
}

/** A dynamically registered app's redirect: https, or http on loopback (a native app, RFC 8252). */
const dynamicRedirect = (uri: string) => {
  if (!URL.canParse(uri)) return false;
  const url = new URL(uri);
  return url.protocol === "https:" || (url.protocol === "http:" && ["127.0.0.1", "[::1]", "localhost"].includes(url.hostname));
};

const strings = (value: unknown) => Array.isArray(value) && value.every((item) => typeof item === "string");

/**
 * Dynamic registration (RFC 7591, OAUTH_DYNAMIC_REGISTRATION=on): a public client (PKCE, no
 * secret) that may ask for `openid profile email` only, whose every sign-in shows the consent
 * screen. Refusals are RFC 7591's: invalid_redirect_uri, invalid_client_metadata.
 */
export async function registerClient(deps: { db: Database; now: () => number }, metadata: ClientMetadata) {
  const refuse = (error: string, description: string) => new OAuthError(error, description);
  const { redirect_uris: redirectUris, client_name: name = "Unnamed app" } = metadata;
  if (!strings(redirectUris) || (redirectUris as string[]).length === 0 || (redirectUris as string[]).length > 20)
    throw refuse("invalid_redirect_uri", "redirect_uris must list 1 to 20 URIs");
  const uris = redirectUris as string[];
  if (!uris.every(dynamicRedirect)) throw refuse("invalid_redirect_uri", "each redirect URI must be https, or http on loopback");
  if (typeof name !== "string" || name.trim() === "" || name.length > 200) throw refuse("invalid_client_metadata", "client_name must be 1 to 200 characters");
  if (metadata.token_endpoint_auth_method !== undefined && metadata.token_endpoint_auth_method !== "none")
    throw refuse("invalid_client_metadata", "only public clients register themselves: token_endpoint_auth_method must be none");
  if (metadata.grant_types !== undefined && (!strings(metadata.grant_types) || (metadata.grant_types as string[]).some((g) => g !== "authorization_code")))
    throw refuse("invalid_client_metadata", "grant_types may only be authorization_code");
  if (metadata.response_types !== undefined && (!strings(metadata.response_types) || (metadata.response_types as string[]).some((r) => r !== "code")))
    throw refuse("invalid_client_metadata", "response_types may only be code");
  const scopes = typeof metadata.scope === "string" ? metadata.scope.split(" ").filter(Boolean) : OPEN_SCOPES;
  if (metadata.scope !== undefined && (typeof metadata.scope !== "string" || scopes.some((scope) => !OPEN_SCOPES.includes(scope))))
    throw refuse("invalid_client_metadata", "scope may only name openid, profile and email");
  const idTokenAlg = metadata.id_token_signed_response_alg ?? "RS256";
  if (!isIdTokenAlg(idTokenAlg)) throw refuse("invalid_client_metadata", algRefusal("id_token_signed_response_alg", idTokenAlg));
  let client: OAuthClient;
  try {
    client = await createClient(deps, { name: name.trim(), redirectUris: uris, public: true, grantTypes: ["authorization_code"], idTokenSignedResponseAlg: idTokenAlg }, true);
  } catch (error) {
    if (error instanceof AppError) throw refuse("invalid_redirect_uri", String(error.params.reason ?? error.code));
    throw error;
  }
  return {
    client_id: client.clientId,
    client_id_issued_at: Math.floor(Date.parse(client.createdAt) / 1000),
    client_name: client.name,
    redirect_uris: client.redirectUris,
    token_endpoint_auth_method: "none",
    grant_types: client.grantTypes,
    response_types: ["code"],
    scope: OPEN_SCOPES.join(" "),
    id_token_signed_response_alg: client.idTokenSignedResponseAlg,
  };
}

export const listClients = async (deps: { db: Database }) => (await allClients(deps.db)).map(clientView);

export async function deleteClientById(deps: { db: Database }, clientId: string) {
  if (!(await deleteClient(deps.db, clientId))) throw new AppError("OAUTH_CLIENT_NOT_FOUND");
}
