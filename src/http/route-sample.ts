/**
 * A route's walk sample, declared on the route next to its `access`:
 * `sample: (walk) => ({ path: `/api/products/${walk.productId}`, status: 200 })`. The whole-surface
 * tests (test/support/route-walk.ts) send one real request per registered route, with real data
 * behind it, made once by the test kit and handed to every sample as `walk`; a route without a
 * sample fails them by name (docs/contributing.md, "Adding a route").
 *
 * Nothing calls a sample in production: the macro leaves the function on the route's hooks, read
 * only by the tests, and adds no hook that runs per request.
 */
import { Elysia } from "elysia";

/** One request of the walk, and the status that proves its answer is the route's own (not a 401 or 400 that shows nothing). */
export interface RouteSample {
  /** The path and query, the base path left out. */
  path: string;
  /** The JSON body; a function makes it when it is sent (a code that must be current). */
  body?: unknown;
  /** Sent as-is (multipart) instead of JSON. */
  raw?: FormData;
  /** The bearer: absent, the walk's ADMIN; `undefined` written out, none (an anonymous request). */
  token?: string;
  status: number;
  /** Why this answer holds private data by design: the private-fields walk sends it but does not read it. */
  holdsPrivateData?: string;
}

/** A user the walk made: every one has the password "Passw0rd!" unless said otherwise. */
interface Someone {
  id: number;
  email: string;
  token: string;
}

/**
 * The data the walk prepares once per app, for every sample. Each bearer that a sample spends
 * (signs out, revokes, changes the password of) is that sample's own, so the walk's order does not matter.
 */
export interface Walk {
  /** The ADMIN (password "Admin-Passw0rd!"): the bearer of every sample that names none. */
  admin: Someone;
  /** The ADMIN signed in just now: creating an API key needs a recent sign-in. */
  adminSignedIn: string;
  /** A self-registered account (with a salary): the user the users, people and search samples act on. */
  registered: { id: number; email: string };
  /** A valid registration body for `email`. */
  registration: (email: string) => Record<string, unknown>;
  productId: number;
  orderId: number;
  /** A file the ADMIN uploaded. */
  file: { id: number; fileName: string };
  /** A new multipart form with one small text file, as an upload sends it. */
  upload: () => FormData;
  /** A user that only the delete sample deletes. */
  doomedUserId: number;
  /** A backup's name; none where the database is backed up by its server (remote). */
  backup?: string;
  /** Bearers spent by signing out and by changing the password. */
  leaving: string;
  changing: string;
  /** A user signed in on several devices: `device` lists them, `ended` and `endedByAdmin` are ended; `another` is someone else's, signed in twice. */
  sessions: { ownerId: number; device: string; endedSid: string; endedByAdminSid: string; another: string };
  /** API keys to revoke: one of the ADMIN's, and one of the sessions' owner. */
  apiKeys: { ownKeyId: number; ownersKeyId: number };
  /** Second factors: accounts with TOTP, passkeys and sign-ins half done, each sample's own. */
  mfa: {
    /** Has TOTP; its first recovery code finishes `mfaToken`'s sign-in. */
    totp: Someone & { mfaToken: string; recoveryCode: string };
    /** Has no second factor. */
    enrolling: string;
    /** Began TOTP: `code()` confirms it. */
    confirming: { token: string; code: () => string };
    /** Has TOTP, removed by the samples. */
    removing: Someone;
    /** Has passkeys: one to rename, one to remove, and a new one's registration to send. */
    keyed: { token: string; renamed: string; removed: string; registration: unknown };
    /** A passwordless sign-in's answer, with the first passkey. */
    passkeyAssertion: unknown;
  };
  /** A request of a sample's own preparation (the ADMIN's unless `token` says), for data no other sample needs. */
  send: <T = Record<string, unknown>>(method: string, path: string, options?: { token?: string; body?: unknown }) => Promise<{ status: number; body: T }>;
}

/** A route's sample; it may prepare its own data with `walk.send` first. */
export type SampleOf = (walk: Walk) => RouteSample | Promise<RouteSample>;

/**
 * The `sample` option of a route. The guard's plugin (ctx.auth) brings it along; a route file
 * without the guard uses this.
 */
export const routeSamples = new Elysia({ name: "route-sample" }).macro({
  // Kept on the route's hooks as declared (Elysia keeps what a macro returns that is no hook of its own).
  sample: (sample: SampleOf) => ({ declaredSample: sample }) as object,
});

/** The sample a registered route declares (its `hooks`), if any. */
export const declaredSample = (hooks: unknown): SampleOf | undefined => (hooks as { declaredSample?: SampleOf }).declaredSample;
