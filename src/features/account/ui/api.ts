/**
 * The account pages' only way to the server: the public API under the base path, in the page's
 * language, with the signed-in user's bearer token (kept in sessionStorage: it ends with the tab,
 * and the setup page hands it to the security page). Any 401 but a sign-in's ends the session.
 */
import { ApiError } from "../../../http/browser/kit";
import type { Lang } from "./i18n";

const SESSION_KEY = "usersvc.account.session";

export { ApiError };

export interface Session {
  token: string;
  email: string;
}

export interface User {
  id: number;
  name: string;
  email: string;
  roles: string[];
}

/** The login answer (POST /api/auth/login, /login/mfa, /passkey, /api/account/setup). */
export interface TokenAnswer {
  token: string;
  user: User;
}

/** A right password for an account with a second factor: no token yet. */
export interface MfaChallenge {
  mfaRequired: true;
  mfaToken: string;
  methods: string[];
  expiresIn: number;
  passkeyOptions?: unknown;
}

export const session = {
  get(): Session | undefined {
    const raw = sessionStorage.getItem(SESSION_KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  },
  set(value: Session | undefined) {
    if (value) sessionStorage.setItem(SESSION_KEY, JSON.stringify(value));
    else sessionStorage.removeItem(SESSION_KEY);
  },
};

export type Api = ReturnType<typeof createApi>;

export function createApi(basePath: string, lang: Lang, onUnauthorized: () => void) {
  async function send<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json", "accept-language": lang };
    const token = session.get()?.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(basePath + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (error) {
      throw new ApiError(0, error instanceof Error ? error.message : String(error), "NETWORK");
    }
    const answer = response.status === 204 ? undefined : await response.json().catch(() => undefined);
    if (response.ok) return answer as T;
    const failure = new ApiError(response.status, answer?.message ?? `${response.status} ${response.statusText}`, answer?.errorCode, answer?.errors ?? []);
    if (response.status === 401 && token && !path.startsWith("/api/auth/login") && token === session.get()?.token) {
      session.set(undefined);
      onUnauthorized();
    }
    throw failure;
  }
  return {
    get: <T>(path: string) => send<T>("GET", path),
    post: <T>(path: string, body?: unknown) => send<T>("POST", path, body ?? {}),
    patch: <T>(path: string, body: unknown) => send<T>("PATCH", path, body),
    delete: (path: string, body?: unknown) => send<void>("DELETE", path, body),
  };
}

/**
 * WebAuthn options as a route answers them: the options themselves, or `{options, …}` with what
 * the route wants back beside the response (a challenge's id). `rest` goes back with the response.
 */
export function splitOptions<T>(answer: unknown): { options: T; rest: Record<string, unknown> } {
  if (answer && typeof answer === "object" && "options" in answer) {
    const { options, ...rest } = answer as { options: T };
    return { options, rest };
  }
  return { options: answer as T, rest: {} };
}
