/**
 * One real request per route the app registers, with a real ADMIN token and real data behind it
 * (a registered account with a password and a salary, a product, an order, a file, a backup):
 * the walk over the whole surface that no-private-fields and cache-control share. A route added
 * without a sample here fails every walk.
 */
import { expect } from "bun:test";
import { remote } from "../legs";
import { validRegistration, type TestApp } from "../helpers";
import { SoftwareAuthenticator } from "./software-authenticator";
import { totpAt } from "./totp";

export interface Sample {
  path: string;
  /** A function: the body made when it is sent. */
  body?: unknown;
  /** Sent as-is (multipart) instead of JSON. */
  raw?: FormData;
  token?: string;
  status: number;
  /** Why this answer holds private data by design: the private-fields walk sends it but does not read it. */
  holdsPrivateData?: string;
}

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
  const doomedId = (await t.request("POST", "/api/users", { token: admin.token, body: { name: "Doomed User", email: "doomed@example.com" } })).body.id as number;
  // Creating a key needs a recent sign-in: the ADMIN signs in for it (the sample then revokes one key of their own and one of another user).
  const adminSignedIn = (await t.request("POST", "/api/auth/login", { body: { email: admin.email, password: "Admin-Passw0rd!" } })).body.data.token as string;
  const newKey = async (token: string) => (await t.request("POST", "/api/account/api-keys", { token, body: { name: "walk", scopes: ["users:read"] } })).body.id as number;
  const [ownKeyId, devicesKeyId] = [await newKey(adminSignedIn), await newKey(device.token)];
  // A remote database is backed up by its server: there is no archive to download there (an
  // embedded replica backs up its copy).
  const backup = remote ? undefined : ((await t.request("POST", "/api/admin/backups", { token: admin.token })).body.name as string);

  const factors = await prepareSecondFactors(t, signIn);

  /** One request per registered route, as "METHOD /template". */
  const samples: Record<string, Sample> = {
    "GET /actuator/health": { path: "/actuator/health", status: 200 },
    "GET /actuator/health/liveness": { path: "/actuator/health/liveness", status: 200 },
    "GET /actuator/health/readiness": { path: "/actuator/health/readiness", status: 200 },
    "GET /actuator/info": { path: "/actuator/info", status: 200 },
    "GET /actuator/prometheus": { path: "/actuator/prometheus", status: 200 },
    "GET /actuator/metrics": { path: "/actuator/metrics", status: 200 },
    "GET /actuator/metrics/:name": { path: "/actuator/metrics/http.server.requests", status: 200 },
    "GET /actuator/loggers": { path: "/actuator/loggers", status: 200 },
    "GET /actuator/loggers/:name": { path: "/actuator/loggers/http", status: 200 },
    "POST /actuator/loggers/:name": { path: "/actuator/loggers/http", body: { configuredLevel: null }, status: 204 },
    "GET /actuator/threaddump": { path: "/actuator/threaddump", status: 200 },
    "GET /actuator/heapdump": {
      path: "/actuator/heapdump",
      status: 200,
      // A snapshot of the process's memory holds every string the program knows, these names included:
      // it is the ADMIN's debugging download, not an answer about data.
      holdsPrivateData: "a heap snapshot is the process's memory",
    },
    "GET /api/version": { path: "/api/version", status: 200 },
    "POST /api/auth/register": { path: "/api/auth/register", body: validRegistration("second@example.com"), token: undefined, status: 201 },
    "GET /api/auth/validate-email": { path: `/api/auth/validate-email?email=${registered.email}`, status: 200 },
    "POST /api/auth/login": { path: "/api/auth/login", body: { email: registered.email, password: "Passw0rd!" }, token: undefined, status: 200 },
    "POST /api/auth/refresh": { path: "/api/auth/refresh", status: 200 },
    "POST /api/auth/logout": { path: "/api/auth/logout", token: leaving.token, status: 200 },
    "POST /api/auth/change-password": {
      path: "/api/auth/change-password",
      body: { currentPassword: "Passw0rd!", newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
      token: changing.token,
      status: 200,
    },
    "GET /api/search/profile": { path: "/api/search/profile", status: 200 },
    "POST /api/auth/verify-email/request": { path: "/api/auth/verify-email/request", status: 200 },
    // A token only a mail carries: the refusal is what can be read here.
    "POST /api/auth/verify-email/confirm": { path: "/api/auth/verify-email/confirm", body: { token: "a".repeat(43) }, token: undefined, status: 400 },
    "POST /api/auth/password-reset/request": { path: "/api/auth/password-reset/request", body: { email: "mei.lin@example.com" }, token: undefined, status: 200 },
    "POST /api/auth/password-reset/confirm": {
      path: "/api/auth/password-reset/confirm",
      body: { token: "a".repeat(43), newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" },
      token: undefined,
      status: 400,
    },
    "GET /account/verify-email": { path: "/account/verify-email", token: undefined, status: 200 },
    "GET /account/reset-password": { path: "/account/reset-password", token: undefined, status: 200 },
    "GET /account/assets/account.js": { path: "/account/assets/account.js", token: undefined, status: 200 },
    "GET /account/assets/account.css": { path: "/account/assets/account.css", token: undefined, status: 200 },
    "GET /api/admin/outbox": { path: "/api/admin/outbox", status: 200 },
    // A remote database is backed up by its server: the answer there is 400 BACKUP_UNSUPPORTED (a replica backs up its copy).
    "POST /api/admin/backups": { path: "/api/admin/backups", status: remote ? 400 : 201 },
    "GET /api/admin/backups": { path: "/api/admin/backups", status: 200 },
    "GET /api/admin/backups/:name": {
      path: `/api/admin/backups/${backup ?? "usersvc-20260101T000000Z.tar.gz"}`,
      status: backup ? 200 : 404,
      // A backup archive is the database itself, password hashes included, by design (docs/operations.md, "Backups and restore": archives hold secrets).
      holdsPrivateData: "a backup archive holds the database, by design",
    },
    "DELETE /api/admin/backups/:name": { path: "/api/admin/backups/usersvc-20260101T000000Z.tar.gz", status: 404 },
    "GET /": { path: "/", status: 200 },
    "GET /swagger": { path: "/swagger", status: 200 },
    "GET /swagger/json": { path: "/swagger/json", status: 200 },
    "GET /swagger/assets/swagger-ui-bundle.js": { path: "/swagger/assets/swagger-ui-bundle.js", status: 200 },
    "GET /swagger/assets/swagger-ui.css": { path: "/swagger/assets/swagger-ui.css", status: 200 },
    "GET /swagger/assets/swagger-init.js": { path: "/swagger/assets/swagger-init.js", status: 200 },
    "GET /api/users": { path: "/api/users", status: 200 },
    "GET /api/users/:id": { path: `/api/users/${registered.id}`, status: 200 },
    "POST /api/users": { path: "/api/users", body: { name: "Walk User", email: "walk@example.com", password: "Passw0rd!" }, status: 201 },
    "PUT /api/users/:id": { path: `/api/users/${registered.id}`, body: { name: "Mei Lin", email: registered.email, department: "Walkers" }, status: 200 },
    "PATCH /api/users/:id": { path: `/api/users/${registered.id}`, body: { name: "Mei Lin" }, status: 200 },
    "DELETE /api/users/:id": { path: `/api/users/${doomedId}`, status: 204 },
    "GET /api/products": { path: "/api/products", status: 200 },
    "GET /api/products/:id": { path: `/api/products/${productId}`, status: 200 },
    "POST /api/products": { path: "/api/products", body: { name: "Walk Item 2", code: "WALK-2", price: 3, stock: 1 }, status: 201 },
    "PUT /api/products/:id": { path: `/api/products/${productId}`, body: { name: "Walk Item", code: "WALK-1", price: 11, stock: 5 }, status: 200 },
    "POST /api/orders": { path: "/api/orders", body: { userId: registered.id, items: [{ productId, quantity: 1 }] }, status: 201 },
    "GET /api/orders": { path: "/api/orders", status: 200 },
    "GET /api/orders/:id": { path: `/api/orders/${orderId}`, status: 200 },
    "POST /api/orders/:id/pay": { path: `/api/orders/${orderId}/pay`, body: { method: "CARD", cardNumber: "4111111111111111" }, status: 200 },
    "GET /api/audit": { path: "/api/audit", status: 200 },
    "POST /api/files/upload": { path: "/api/files/upload", raw: uploadForm(), status: 201 },
    "GET /api/files/download/:fileName": { path: `/api/files/download/${file.fileName}`, status: 200 },
    "GET /api/files/info/:id": { path: `/api/files/info/${file.id}`, status: 200 },
    "GET /api/search/users": { path: "/api/search/users?name=Mei", status: 200 },
    "GET /api/search/users/department/:dept/role/:role": { path: "/api/search/users/department/Walkers/role/USER", status: 200 },
    "GET /api/search/by-skills": { path: "/api/search/by-skills?skills=SQL", status: 200 },
    "GET /api/departments": { path: "/api/departments", status: 200 },
    "POST /api/departments": { path: "/api/departments", body: { name: "Walk Department" }, status: 201 },
    "GET /api/roles": { path: "/api/roles", status: 200 },
    "PUT /api/users/:id/roles": { path: `/api/users/${registered.id}/roles`, body: { roles: ["USER"] }, status: 200 },
    "GET /api/users/:id/profile": { path: `/api/users/${registered.id}/profile`, status: 200 },
    "PUT /api/users/:id/profile": { path: `/api/users/${registered.id}/profile`, body: { bio: "walks", birthDate: "1990-01-01" }, status: 200 },
    "POST /api/users/deactivate-inactive": { path: "/api/users/deactivate-inactive?before=2000-01-01", status: 200 },
    "POST /api/users/:id/activate": { path: `/api/users/${registered.id}/activate`, status: 200 },
    "POST /api/users/:id/deactivate": { path: `/api/users/${registered.id}/deactivate`, status: 200 },
    "GET /api/account/sessions": { path: "/api/account/sessions", token: device.token, status: 200 },
    "POST /api/account/sessions/revoke-others": { path: "/api/account/sessions/revoke-others", token: another.token, status: 204 },
    "DELETE /api/account/sessions/:id": { path: `/api/account/sessions/${ended.sid}`, token: device.token, status: 204 },
    "GET /api/users/:id/sessions": { path: `/api/users/${devices.id}/sessions`, status: 200 },
    "DELETE /api/users/:id/sessions/:sid": { path: `/api/users/${devices.id}/sessions/${endedByAdmin.sid}`, status: 204 },
    "POST /api/users/:id/revoke-tokens": { path: `/api/users/${registered.id}/revoke-tokens`, status: 204 },
    "POST /api/users/:id/unlock": { path: `/api/users/${registered.id}/unlock`, status: 204 },
    "GET /api/files": { path: "/api/files", status: 200 },
    "POST /api/account/api-keys": { path: "/api/account/api-keys", body: { name: "walk key", scopes: ["users:read"] }, token: adminSignedIn, status: 201 },
    "GET /api/account/api-keys": { path: "/api/account/api-keys", status: 200 },
    "DELETE /api/account/api-keys/:id": { path: `/api/account/api-keys/${ownKeyId}`, status: 204 },
    "GET /api/users/:id/api-keys": { path: `/api/users/${devices.id}/api-keys`, status: 200 },
    "DELETE /api/users/:id/api-keys/:keyId": { path: `/api/users/${devices.id}/api-keys/${devicesKeyId}`, status: 204 },
    ...factors.samples,
    "GET /admin": { path: "/admin", token: undefined, status: 200 },
    "GET /admin/assets/:name": { path: "/admin/assets/app.js", token: undefined, status: 200 },
    "GET /.well-known/jwks.json": { path: "/.well-known/jwks.json", token: undefined, status: 200 },
    "GET /api/account/setup": { path: "/api/account/setup", token: undefined, status: 200 },
    // An ADMIN exists here, so every setup token is void: the refusal is what can be read.
    "POST /api/account/setup": {
      path: "/api/account/setup",
      body: { token: "a".repeat(43), name: "Too Late", email: "late@example.com", password: "Passw0rd!" },
      token: undefined,
      status: 400,
    },
    // Here too: the page says setup is complete (410).
    "GET /account/setup": { path: "/account/setup", token: undefined, status: 410 },
    "GET /account": { path: "/account", token: undefined, status: 200 },
    "GET /account/security": { path: "/account/security", token: undefined, status: 200 },
    // No provider is configured here: the flow's routes refuse or send the browser back (test/federation.test.ts walks them).
    "GET /api/auth/oidc/providers": { path: "/api/auth/oidc/providers", token: undefined, status: 200 },
    "GET /api/auth/oidc/:provider/start": { path: `/api/auth/oidc/corp/start?returnTo=%2Faccount&codeChallenge=${"c".repeat(43)}`, token: undefined, status: 404 },
    "GET /api/auth/oidc/:provider/callback": { path: "/api/auth/oidc/corp/callback?state=unknown", token: undefined, status: 302 },
    "POST /api/auth/oidc/exchange": { path: "/api/auth/oidc/exchange", token: undefined, body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 },
    "GET /api/account/identities": { path: "/api/account/identities", status: 200 },
    "POST /api/account/identities/:provider/start": {
      path: "/api/account/identities/corp/start",
      body: { returnTo: "/account/security", codeChallenge: "c".repeat(43), stepUpToken: "not-one" },
      status: 404,
    },
    "POST /api/account/step-up/:provider/start": {
      path: "/api/account/step-up/corp/start",
      body: { returnTo: "/account/security", codeChallenge: "c".repeat(43) },
      status: 404,
    },
    "POST /api/account/step-up/exchange": { path: "/api/account/step-up/exchange", body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 },
    "POST /api/account/identities/link": { path: "/api/account/identities/link", body: { code: "c".repeat(43), codeVerifier: "v".repeat(43) }, status: 401 },
    "DELETE /api/account/identities/:id": { path: "/api/account/identities/999999", status: 404 },
    "GET /api/users/:id/identities": { path: `/api/users/${admin.id}/identities`, status: 200 },
    "GET /account/assets/:name": {
      path: "/account/assets/app.js",
      token: undefined,
      status: 200,
      holdsPrivateData: "the page's script names WebAuthn's publicKey option: code, not a stored key",
    },
  };

  async function walk(visit: (walked: Walked) => void | Promise<void>): Promise<string[]> {
    const routes = t.app.routes.map((r) => `${r.method} ${r.path}`);
    expect(routes.filter((route) => !(route in samples))).toEqual([]); // a new route needs a sample above
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
async function prepareSecondFactors(t: TestApp, signIn: (email: string) => Promise<{ token: string }>) {
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
  const samples: Record<string, Sample> = {
    "GET /api/account/mfa": { path: "/api/account/mfa", token: totp.token, status: 200 },
    "POST /api/account/mfa/totp": { path: "/api/account/mfa/totp", token: enrolling.token, status: 200 },
    // The code is computed when sent: the walk takes longer than a step.
    "POST /api/account/mfa/totp/confirm": {
      path: "/api/account/mfa/totp/confirm",
      token: confirming.token,
      body: () => ({ code: totpAt(pendingSecret, Date.now()) }),
      status: 200,
    },
    // Without MFA_REQUIRED_ROLES no account needs an enrolment code: the route's own 409 (test/mfa.test.ts mails one).
    "POST /api/account/mfa/enrol-code": { path: "/api/account/mfa/enrol-code", token: enrolling.token, status: 409 },
    "DELETE /api/account/mfa/totp": { path: "/api/account/mfa/totp", token: removing.token, body: { password: "Passw0rd!" }, status: 204 },
    "POST /api/account/mfa/recovery-codes": { path: "/api/account/mfa/recovery-codes", token: totp.token, body: { password: "Passw0rd!" }, status: 200 },
    "POST /api/account/passkeys/options": { path: "/api/account/passkeys/options", token: keyed.token, status: 200 },
    "POST /api/account/passkeys": { path: "/api/account/passkeys", token: keyed.token, body: { name: "Walk key 3", response: device.register(registration) }, status: 201 },
    "GET /api/account/passkeys": { path: "/api/account/passkeys", token: keyed.token, status: 200 },
    "PATCH /api/account/passkeys/:id": { path: `/api/account/passkeys/${renamed}`, token: keyed.token, body: { name: "Renamed" }, status: 200 },
    "DELETE /api/account/passkeys/:id": { path: `/api/account/passkeys/${removed}`, token: keyed.token, body: { password: "Passw0rd!" }, status: 204 },
    "POST /api/account/step-up/passkey-options": { path: "/api/account/step-up/passkey-options", token: enrolling.token, status: 200 },
    "POST /api/account/step-up": { path: "/api/account/step-up", token: enrolling.token, body: { password: "Passw0rd!" }, status: 200 },
    "GET /api/users/:id/mfa": { path: `/api/users/${totp.id}/mfa`, status: 200 },
    "DELETE /api/users/:id/mfa": { path: `/api/users/${removing.id}/mfa`, status: 204 },
    "POST /api/auth/login/mfa": { path: "/api/auth/login/mfa", token: undefined, body: { mfaToken, code: totp.recoveryCodes[0] }, status: 200 },
    "POST /api/auth/passkey/options": { path: "/api/auth/passkey/options", token: undefined, status: 200 },
    "POST /api/auth/passkey": { path: "/api/auth/passkey", token: undefined, body: { response: device.assert(passwordless, { credential: device.credentials[0] }) }, status: 200 },
  };
  return { samples };
}

function uploadForm() {
  const form = new FormData();
  form.append("file", new File(["walk again"], "again.txt", { type: "text/plain" }));
  return form;
}
