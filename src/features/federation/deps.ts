/** What the federation feature is built with (routes.ts), and the sign-in's end it is handed by app.ts. */
import type { Config, FederationConfig, ProviderConfig } from "../../config";
import type { Database, Db } from "../../db/database";
import type { DataCipher } from "../../security/data-encryption";
import type { Connection } from "./providers";

/** Where a sign-in comes from (as the sign-in's end records it). */
export interface SignInClient {
  address: string;
  userAgent: string | null;
  device: string | null;
}

/** The sign-in's end, given by app.ts (the auth feature's): refusals, throttle, second step, session. */
export interface SignInPort {
  complete(
    account: { id: number; email: string; tokenVersion: number; active: boolean; emailVerified: boolean; lastLogin: Date | null; secondFactors: number },
    client: SignInClient,
    also: (tx: Db) => Promise<unknown>,
  ): Promise<unknown>;
}

export interface FederationDeps {
  db: Database;
  now: () => number;
  /** Seals step-up tokens (security/step-up.ts) and kept provider tokens. */
  cipher: DataCipher;
  config: Pick<Config, "basePath" | "publicUrl" | "oidcReturnUrls" | "oidcStartMaxPerIp" | "registerMaxPerIp"> & { federation: FederationConfig };
  connections: Map<string, { provider: ProviderConfig; connection: Connection }>;
  signIn: SignInPort;
}
