/** `usersvc clients create|list|delete`: the ADMIN's client management from the command line (the same service as /api/oauth/clients). */
import type { Database } from "../../db/database";
import { createClient, deleteClientById, listClients } from "./clients";
import type { ClientBody } from "./model";

export interface ClientsArgs {
  name?: string;
  redirectUris: string[];
  public: boolean;
  scopes?: string;
  /** --id-token-alg: checked by createClient as the API's body is. */
  idTokenAlg?: string;
  clientId?: string;
}

/** The command's output: create prints the client id and, once, the secret. */
export async function clientsCommand(db: Database, now: () => number, command: string, args: ClientsArgs): Promise<string> {
  if (command === "list") {
    const clients = await listClients({ db });
    return clients
      .map((c) => `${c.clientId}\t${c.name}\t${c.public ? "public" : "confidential"}\t${c.scopes.join(",")}\t${c.redirectUris.join(" ")}\t${c.idTokenSignedResponseAlg}`)
      .join("\n");
  }
  if (command === "delete") {
    await deleteClientById({ db }, args.clientId!);
    return `deleted ${args.clientId}`;
  }
  const scopes = (args.scopes ?? "")
    .split(",")
    .map((scope) => scope.trim())
    .filter(Boolean);
  const created = await createClient(
    { db, now },
    { name: args.name!, redirectUris: args.redirectUris, public: args.public, scopes, idTokenSignedResponseAlg: args.idTokenAlg as ClientBody["idTokenSignedResponseAlg"] },
  );
  return [`client_id: ${created.clientId}`, ...(created.clientSecret ? [`client_secret: ${created.clientSecret} (shown once)`] : [])].join("\n");
}
