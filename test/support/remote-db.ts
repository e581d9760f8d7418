/**
 * The database a suite gets on the remote and replica legs (test/legs.ts): a sqld of its own
 * (test/support/sqld.ts), fresh and empty, with JWT auth on, behind the test kit's proxy.
 */
import { createClient } from "@libsql/client";
import type { Env } from "../../src/config";
import { leg } from "../legs";
import { startSqld, type Sqld } from "./sqld";

export interface RemoteTestDatabase {
  /** The app's database settings on this leg: the server's URL, or (replica leg) a file in `dir` synced from it. */
  env: Env;
  sqld: Sqld;
  stop(): Promise<void>;
}

export async function openRemoteTestDatabase(dir: string): Promise<RemoteTestDatabase> {
  const sqld = await startSqld();
  const env: Env =
    leg === "replica"
      ? { DATABASE_URL: `file:${dir}/replica/usersvc.db`, DATABASE_SYNC_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken }
      : { DATABASE_URL: leg === "remote-ws" ? sqld.wsUrl : sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken };
  return { env, sqld, stop: () => sqld.stop() };
}

/** Another client's write transaction that really holds the lock (a remote client sends BEGIN with its first statement). */
export async function holdRemoteWriteLock(url: string, authToken?: string) {
  const other = createClient({ url, authToken });
  const tx = await other.transaction("write");
  await tx.execute("SELECT 1");
  return {
    async release() {
      await tx.rollback();
      other.close();
    },
  };
}
