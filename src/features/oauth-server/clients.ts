/**
 * Clients, as ADMIN (and `usersvc clients …`) manages them: a confidential client's secret is in
 * the creating answer only, kept as its SHA-256. Deleting a client ends everything it was granted.
 */
import type { Database } from "../../db/database";
import { sha256Base64url } from "../../digest";
import { AppError } from "../../errors";
import { allClients, type ClientRow, deleteClient, insertClient } from "../../store/oauth";
import { GRANTABLE_SCOPES } from "./service";
import type { ClientBody, OAuthClient } from "./model";

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
});

const invalid = (reason: string) => new AppError("OAUTH_CLIENT_INVALID", { reason });

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
  });
  return { ...clientView(row), ...(secret !== undefined && { clientSecret: secret }) };
}

export const listClients = async (deps: { db: Database }) => (await allClients(deps.db)).map(clientView);

export async function deleteClientById(deps: { db: Database }, clientId: string) {
  if (!(await deleteClient(deps.db, clientId))) throw new AppError("OAUTH_CLIENT_NOT_FOUND");
}
