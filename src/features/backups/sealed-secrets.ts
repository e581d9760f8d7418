/**
 * Before a restore replaces anything: the archive's sealed values (TOTP secrets, private signing
 * keys, kept provider tokens: security/data-encryption.ts) each name the data encryption key that sealed them, and the
 * restored service must hold that key. It will take DATA_ENCRYPTION_KEY (and _PREVIOUS) from its
 * environment, else the kept `encryption.key`: the archive's when it carries one, else the data
 * folder's. Values it could not open are found here, and (--discard-secrets) dropped from the staged copy.
 */
import { Database } from "bun:sqlite";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../../config";
import { dataKeyId } from "../../security/data-encryption";
import { ENCRYPTION_KEY_FILE } from "../../security/kept-secrets";

/** Where sealed values live, and what an operator calls them; `clear`: discarding one empties the column, the row stays. */
const SEALED = [
  { table: "mfa_totp", column: "secret_sealed", one: "TOTP secret", many: "TOTP secrets" },
  { table: "signing_keys", column: "private_jwk", one: "private signing key", many: "private signing keys" },
  { table: "identities", column: "tokens_sealed", one: "kept provider token set", many: "kept provider token sets", clear: true },
] as const;

/** A sealed value is `v1.<key id>.<iv>.<body>`: its key id, in SQL. */
const keyIdOf = (column: string) => `substr(${column}, 4, instr(substr(${column}, 4), '.') - 1)`;

export interface KeysAtHand {
  /** The ids of every key the restored service will open sealed values with. */
  ids: string[];
  /** The current one, as the operator would look for it. */
  current: string;
}

const keptKeyId = (file: string) => dataKeyId(Buffer.from(readFileSync(file, "utf8").trim(), "base64"));

/** The data encryption keys the restored service will have: `staged` is the archive's kept key file, when it carries one. */
export function keysAtHand(config: Config, staged: string | undefined): KeysAtHand {
  const previous = config.dataEncryptionKeysPrevious.map(dataKeyId);
  if (config.dataEncryptionKey) {
    const id = dataKeyId(config.dataEncryptionKey);
    return { ids: [id, ...previous], current: `DATA_ENCRYPTION_KEY (id ${id})` };
  }
  const folderKey = join(config.dataDir, ENCRYPTION_KEY_FILE);
  const [file, named] = staged ? [staged, `the archive's ${ENCRYPTION_KEY_FILE}`] : [folderKey, folderKey];
  if (!existsSync(file)) return { ids: previous, current: `no DATA_ENCRYPTION_KEY and no ${folderKey}` };
  const id = keptKeyId(file);
  return { ids: [id, ...previous], current: `${named} (id ${id})` };
}

export interface Unopenable {
  /** The keys that sealed them, none of them at hand. */
  keyIds: string[];
  /** e.g. "2 TOTP secrets, 1 private signing key" */
  what: string;
}

function tablesOf(db: Database) {
  const present = new Set(
    db
      .query<{ name: string }, []>("SELECT name FROM sqlite_schema WHERE type = 'table'")
      .all()
      .map((row) => row.name),
  );
  return SEALED.filter((sealed) => present.has(sealed.table));
}

/** The staged database's sealed values that none of `ids` opens; undefined when every one opens. */
export function unopenable(database: string, ids: readonly string[]): Unopenable | undefined {
  const db = new Database(database, { readonly: true });
  try {
    const keyIds = new Set<string>();
    const counts: string[] = [];
    for (const { table, column, one, many } of tablesOf(db)) {
      const rows = db.query<{ id: string; n: number }, []>(`SELECT ${keyIdOf(column)} AS id, count(*) AS n FROM ${table} WHERE ${column} IS NOT NULL GROUP BY id`).all();
      const missing = rows.filter((row) => !ids.includes(row.id));
      const n = missing.reduce((sum, row) => sum + row.n, 0);
      for (const row of missing) keyIds.add(row.id);
      if (n > 0) counts.push(`${n} ${n === 1 ? one : many}`);
    }
    return keyIds.size === 0 ? undefined : { keyIds: [...keyIds], what: counts.join(", ") };
  } finally {
    db.close();
  }
}

/**
 * --discard-secrets: deletes from the staged database the sealed values none of `ids` opens. Their
 * users sign in without TOTP (recovery codes go with a user's last factor, as when they remove it);
 * the next start makes a new signing key, and tokens signed by a dropped one are refused.
 */
export function discardUnopenable(database: string, ids: readonly string[]) {
  const db = new Database(database);
  try {
    const tables = tablesOf(db);
    db.transaction(() => {
      for (const sealed of tables) {
        const { table, column } = sealed;
        const sealedElsewhere = ids.length === 0 ? "1" : `${keyIdOf(column)} NOT IN (${ids.map(() => "?").join(", ")})`;
        // A kept provider token set is a copy: its identity still signs in without it.
        const discard = "clear" in sealed ? `UPDATE ${table} SET ${column} = NULL` : `DELETE FROM ${table}`;
        db.run(`${discard} WHERE ${column} IS NOT NULL AND ${sealedElsewhere}`, [...ids]);
      }
      // The second factors came in one migration: where TOTP is, so are passkeys and recovery codes.
      if (tables.some((sealed) => sealed.table === "mfa_totp")) {
        db.run(
          "DELETE FROM mfa_recovery_codes WHERE user_id NOT IN (SELECT user_id FROM mfa_totp WHERE confirmed_at IS NOT NULL) AND user_id NOT IN (SELECT user_id FROM passkeys)",
        );
      }
    })();
  } finally {
    db.close();
  }
}
