/**
 * The console's only way to the server: the public API under the base path, with the ADMIN's
 * bearer token (kept in sessionStorage, so it ends with the tab) and the reader's language.
 * Any 401 ends the session: the app returns to sign-in.
 */
import { ApiError } from "../../../http/browser/kit";
import type { Lang } from "./i18n";

const TOKEN_KEY = "usersvc.console.token";

export { ApiError };

export interface Page<T> {
  items: T[];
  total: number;
}

export interface Session {
  token: string;
  email: string;
}

export function createApi(basePath: string, lang: Lang, onUnauthorized: () => void) {
  const session = {
    get: (): Session | undefined => {
      const raw = sessionStorage.getItem(TOKEN_KEY);
      return raw ? (JSON.parse(raw) as Session) : undefined;
    },
    set: (value: Session | undefined) => (value ? sessionStorage.setItem(TOKEN_KEY, JSON.stringify(value)) : sessionStorage.removeItem(TOKEN_KEY)),
  };

  /** `allow`: statuses that are answers, not failures (health answers 503 when DOWN). */
  async function send(method: string, path: string, options: { body?: unknown; headers?: Record<string, string>; allow?: number[] } = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: "application/json", "accept-language": lang, ...options.headers };
    const token = session.get()?.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await fetch(basePath + path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
    } catch (error) {
      throw new ApiError(0, error instanceof Error ? error.message : String(error));
    }
    if (response.ok || options.allow?.includes(response.status)) return response;
    const envelope = await response.json().catch(() => undefined);
    const failure = new ApiError(response.status, envelope?.message ?? `${response.status} ${response.statusText}`, envelope?.errorCode, envelope?.errors ?? []);
    // A login that fails is the sign-in form's business; any other 401 means the session is over
    // (unless it already ended: a request still in flight when the operator signed out).
    if (response.status === 401 && token && token === session.get()?.token && !path.startsWith("/api/auth/login")) {
      session.set(undefined);
      onUnauthorized();
    }
    throw failure;
  }

  const json = async <T>(method: string, path: string, options?: { body?: unknown; headers?: Record<string, string> }) => {
    const response = await send(method, path, options);
    return (response.status === 204 ? undefined : await response.json()) as T;
  };

  return {
    session,
    send,
    get: <T>(path: string) => json<T>("GET", path),
    post: <T>(path: string, body?: unknown) => json<T>("POST", path, { body }),
    put: <T>(path: string, body: unknown, headers?: Record<string, string>) => json<T>("PUT", path, { body, headers }),
    patch: <T>(path: string, body: unknown, headers?: Record<string, string>) => json<T>("PATCH", path, { body, headers }),
    delete: (path: string) => json<void>("DELETE", path),
    /** A list answer with its X-Total-Count. */
    async page<T>(path: string): Promise<Page<T>> {
      const response = await send("GET", path);
      return { items: (await response.json()) as T[], total: Number(response.headers.get("x-total-count") ?? 0) };
    },
    /** A GET with its ETag, for If-Match on the next write. */
    async tagged<T>(path: string): Promise<{ value: T; etag: string | null }> {
      const response = await send("GET", path);
      return { value: (await response.json()) as T, etag: response.headers.get("etag") };
    },
    /** Downloads need the bearer token, so they are fetched, then handed to the browser as a file. */
    async download(path: string, fallbackName: string) {
      const response = await send("GET", path, { headers: { accept: "*/*" } });
      const disposition = response.headers.get("content-disposition") ?? "";
      const encoded = /filename\*=UTF-8''([^;]+)/i.exec(disposition)?.[1];
      const plain = /filename="([^"]+)"/i.exec(disposition)?.[1];
      const name = encoded ? decodeURIComponent(encoded) : (plain ?? fallbackName);
      const url = URL.createObjectURL(await response.blob());
      const link = document.createElement("a");
      link.href = url;
      link.download = name;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    },
  };
}

export type Api = ReturnType<typeof createApi>;

/** The API's types, as the console reads them. */
export interface User {
  id: number;
  name: string;
  email: string;
  department: string | null;
  phone: string | null;
  active: boolean;
  createdAt: string;
  updatedAt: string;
  lastLogin: string | null;
  version: number;
  roles: string[];
}
export interface ApiKey {
  id: number;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  lastUsedFrom: string | null;
}

/** One of a user's second factors, as GET /api/users/{id}/mfa lists it. */
export interface Factor {
  kind: "totp" | "passkey" | "recovery_codes";
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}
export interface Profile {
  userId: number;
  avatarUrl: string | null;
  bio: string | null;
  birthDate: string | null;
  address: string | null;
}
/** An app registered with the OpenID Provider; clientSecret only in the answer that created a confidential one. */
export interface OAuthClient {
  clientId: string;
  name: string;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  public: boolean;
  scopes: string[];
  grantTypes: string[];
  firstParty: boolean;
  createdAt: string;
  clientSecret?: string;
}

export interface Department {
  id: number;
  name: string;
  description: string | null;
  createdAt: string;
  userCount: number;
}
export interface Product {
  id: number;
  name: string;
  code: string;
  price: number;
  description: string | null;
  status: "ACTIVE" | "INACTIVE" | "DISCONTINUED";
  stock: number;
  createdAt: string;
  updatedAt: string;
}
export interface Order {
  id: number;
  userId: number;
  status: "PENDING" | "PAID" | "PAYMENT_FAILED";
  orderItems: { productId: number; productName: string; quantity: number; unitPrice: number; totalPrice: number }[];
  totalAmount: number;
  createdAt: string;
  paidAt: string | null;
}
export interface FileInfo {
  id: string;
  fileName: string;
  originalName: string;
  fileSize: number;
  contentType: string;
  uploadedBy: number | null;
  uploadTime: string;
}
/** A signed-in device of a user (GET /api/users/{id}/sessions). */
export interface DeviceSession {
  id: string;
  device: string | null;
  address: string;
  amr: string[];
  createdAt: string;
  lastSeenAt: string;
}
export interface AuditEntry {
  id: number;
  action: string;
  actor: string;
  subjectType: string;
  subjectId: string;
  details: Record<string, unknown> | null;
  createdAt: string;
}
export interface Backup {
  name: string;
  size: number;
  createdAt: string;
}
export interface Health {
  status: string;
  components?: Record<string, { status: string; details?: Record<string, unknown> }>;
}
