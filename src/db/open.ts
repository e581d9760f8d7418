/** openDatabase: the database the configuration names, opened with the driver it needs (see database.ts). */
import { dirname } from "node:path";
import { privateDatabaseFiles, privateFolder } from "../storage/private-paths";
import type { Database, DatabaseOptions } from "./database";
import { openNative } from "./native";

const DEFAULT_BUSY_TIMEOUT_MS = 5000;

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  const local = options.url.startsWith("file:");
  const path = local ? options.url.slice("file:".length).split("?")[0] : "";
  const { syncUrl } = options;
  if (local && path && path !== ":memory:") {
    privateFolder(dirname(path));
    // A replica's file is its client's to create: one that exists without the replica's own
    // index beside it is refused ("Can not sync a database without a wal_index").
    if (!syncUrl) privateDatabaseFiles(path);
  }
  // Replicas and remote URLs are @libsql/client's alone; a plain file is bun:sqlite unless told otherwise.
  if (local && !syncUrl && (options.driver ?? "native") === "native") return openNative(path, busyTimeoutMs);
  // Loaded only here: @libsql/client's entry unpacks and maps its native addon even for remote
  // URLs (~6 MiB of idle RSS in the binary, npm run bench), which a bun:sqlite process never needs.
  if (local && syncUrl) {
    const { openReplica } = await import("./replica");
    const replica = await openReplica({ ...options, syncUrl }, busyTimeoutMs);
    privateDatabaseFiles(path, { create: false });
    return replica;
  }
  const { openLibsql } = await import("./libsql");
  return openLibsql(options, busyTimeoutMs);
}
