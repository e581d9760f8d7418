/**
 * A federated sign-in, bound to the browser that began it without a cookie: the page makes a
 * verifier and sends only its S256 challenge to `start`; the provider's answer comes back to
 * `callback`, which proves the identity, finds (or makes, or refuses) its account and hands the
 * page a one-time code in the fragment; only the verifier turns that code into a sign-in
 * (`exchange`), so a code planted in someone else's browser signs nobody in.
 *
 * Between the requests, the flow lives in the database (store/identities.ts): the started flow
 * 10 minutes, the code 60 seconds, each single use. A link from the security page takes the same
 * way with the signed-in caller's account; its code completes the link instead of a sign-in. So
 * does a step-up (security/step-up.ts): a fresh sign-in at a provider linked to the caller's
 * account (prompt=login, max_age=0, its auth_time no older than the flow), whose code turns into a
 * step-up token.
 */
import { requestQuery } from "../../http/request-url";
import type { ProviderConfig } from "../../config";
import { AppError } from "../../errors";
import { refuseUntil } from "../../security/password-check";
import { auditStatement } from "../../store/audit";
import type { Caller } from "../../security/caller";
import { issueStepUp, type StepUp } from "../../security/step-up";
import { accountById, accountOfIdentity, identitiesOf, identityUsedStatement, keepFlowRows, takeFlow } from "../../store/identities";
import { randomToken } from "../../store/sessions";
import { addressCounter } from "../../store/throttle";
import type { FederationDeps, SignInClient } from "./deps";
import { accountFor, type LinkedAccount, linkToCaller } from "./linking";
import { type FlowChecks, flowRandoms, type ProviderIdentity, providerFailure } from "./providers";

const FLOW_TTL_MS = 10 * 60_000;
const CODE_TTL_MS = 60_000;
/** How far the provider's clock may be behind ours when it says when the user signed in. */
const AUTH_TIME_SKEW_MS = 60_000;
/** Starts a minute per client address (OIDC_START_MAX_PER_IP): each writes a flow and may cost the provider a discovery. */
const countStart = addressCounter("oidc-start", 60_000);

/** What a flow is for besides a sign-in: a link to the caller's account, or a step-up of the caller's. */
export type FlowPurpose = { linkTo: number } | { stepUpFor: number };

/** What a started flow keeps. */
interface StartedFlow {
  checks: FlowChecks;
  redirectUri: string;
  returnTo: string;
  /** The page's S256 challenge; its verifier redeems the code. */
  codeChallenge: string;
  /** When it began (ms): a step-up's provider sign-in must be later. */
  startedAt: number;
  /** A link from the security page: the caller's account. */
  linkTo?: number;
  /** A step-up: the caller's account, which the identity must already be linked to. */
  stepUpFor?: number;
}

/** What a code redeems: a sign-in to an account through an identity, a link to the caller's account, or a step-up of the caller's. */
type CodeFlow =
  | { codeChallenge: string; signIn: IdentityUse }
  | { codeChallenge: string; link: { userId: number; identity: ProviderIdentity } }
  | { codeChallenge: string; stepUp: IdentityUse };

/** An identity's use by a sign-in or a step-up: its account, and what its row notes (the address it gave, the tokens kept). */
interface IdentityUse {
  userId: number;
  identityId: number;
  email: string | null;
  tokensSealed?: string;
}

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

/**
 * `start`: the provider's authorization URL for a new flow (kept 10 minutes); limited per client
 * address. A step-up asks the provider for a fresh sign-in (prompt=login, max_age=0).
 */
export async function startFlow(
  deps: FederationDeps,
  name: string,
  input: { returnTo: string; codeChallenge: string },
  request: Request,
  address: string,
  purpose?: FlowPurpose,
): Promise<string> {
  const { provider, connection } = providerOf(deps, name);
  const stepUp = purpose !== undefined && "stepUpFor" in purpose;
  const returnTo = checkedReturnTo(deps.config, input.returnTo);
  const now = deps.now();
  const { requests, endsAt } = await countStart(deps.db, address, now);
  if (requests > deps.config.oidcStartMaxPerIp) refuseUntil(endsAt, now);
  const { state, nonce, verifier } = flowRandoms();
  const checks: FlowChecks = { state, nonce, verifier, ...(stepUp && { maxAge: 0 }) };
  const redirectUri = redirectUriOf(deps, provider.name, request);
  let url: URL;
  try {
    url = await connection.authorizationUrl(redirectUri, checks);
  } catch (error) {
    // The page hears of it as of any provider failure, in its fragment.
    return withFragment(returnTo, { error: providerFailure(error).code });
  }
  const flow: StartedFlow = { checks, redirectUri, returnTo, codeChallenge: input.codeChallenge, startedAt: now, ...purpose };
  await deps.db.writeAll((tx) => keepFlowRows(tx, "state", state, provider.name, flow, new Date(now + FLOW_TTL_MS), new Date(now)));
  return url.href;
}

/**
 * A step-up's start, at a provider where the caller has an identity (404 IDENTITY_NOT_FOUND) and
 * that can prove a fresh sign-in: only OpenID Connect's auth_time does (400 STEP_UP_NOT_SUPPORTED for GitHub).
 */
export async function startStepUp(deps: FederationDeps, caller: Caller, name: string, input: { returnTo: string; codeChallenge: string }, request: Request, address: string) {
  const { provider } = providerOf(deps, name);
  if (provider.kind === "github") throw new AppError("STEP_UP_NOT_SUPPORTED");
  if (!(await identitiesOf(deps.db, caller.id)).some((row) => row.provider === provider.name)) throw new AppError("IDENTITY_NOT_FOUND");
  return startFlow(deps, name, input, request, address, { stepUpFor: caller.id });
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
    const proven = await connection.identityOf(callbackUrl, flow.checks).catch((error) => {
      throw providerFailure(error);
    });
    // The provider's tokens are kept only when asked for, and then only sealed (even in the code's row).
    const identity: ProviderIdentity = provider.keepTokens ? { ...proven.identity, tokensSealed: deps.cipher.seal(JSON.stringify(proven.tokens)) } : proven.identity;
    const code = randomToken(32);
    const { codeChallenge } = flow;
    const redeem: CodeFlow =
      flow.stepUpFor !== undefined
        ? { codeChallenge, stepUp: await stepUpTarget(deps, flow.stepUpFor, flow.startedAt, identity) }
        : flow.linkTo !== undefined
          ? { codeChallenge, link: { userId: flow.linkTo, identity } }
          : { codeChallenge, signIn: await signInTarget(deps, provider, identity, address) };
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
  return { userId: account.id, identityId, email: identity.email, tokensSealed: identity.tokensSealed };
}

/**
 * A step-up's identity: signed in at the provider after the flow began (its auth_time; the library
 * has checked it against max_age=0 too), and linked to the account that asked. Another provider
 * account of the same person is no proof: 403 IDENTITY_NOT_LINKED.
 */
async function stepUpTarget(deps: FederationDeps, userId: number, startedAt: number, identity: ProviderIdentity) {
  if (identity.authTime === undefined || identity.authTime * 1000 < startedAt - AUTH_TIME_SKEW_MS) throw new AppError("PROVIDER_REJECTED");
  const linked = await accountOfIdentity(deps.db, identity.issuer, identity.subject);
  if (!linked || linked.id !== userId) throw new AppError("IDENTITY_NOT_LINKED");
  return { userId: linked.id, identityId: linked.identityId, email: identity.email, tokensSealed: identity.tokensSealed };
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
  const { userId, identityId } = flow.signIn;
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
    await identityUsedStatement(tx, flow.signIn, now);
    await auditStatement(tx, audit, now);
  });
}

/** A link's code and verifier, redeemed by the caller it was started for: the identity linked. */
export async function completeLink(deps: FederationDeps, caller: { id: number; email: string }, input: { code: string; codeVerifier: string }) {
  const flow = await redeemed(deps, input.code, input.codeVerifier);
  if (!("link" in flow) || flow.link.userId !== caller.id) throw new AppError("INVALID_OIDC_CODE");
  return linkToCaller(deps, providerOf(deps, flow.provider).provider, caller, flow.link.identity);
}

/** A step-up's code and verifier, redeemed by the caller it was started for (the same session's token version): a step-up token, method fed. */
export async function completeStepUp(deps: FederationDeps, caller: Caller, input: { code: string; codeVerifier: string }): Promise<StepUp> {
  const flow = await redeemed(deps, input.code, input.codeVerifier);
  if (!("stepUp" in flow) || flow.stepUp.userId !== caller.id) throw new AppError("INVALID_OIDC_CODE");
  await deps.db.write((tx) => identityUsedStatement(tx, flow.stepUp, new Date(deps.now())));
  return issueStepUp(deps, caller, "fed");
}
