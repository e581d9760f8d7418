/** The parts of oidc-provider (no types of its own) the test kit's OpenID Provider uses. */
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  interface KoaContext {
    path: string;
    method: string;
    querystring: string;
    body: unknown;
  }
  interface Grant {
    addOIDCScope(scope: string): void;
    save(): Promise<string>;
  }
  interface Account {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }
  export default class Provider {
    constructor(
      issuer: string,
      configuration: Record<string, unknown> & {
        findAccount(ctx: unknown, id: string): Promise<Account | undefined>;
        interactions: { url(ctx: unknown, interaction: { uid: string }): string };
      },
    );
    Grant: new (init: {
      accountId: string;
      clientId: string;
    }) => Grant;
    on(event: "server_error", listener: (ctx: unknown, error: Error) => void): void;
    use(middleware: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ uid: string; params: Record<string, unknown> }>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
  }
}
