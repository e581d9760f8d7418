/**
 * API keys for scripts and integrations: create (shown once, needs a recent sign-in, mailed as
 * API_KEY_CREATED without the key), list, revoke; an ADMIN lists and revokes anyone's. Creation
 * and revocation are audited; the key's secret reaches neither the audit row nor the outbox.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/database";
import { AppError } from "../../errors";
import { newKey } from "../../security/api-keys";
import type { Caller } from "../../security/caller";
import { requireRecentAuth } from "../../security/recent-auth";
import { deleteKeyStatement, keysOfUser, type ListedKey, newKeyRows } from "../../store/api-keys";
import { auditStatement } from "../../store/audit";
import { userExists } from "../../store/users";
import { parseInstant, Violations } from "../../validation";
import type { ApiKey, CreateApiKeyBody, CreatedApiKey } from "./model";

export interface ApiKeysDeps {
  db: Database;
  now: () => number;
  config: Pick<Config, "apiKeyMaxPerUser">;
}

const iso = (instant: Date | null) => instant?.toISOString() ?? null;

const listed = (row: ListedKey): ApiKey => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  scopes: row.scopes.split(","),
  createdAt: row.createdAt.toISOString(),
  expiresAt: iso(row.expiresAt),
  lastUsedAt: iso(row.lastUsedAt),
  lastUsedFrom: row.lastUsedFrom,
});

/** A new key for the caller: 201 with the key, which no other answer ever shows. */
export async function createKey(deps: ApiKeysDeps, caller: Caller, body: CreateApiKeyBody): Promise<CreatedApiKey> {
  const at = deps.now();
  requireRecentAuth(caller, at);
  const expiresAt = body.expiresAt === undefined ? null : parseInstant(body.expiresAt, "expiresAt");
  if (expiresAt && expiresAt.getTime() <= at) throw new Violations("body", [{ path: "expiresAt", key: "field.expiresAt.past" }]);
  const scopes = [...new Set(body.scopes)];
  const made = newKey();
  const now = new Date(at);
  const max = deps.config.apiKeyMaxPerUser;
  // One list unit: the key, only while the caller holds fewer than the most, with its audit row and mail.
  const { key } = await deps.db.writeAll((tx) =>
    newKeyRows(tx, { userId: caller.id, name: body.name, prefix: made.prefix, secretHash: made.secretHash, scopes, createdAt: now, expiresAt }, max, caller.email),
  );
  const [row] = key;
  if (!row) throw new AppError("TOO_MANY_API_KEYS", { max });
  const { lastUsedAt: _at, lastUsedFrom: _from, ...shown } = listed(row);
  return { ...shown, key: made.key };
}

/** The user's keys, oldest first (never a key or its hash). */
export const listKeys = async (deps: ApiKeysDeps, userId: number): Promise<ApiKey[]> => (await keysOfUser(deps.db, userId)).map(listed);

/** A user's keys as an ADMIN lists them: 404 USER_NOT_FOUND for a missing user. */
export async function listUserKeys(deps: ApiKeysDeps, userId: number): Promise<ApiKey[]> {
  if (!(await userExists(deps.db, userId))) throw new AppError("USER_NOT_FOUND", { id: userId });
  return listKeys(deps, userId);
}

/** Revokes the user's key `keyId` at once: 404 API_KEY_NOT_FOUND when it is not theirs or unknown. Audited API_KEY_REVOKED. */
export async function revokeKey(deps: ApiKeysDeps, userId: number, keyId: number, caller: Caller) {
  const now = new Date(deps.now());
  await deps.db.write(async (tx) => {
    const [revoked] = await deleteKeyStatement(tx, userId, keyId);
    if (!revoked) throw new AppError("API_KEY_NOT_FOUND");
    await auditStatement(
      tx,
      { action: "API_KEY_REVOKED", actor: caller.email, subjectType: "User", subjectId: userId, details: { keyId, name: revoked.name, prefix: revoked.prefix } },
      now,
    );
  });
}
