/**
 * A federated sign-in, bound to the browser that began it without a cookie: the page makes a
 * verifier and sends only its S256 challenge to `start`; the provider's answer comes back to
 * `callback`, which proves the identity, finds (or makes, or refuses) its account and hands the
 * page a one-time code in the fragment; only the verifier turns that code into a sign-in
 * (`exchange`), so a code planted in someone else's browser signs nobody in.
 *
 * Between the requests, the flow lives in the database (store/identities.ts): the started flow
 * 10 minutes, the code 60 seconds, each single use. A link from the security page takes the same
 * way with the signed-in caller's account; its code completes the link instead of a sign-in.
 */
import { requestQuery } from "../../http/request-url";
import type { ProviderConfig } from "../../config";
import { AppError } from "../../errors";
import { refuseUntil } from "../../security/password-check";
import { auditStatement } from "../../store/audit";
import { accountById, identityUsedStatement, keepFlowRows, takeFlow } from "../../store/identities";
import { randomToken } from "../../store/sessions";
import { addressCounter } from "../../store/throttle";
import type { FederationDeps, SignInClient } from "./deps";
import { accountFor, type LinkedAccount, linkToCaller } from "./linking";
import { type FlowChecks, flowRandoms, type ProviderIdentity, providerFailure } from "./providers";

const FLOW_TTL_MS = 10 * 60_000;
const CODE_TTL_MS = 60_000;
/** Starts a minute per client address (OIDC_START_MAX_PER_IP): each writes a flow and may cost the provider a discovery. */
const countStart = addressCounter("oidc-start", 60_000);

/** What a started flow keeps. */
interface StartedFlow {
  checks: FlowChecks;
  redirectUri: string;
  returnTo: string;
  /** The page's S256 challenge; its verifier redeems the code. */
  codeChallenge: string;
  /** A link from the security page: the caller's account. */
  linkTo?: number;
}

/** What a code redeems: a sign-in to an account through an identity, or a link to the caller's account. */
type CodeFlow =
  | { codeChallenge: string; signIn: { userId: number; identityId: number; email: string | null } }
  | { codeChallenge: string; link: { userId: number; identity: ProviderIdentity } };

export function providerOf(deps: FederationDeps, name: string) {
  const found = deps.connections.get(name.toLowerCase());
  if (!found) throw new AppError("PROVIDER_NOT_FOUND");
  return found;
}

/**
 * returnTo as the contract allows it: a page under /account or /admin on this origin (under
 * BASE_PATH), or a URL listed exactly (origin and path) in OIDC_RETURN_URLS; never a fragment of
 * its own (the code is the fragment). Answers where to redirect.
 */
export function checkedReturnTo(config: FederationDeps["config"], returnTo: string): string {
  const refused = () => new AppError("INVALID_RETURN_URL");
  if (returnTo.includes("#") || returnTo.includes("\\")) throw refused();
  if (returnTo.startsWith("/") && !returnTo.startsWith("//")) {
    const url = new URL(returnTo, "http://this.origin");
    if (url.origin !== "http://this.origin") throw refused();
    const page = url.pathname.slice(config.basePath.length);
    if (!url.pathname.startsWith(config.basePath) || !/^\/(account|admin)(\/|$)/.test(page)) throw refused();
    return url.pathname + url.search;
  }
  if (!URL.canParse(returnTo)) throw refused();
  const url = new URL(returnTo);
  if (url.search !== "" || !config.oidcReturnUrls.includes(url.origin + url.pathname)) throw refused();
  return url.href;
}

/** The callback URL registered at each provider: PUBLIC_URL's (else this request's origin), BASE_PATH, the route. */
const redirectUriOf = (deps: FederationDeps, provider: string, request: Request) =>
  `${deps.config.publicUrl ?? new URL(request.url).origin}${deps.config.basePath}/api/auth/oidc/${provider}/callback`;

/** `start`: the provider's authorization URL for a new flow (kept 10 minutes); limited per client address. */
export async function startFlow(
  deps: FederationDeps,
  name: string,
  input: { returnTo: string; codeChallenge: string; stepUp?: boolean },
  request: Request,
  address: string,
  linkTo?: number,
): Promise<string> {
  const { provider, connection } = providerOf(deps, name);
  const returnTo = checkedReturnTo(deps.config, input.returnTo);
  const now = deps.now();
  const { requests, endsAt } = await countStart(deps.db, address, now);
  if (requests > deps.config.oidcStartMaxPerIp) refuseUntil(endsAt, now);
  const { state, nonce, verifier } = flowRandoms();
  const checks: FlowChecks = { state, nonce, verifier, ...(input.stepUp && { maxAge: 0 }) };
  const redirectUri = redirectUriOf(deps, provider.name, request);
  let url: URL;
  try {
    url = await connection.authorizationUrl(redirectUri, checks);
  } catch (error) {
    // The page hears of it as of any provider failure, in its fragment.
    return withFragment(returnTo, { error: providerFailure(error).code });
  }
  const flow: StartedFlow = { checks, redirectUri, returnTo, codeChallenge: input.codeChallenge, ...(linkTo !== undefined && { linkTo }) };
  await deps.db.writeAll((tx) => keepFlowRows(tx, "state", state, provider.name, flow, new Date(now + FLOW_TTL_MS), new Date(now)));
  return url.href;
}

const withFragment = (returnTo: string, values: Record<string, string>) => `${returnTo}#${new URLSearchParams(values)}`;

/**
 * `callback`: the provider's answer checked (state, code, ID token, userinfo), the account found,
 * linked, made or refused; a redirect to the flow's returnTo with `#code=` (60 s, single use) or
 * `#error=CODE`. An unknown, used or expired state goes back to the sign-in page with its error.
 */
export async function completeCallback(deps: FederationDeps, name: string, request: Request, address: string): Promise<string> {
  const query = new URLSearchParams(requestQuery(request.url));
  const state = query.get("state") ?? "";
  const now = new Date(deps.now());
  const taken = state ? await deps.db.write((tx) => takeFlow(tx, "state", state, now)) : undefined;
  const found = deps.connections.get(name.toLowerCase());
  if (!taken || !found || taken.provider !== found.provider.name) return withFragment(`${deps.config.basePath}/account`, { error: "INVALID_OIDC_STATE" });
  const flow = taken.data as StartedFlow;
  const { provider, connection } = found;
  try {
    const callbackUrl = new URL(flow.redirectUri);
    for (const [key, value] of query) callbackUrl.searchParams.append(key, value);
    const identity = await connection.identityOf(callbackUrl, flow.checks).catch((error) => {
      throw providerFailure(error);
    });
    if (flow.checks.maxAge !== undefined && !(identity.authTime !== undefined && identity.authTime * 1000 >= now.getTime() - FLOW_TTL_MS)) throw new AppError("PROVIDER_REJECTED");
    const code = randomToken(32);
    const redeem: CodeFlow =
      flow.linkTo !== undefined
        ? { codeChallenge: flow.codeChallenge, link: { userId: flow.linkTo, identity } }
        : { codeChallenge: flow.codeChallenge, signIn: await signInTarget(deps, provider, identity, address) };
    await deps.db.writeAll((tx) => keepFlowRows(tx, "code", code, provider.name, redeem, new Date(now.getTime() + CODE_TTL_MS), now));
    return withFragment(flow.returnTo, { code });
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return withFragment(flow.returnTo, { error: error.code });
  }
}

/** The account the identity signs in to; one never proven and made by a provider waits for our verification mail. */
async function signInTarget(deps: FederationDeps, provider: ProviderConfig, identity: ProviderIdentity, address: string) {
  const { account, identityId }: LinkedAccount = await accountFor(deps, provider, identity, address);
  if (!account.emailVerified && account.emailChangedAt === null && !account.hasPassword) throw new AppError("VERIFICATION_SENT");
  return { userId: account.id, identityId, email: identity.email };
}

/** The page's verifier against the challenge that began the flow (S256). */
const verifierMatches = (verifier: string, challenge: string) => new Bun.CryptoHasher("sha256").update(verifier).digest("base64url") === challenge;

/** A code taken (used up whatever follows) and checked against the page's verifier. */
async function redeemed(deps: FederationDeps, code: string, codeVerifier: string): Promise<CodeFlow & { provider: string }> {
  const taken = await deps.db.write((tx) => takeFlow(tx, "code", code, new Date(deps.now())));
  const flow = taken?.data as CodeFlow | undefined;
  if (!taken || !flow || !verifierMatches(codeVerifier, flow.codeChallenge)) throw new AppError("INVALID_OIDC_CODE");
  return { ...flow, provider: taken.provider };
}

/** `exchange`: the code and the page's verifier → the login answer (or the second step). */
export async function exchangeCode(deps: FederationDeps, input: { code: string; codeVerifier: string }, client: SignInClient): Promise<unknown> {
  const flow = await redeemed(deps, input.code, input.codeVerifier);
  if (!("signIn" in flow)) throw new AppError("INVALID_OIDC_CODE");
  const { userId, identityId, email } = flow.signIn;
  const account = await accountById(deps.db, userId);
  if (!account) throw new AppError("INVALID_OIDC_CODE");
  const now = new Date(deps.now());
  const audit = {
    action: "FEDERATED_LOGIN",
    actor: account.email,
    subjectType: "User",
    subjectId: account.id,
    details: { provider: flow.provider, identityId, address: client.address },
  };
  return deps.signIn.complete(account, client, async (tx) => {
    await identityUsedStatement(tx, identityId, email, now);
    await auditStatement(tx, audit, now);
  });
}

/** A link's code and verifier, redeemed by the caller it was started for: the identity linked. */
export async function completeLink(deps: FederationDeps, caller: { id: number; email: string }, input: { code: string; codeVerifier: string }) {
  const flow = await redeemed(deps, input.code, input.codeVerifier);
  if (!("link" in flow) || flow.link.userId !== caller.id) throw new AppError("INVALID_OIDC_CODE");
  return linkToCaller(deps, providerOf(deps, flow.provider).provider, caller, flow.link.identity);
}
