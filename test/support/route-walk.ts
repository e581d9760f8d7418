/**
 * One real request per route the app registers, with a real ADMIN token and real data behind it
 * (a registered account with a password and a salary, a product, an order, a file, a backup):
 * the walk over the whole surface that no-private-fields and cache-control share. Each route
 * declares its request next to its access (`sample`, src/http/route-sample.ts); the data they
 * read (`Walk`) is made here. A route without a sample fails every walk, by name.
 */
import { expect } from "bun:test";
import { remote } from "../legs";
import { validRegistration, type TestApp } from "../helpers";
import { declaredSample, type RouteSample, type Walk } from "../../src/http/route-sample";
import { SoftwareAuthenticator } from "./software-authenticator";
import { totpAt } from "./totp";

export type Sample = RouteSample;

export interface Walked {
  route: string;
  sample: Sample;
  /** The request as sent (its body already read). */
  request: Request;
  response: Response;
  /** The answer's text, read whole. */
  text: string;
}

/**
 * Makes the walk's data in `t` (call once per app: the samples delete, revoke and pay), then
 * `walk()` sends every sample, checks its status (the right status proves the answer is the real
 * one, not a 401 or 400 that shows nothing) and hands each answer to `visit`.
 */
export async function prepareRouteWalk(t: TestApp) {
  if (!t.config.publicUrl) throw new Error("the route walk registers passkeys: make its app with PUBLIC_URL");
  const admin = await t.createUser({ roles: ["USER", "ADMIN"], password: "Admin-Passw0rd!" });
  /** Their tokens are revoked by the logout and change-password samples, so no other sample uses them. */
  const leaving = await t.createUser({ password: "Passw0rd!" });
  const changing = await t.createUser({ password: "Passw0rd!" });
  /** Signed in three times (the session routes list one and end the others), and once more elsewhere (revoke-others). */
  const [devices, elsewhere] = [await t.createUser({ password: "Passw0rd!" }), await t.createUser({ password: "Passw0rd!" })];
  const signIn = async (email: string) => {
    const token = (await t.request("POST", "/api/auth/login", { body: { email, password: "Passw0rd!" } })).body.data.token as string;
    return { token, sid: JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString()).sid as string };
  };
  const [device, ended, endedByAdmin, another] = [await signIn(devices.email), await signIn(devices.email), await signIn(devices.email), await signIn(elsewhere.email)];
  const registration = validRegistration("mei.lin@example.com");
  const signUp = await t.request("POST", "/api/auth/register", { body: registration });
  expect(signUp.status).toBe(201);
  const registered = { id: signUp.body.data.id as number, email: registration.email };
  const product = await t.request("POST", "/api/products", { token: admin.token, body: { name: "Walk Item", code: "WALK-1", price: 10, stock: 5 } });
  const productId = product.body.id as number;
  const order = await t.request("POST", "/api/orders", { token: admin.token, body: { items: [{ productId, quantity: 1 }] } });
  const orderId = order.body.id as number;
  const form = new FormData();
  form.append("file", new File(["walk"], "walk.txt", { type: "text/plain" }));
  const file = (await t.request<{ id: number; fileName: string }>("POST", "/api/files/upload", { token: admin.token, raw: form })).body;
  const doomedUserId = (await t.request("POST", "/api/users", { token: admin.token, body: { name: "Doomed User", email: "doomed@example.com" } })).body.id as number;
  // Creating a key needs a recent sign-in: the ADMIN signs in for it (the sample then revokes one key of their own and one of another user).
  const adminSignedIn = (await t.request("POST", "/api/auth/login", { body: { email: admin.email, password: "Admin-Passw0rd!" } })).body.data.token as string;
  const newKey = async (token: string) => (await t.request("POST", "/api/account/api-keys", { token, body: { name: "walk", scopes: ["users:read"] } })).body.id as number;
  const [ownKeyId, devicesKeyId] = [await newKey(adminSignedIn), await newKey(device.token)];
  // A remote database is backed up by its server: there is no archive to download there (an
  // embedded replica backs up its copy).
  const backup = remote ? undefined : ((await t.request("POST", "/api/admin/backups", { token: admin.token })).body.name as string);

  const factors = await prepareSecondFactors(t, signIn);

  const data: Walk = {
    admin,
    adminSignedIn,
    registered,
    registration: validRegistration,
    productId,
    orderId,
    file,
    upload: uploadForm,
    doomedUserId,
    backup,
    leaving: leaving.token,
    changing: changing.token,
    sessions: { ownerId: devices.id, device: device.token, endedSid: ended.sid, endedByAdminSid: endedByAdmin.sid, another: another.token },
    apiKeys: { ownKeyId, ownersKeyId: devicesKeyId },
    mfa: factors,
    send: async (method, path, options = {}) => {
      const res = await t.request(method, path, { token: "token" in options ? options.token : admin.token, body: options.body });
      return { status: res.status, body: res.body };
    },
  };

  /** Each registered route's sample, as "METHOD /template", made in the order the app registers them. */
  const samples: Record<string, Sample> = {};
  for (const r of t.app.routes) {
    const sample = declaredSample(r.hooks);
    if (sample) samples[`${r.method} ${r.path}`] = await sample(data);
  }

  async function walk(visit: (walked: Walked) => void | Promise<void>): Promise<string[]> {
    const routes = t.app.routes.map((r) => `${r.method} ${r.path}`);
    expect(routes.filter((route) => !(route in samples))).toEqual([]); // a new route declares its `sample` beside its `access`
    for (const route of routes) {
      const sample = samples[route];
      const method = route.slice(0, route.indexOf(" "));
      const headers: Record<string, string> = {};
      const token = "token" in sample ? sample.token : admin.token;
      if (token) headers.authorization = `Bearer ${token}`;
      let body: RequestInit["body"] = sample.raw;
      if (sample.body !== undefined) {
        body = JSON.stringify(typeof sample.body === "function" ? sample.body() : sample.body);
        headers["content-type"] = "application/json";
      }
      const request = new Request(`http://localhost${sample.path}`, { method, headers, body });
      const response = await t.app.handle(request);
      const text = await response.text();
      expect({ route, status: response.status }).toEqual({ route, status: sample.status });
      await visit({ route, sample, request, response, text });
    }
    return routes;
  }

  return { admin, registered, samples, walk };
}

/**
 * Second factors for the walk (the app needs PUBLIC_URL for passkeys): a user with TOTP and its
 * recovery codes, pending sign-ins of it (by recovery code and passkey), passkeys registered and
 * ceremonies begun, each sample's own so none spends another's.
 */
async function prepareSecondFactors(t: TestApp, signIn: (email: string) => Promise<{ token: string }>): Promise<Walk["mfa"]> {
  const rp = new URL(t.config.publicUrl!);
  const device = new SoftwareAuthenticator(rp.hostname, rp.origin);
  const user = async () => {
    const created = await t.createUser({ password: "Passw0rd!" });
    return { ...created, token: (await signIn(created.email)).token };
  };
  const withTotp = async () => {
    const holder = await user();
    const { secret } = (await t.request("POST", "/api/account/mfa/totp", { token: holder.token })).body;
    const confirmed = await t.request("POST", "/api/account/mfa/totp/confirm", { token: holder.token, body: { code: totpAt(secret, Date.now()) } });
    expect(confirmed.status).toBe(200);
    return { ...holder, secret: secret as string, recoveryCodes: confirmed.body.recoveryCodes as string[] };
  };
  const withPasskey = async (holder: { token: string }) => {
    const options = (await t.request("POST", "/api/account/passkeys/options", { token: holder.token })).body;
    return (await t.request("POST", "/api/account/passkeys", { token: holder.token, body: { name: "Walk key", response: device.register(options) } })).body.id as string;
  };
  const [enrolling, confirming, totp, removing, keyed] = [await user(), await user(), await withTotp(), await withTotp(), await user()];
  const pendingSecret = (await t.request("POST", "/api/account/mfa/totp", { token: confirming.token })).body.secret as string;
  const renamed = await withPasskey(keyed);
  const removed = await withPasskey(keyed);
  const registration = (await t.request("POST", "/api/account/passkeys/options", { token: keyed.token })).body;
  const mfaToken = (await t.request("POST", "/api/auth/login", { body: { email: totp.email, password: "Passw0rd!" } })).body.data.mfaToken as string;
  const passwordless = (await t.request("POST", "/api/auth/passkey/options")).body.data;
  return {
    totp: { id: totp.id, email: totp.email, token: totp.token, mfaToken, recoveryCode: totp.recoveryCodes[0] },
    enrolling: enrolling.token,
    // The code is computed when sent: the walk takes longer than a step.
    confirming: { token: confirming.token, code: () => totpAt(pendingSecret, Date.now()) },
    removing: { id: removing.id, email: removing.email, token: removing.token },
    keyed: { token: keyed.token, renamed, removed, registration: device.register(registration) },
    passkeyAssertion: device.assert(passwordless, { credential: device.credentials[0] }),
  };
}

function uploadForm() {
  const form = new FormData();
  form.append("file", new File(["walk again"], "again.txt", { type: "text/plain" }));
  return form;
}
