/**
 * A page's side of a flow through another provider (sign-in, link, step-up), shared by the admin
 * console and the account pages: the page makes a PKCE verifier, keeps it in sessionStorage (this
 * tab only) with what the flow is for, and sends only its S256 challenge; when the provider's
 * answer comes back to the page in the fragment (`#code=…` or `#error=…`), the fragment is taken
 * off the address at once and handed over with the verifier that began the flow. A code arriving
 * in a tab that began no flow finds no verifier: it signs nobody in.
 */

/** What a flow was begun for, kept across the trip to the provider. */
export interface BegunFlow<K extends string = string> {
  kind: K;
  provider: string;
  verifier: string;
  /** What to do once it is back (a step-up's pending change: "link:google"). */
  next?: string;
}

/** A flow's answer, as the page got it back. */
export type FlowReturn<K extends string = string> = BegunFlow<K> & ({ code: string; error?: undefined } | { code?: undefined; error: string });

const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");

/** A new flow kept under `key`: its S256 challenge for the start request. */
export async function beginFlow<K extends string>(key: string, flow: Omit<BegunFlow<K>, "verifier">): Promise<string> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  sessionStorage.setItem(key, JSON.stringify({ ...flow, verifier }));
  return base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
}

/**
 * The answer in this page's fragment, if any: the fragment is removed from the address (and the
 * history entry) either way, and the kept flow with it. Undefined without a code or an error; a
 * code without a kept flow comes back as the error INVALID_OIDC_CODE.
 */
export function takeFlowReturn<K extends string>(key: string): FlowReturn<K> | undefined {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const code = fragment.get("code");
  const error = fragment.get("error");
  if (code === null && error === null) return undefined;
  history.replaceState(history.state, "", location.pathname + location.search);
  const raw = sessionStorage.getItem(key);
  sessionStorage.removeItem(key);
  const kept = raw ? (JSON.parse(raw) as BegunFlow<K>) : undefined;
  if (error !== null) return { kind: kept?.kind ?? ("sign-in" as K), provider: kept?.provider ?? "", verifier: "", next: kept?.next, error };
  if (!kept) return { kind: "sign-in" as K, provider: "", verifier: "", error: "INVALID_OIDC_CODE" };
  return { ...kept, code: code ?? "" };
}

/** The provider's start as a browser navigation: where the page goes for a sign-in. */
export const signInStartUrl = (basePath: string, provider: string, returnTo: string, codeChallenge: string) =>
  `${basePath}/api/auth/oidc/${encodeURIComponent(provider)}/start?${new URLSearchParams({ returnTo, codeChallenge })}`;

/** A provider as GET /api/auth/oidc/providers lists it. */
export interface ProviderButton {
  name: string;
  label: string;
  /** Whether it can confirm a fresh sign-in (a step-up). */
  stepUp: boolean;
}

/** A provider linked to an account, as GET /api/account/identities and GET /api/users/{id}/identities list it. */
export interface LinkedIdentity {
  id: number;
  provider: string;
  label: string;
  email: string | null;
  linkedAt: string;
  lastUsedAt: string | null;
}

/** The errors a flow's fragment can carry, each with a sentence in each page's texts. */
export const FLOW_ERRORS = [
  "PROVIDER_DENIED",
  "PROVIDER_REJECTED",
  "PROVIDER_UNAVAILABLE",
  "INVALID_OIDC_STATE",
  "INVALID_OIDC_CODE",
  "ACCOUNT_EXISTS",
  "SIGNUP_DISABLED",
  "VERIFICATION_SENT",
  "IDENTITY_IN_USE",
  "IDENTITY_NOT_LINKED",
  "TOO_MANY_REQUESTS",
] as const;
export type FlowError = (typeof FLOW_ERRORS)[number];

/** The error's own name when the page has a sentence for it, else undefined (a generic sentence). */
export const knownFlowError = (code: string): FlowError | undefined => (FLOW_ERRORS as readonly string[]).find((known) => known === code) as FlowError | undefined;
