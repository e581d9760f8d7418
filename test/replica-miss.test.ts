/**
 * Two embedded replicas of one sqld behind a round-robin balancer (docs/edge.md): a miss on one
 * edge's copy is read again at the primary before it answers 401 or 404, so a client can register
 * at one edge and sign in at the next at once, or sign in at one and use the token at the next.
 * The edges pull only once an hour here: whatever the second edge knows, it learnt on the miss.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { decodeJwt } from "jose";
import { outbox } from "../src/db/schema";
import { resolvePasswordResets } from "../src/store/account-tokens";
import { replicaEdge, type TestApp, uniqueEmail, validRegistration } from "./helpers";
import { startSqld, type Sqld } from "./support/sqld";
import { totpAt } from "./support/totp";

let primary: Sqld;
let first: TestApp;
let second: TestApp;

const SHARED_KEY = Buffer.alloc(32, 7).toString("base64");
const edge = () =>
  replicaEdge(primary, {
    DATABASE_SYNC_INTERVAL: "1h",
    DATABASE_MAX_STALENESS: "2h",
    // The same on every edge (docs/edge.md): an mfaToken sealed at one is opened at the next.
    DATA_ENCRYPTION_KEY: SHARED_KEY,
    // The provider, for its codes and refresh tokens across edges.
    OAUTH_SERVER: "on",
    PUBLIC_URL: "http://localhost",
  });

beforeAll(async () => {
  primary = await startSqld();
  first = await edge();
  second = await edge();
});
afterAll(async () => {
  first?.close();
  second?.close();
  await primary?.stop();
});

const credentials = (email: string) => ({ email, password: "Passw0rd!" });

test("registered at one edge, signed in at the next at once; that token used at the first at once", async () => {
  const email = uniqueEmail("edge");
  const registered = await first.request("POST", "/api/auth/register", { body: validRegistration(email) });
  expect(registered.status).toBe(201);
  const login = await second.request("POST", "/api/auth/login", { body: credentials(email) });
  expect(login.status).toBe(200);
  const token = login.body.data.token as string;
  const me = await first.request("GET", `/api/users/${registered.body.data.id}`, { token });
  expect({ status: me.status, email: me.body.email }).toEqual({ status: 200, email });
});

test("a token of a new session, a user made at one edge and an API key made there are known at the other at once", async () => {
  const admin = await first.createUser({ roles: ["USER", "ADMIN"], password: "Admin-Passw0rd!" });
  // Signed in just now at the first edge: an API key needs a recent sign-in.
  const adminToken = (await first.request("POST", "/api/auth/login", { body: { email: admin.email, password: "Admin-Passw0rd!" } })).body.data.token as string;
  const email = uniqueEmail("edge");
  const created = await first.request("POST", "/api/users", { token: adminToken, body: { name: "Edge Made", email } });
  expect(created.status).toBe(201);
  expect((await second.request("GET", `/api/users/${created.body.id}`, { token: adminToken })).status).toBe(200);

  const key = await first.request("POST", "/api/account/api-keys", { token: adminToken, body: { name: "edge key", scopes: ["users:read"] } });
  expect(key.status).toBe(201);
  expect((await second.request("GET", `/api/users/${created.body.id}`, { token: key.body.key })).status).toBe(200);
});

test("a real miss is still a miss: 401 for an unknown key, 404 for an unknown user", async () => {
  const { token } = await second.admin();
  expect((await second.request("GET", "/api/users/999999", { token })).status).toBe(404);
  expect((await second.request("GET", "/api/users/1", { token: "usk_nosuchk1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" })).status).toBe(401);
  expect((await second.request("POST", "/api/auth/login", { body: credentials(uniqueEmail("nobody")) })).status).toBe(401);
});

/** The edge's copy brought up to the primary now (not waiting for the hourly pull). */
const pulled = (edge: TestApp) => edge.database.pull!();

/** A user made at `edge`, signed in there: its id, e-mail, access and refresh tokens. */
async function signedIn(edge: TestApp) {
  const user = await edge.createUser({ password: "Passw0rd!" });
  const login = await edge.request("POST", "/api/auth/login", { body: credentials(user.email) });
  expect(login.status).toBe(200);
  return { id: user.id as number, email: user.email, token: login.body.data.token as string, refreshToken: login.body.data.refreshToken as string };
}

/** The raw token of the latest mail of `kind` to `email`, from the outbox row (no sender runs here: a reset's token is issued as the sender would). */
async function mailedToken(edge: TestApp, email: string, kind: string) {
  if (kind === "PASSWORD_RESET") await resolvePasswordResets(edge.database, 10, Date.now);
  const rows = await edge.db.select().from(outbox).where(eq(outbox.recipient, email));
  const row = rows.filter((r) => r.kind === kind).at(-1);
  expect(row?.token).toBeString();
  return row!.token!;
}

test("a handler's own read of something made at the other edge a moment ago: the caller's profile, a product, an order, a user's sessions", async () => {
  const { token: adminToken } = await first.admin();
  const user = await signedIn(first);
  // The caller's own user, read by the handler (the guard read the session at the primary).
  const profile = await second.request("GET", "/api/search/profile", { token: user.token });
  expect({ status: profile.status, email: profile.body.email }).toEqual({ status: 200, email: user.email });
  const product = await first.request("POST", "/api/products", {
    token: adminToken,
    body: { name: "Edge item", code: `E-${crypto.randomUUID().slice(0, 8)}`, price: 2.5, stock: 9 },
  });
  expect(product.status).toBe(201);
  expect((await second.request("GET", `/api/products/${product.body.id}`, { token: user.token })).status).toBe(200);
  const order = await first.request("POST", "/api/orders", { token: user.token, body: { items: [{ productId: product.body.id, quantity: 1 }] } });
  expect(order.status).toBe(201);
  expect((await second.request("GET", `/api/orders/${order.body.id}`, { token: user.token })).status).toBe(200);
  expect((await second.request("GET", `/api/users/${user.id}/sessions`, { token: adminToken })).status).toBe(200);
  // An address taken at the other edge is not free here.
  expect((await second.request("GET", `/api/auth/validate-email?email=${user.email}`)).body.data).toBe(false);
});

test("an order at one edge of a product made at the other a moment ago, by a buyer who registered there", async () => {
  const { token: adminToken } = await first.admin();
  const product = await first.request("POST", "/api/products", {
    token: adminToken,
    body: { name: "Fresh item", code: `F-${crypto.randomUUID().slice(0, 8)}`, price: 4, stock: 3 },
  });
  expect(product.status).toBe(201);
  const buyer = await signedIn(first);
  const order = await second.request("POST", "/api/orders", { token: buyer.token, body: { items: [{ productId: product.body.id, quantity: 2 }] } });
  expect({ status: order.status, total: order.body.totalAmount }).toEqual({ status: 201, total: 8 });
});

describe("stock moved at one edge, ordered at the next before its copy shows it", () => {
  /** A product of `stock` made at the first edge, which the second edge's copy then holds (and everything made before it). */
  async function productBothHold(adminToken: string, stock: number) {
    const code = `S-${crypto.randomUUID().slice(0, 8)}`;
    const body = { name: "Scarce item", code, price: 3, stock };
    const product = await first.request("POST", "/api/products", { token: adminToken, body });
    expect(product.status).toBe(201);
    await pulled(second);
    return { id: product.body.id as number, body };
  }

  test("the last unit, sold at one edge: the next answers 400 INSUFFICIENT_INVENTORY, judged at the primary", async () => {
    const { token: adminToken } = await first.admin();
    const buyer = await signedIn(first);
    const product = await productBothHold(adminToken, 1);
    const items = [{ productId: product.id, quantity: 1 }];
    expect((await first.request("POST", "/api/orders", { token: buyer.token, body: { items } })).status).toBe(201);
    const again = await second.request("POST", "/api/orders", { token: buyer.token, body: { items } });
    expect({ status: again.status, errorCode: again.body.errorCode, message: again.body.message }).toEqual({
      status: 400,
      errorCode: "INSUFFICIENT_INVENTORY",
      message: `Insufficient inventory for product ${product.id}: requested 1, available 0`,
    });
  });

  test("restocked at one edge: the next sells it at once", async () => {
    const { token: adminToken } = await first.admin();
    const buyer = await signedIn(first);
    const product = await productBothHold(adminToken, 0);
    expect((await first.request("PUT", `/api/products/${product.id}`, { token: adminToken, body: { ...product.body, stock: 3 } })).status).toBe(200);
    const order = await second.request("POST", "/api/orders", { token: buyer.token, body: { items: [{ productId: product.id, quantity: 2 }] } });
    expect({ status: order.status, total: order.body.totalAmount }).toEqual({ status: 201, total: 6 });
  });
});

test("a refresh token issued at one edge is exchanged at the next at once", async () => {
  const user = await signedIn(first);
  const refreshed = await second.request("POST", "/api/auth/refresh", { body: { refreshToken: user.refreshToken } });
  expect(refreshed.status).toBe(200);
  expect((await first.request("POST", "/api/auth/refresh", { body: { refreshToken: refreshed.body.data.refreshToken } })).status).toBe(200);
});

test("a refresh token rotated at one edge, then replayed at the next once its grace is spent, is taken for stolen: its session ends", async () => {
  const user = await signedIn(first);
  await pulled(second); // the second edge's copy knows the token, not yet its rotation
  const rotated = await first.request("POST", "/api/auth/refresh", { body: { refreshToken: user.refreshToken } });
  expect(rotated.status).toBe(200);
  // An answer lost on the way: accepted once more within the grace, with a sibling.
  expect((await first.request("POST", "/api/auth/refresh", { body: { refreshToken: user.refreshToken } })).status).toBe(200);
  const replayed = await second.request("POST", "/api/auth/refresh", { body: { refreshToken: user.refreshToken } });
  expect(replayed.status).toBe(401);
  // Reuse detected: the whole session is over, its successor too.
  expect((await first.request("POST", "/api/auth/refresh", { body: { refreshToken: rotated.body.data.refreshToken } })).status).toBe(401);
});

describe("an mfaToken", () => {
  async function withSecondFactor() {
    const user = await signedIn(first);
    const started = await first.request("POST", "/api/account/mfa/totp", { token: user.token });
    expect(started.status).toBe(200);
    const confirmed = await first.request("POST", "/api/account/mfa/totp/confirm", { token: user.token, body: { code: totpAt(started.body.secret, Date.now()) } });
    expect(confirmed.status).toBe(200);
    return { ...user, recoveryCodes: confirmed.body.recoveryCodes as string[] };
  }
  const firstStep = async (edge: TestApp, email: string) => {
    const res = await edge.request("POST", "/api/auth/login", { body: credentials(email) });
    expect(res.body.data?.mfaRequired).toBe(true);
    return res.body.data.mfaToken as string;
  };

  test("issued at one edge is completed at the next at once", async () => {
    const user = await withSecondFactor();
    const mfaToken = await firstStep(first, user.email);
    const done = await second.request("POST", "/api/auth/login/mfa", { body: { mfaToken, code: user.recoveryCodes[0] } });
    expect(done.status).toBe(200);
    expect(decodeJwt(done.body.data.token).sub).toBe(user.email);
  });

  test("used at one edge is refused at the next at once", async () => {
    const user = await withSecondFactor();
    await pulled(second);
    const mfaToken = await firstStep(first, user.email);
    expect((await first.request("POST", "/api/auth/login/mfa", { body: { mfaToken, code: user.recoveryCodes[0] } })).status).toBe(200);
    const again = await second.request("POST", "/api/auth/login/mfa", { body: { mfaToken, code: user.recoveryCodes[1] } });
    expect([again.status, again.body.errorCode]).toEqual([401, "INVALID_MFA_CODE"]);
  });
});

describe("mailed links", () => {
  const newPassword = { newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" };

  test("a reset link mailed by one edge works at the next at once, and once", async () => {
    const user = await signedIn(first);
    expect((await first.request("POST", "/api/auth/password-reset/request", { body: { email: user.email } })).status).toBe(200);
    const token = await mailedToken(first, user.email, "PASSWORD_RESET");
    expect((await second.request("POST", "/api/auth/password-reset/confirm", { body: { token, ...newPassword } })).status).toBe(200);
    const again = await first.request("POST", "/api/auth/password-reset/confirm", { body: { token, ...newPassword } });
    expect(again.status).toBe(400);
  });

  test("a reset link used at one edge is refused at the next at once", async () => {
    const user = await signedIn(first);
    expect((await first.request("POST", "/api/auth/password-reset/request", { body: { email: user.email } })).status).toBe(200);
    const token = await mailedToken(first, user.email, "PASSWORD_RESET");
    await pulled(second);
    expect((await first.request("POST", "/api/auth/password-reset/confirm", { body: { token, ...newPassword } })).status).toBe(200);
    const again = await second.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "0therPassw0rd!", confirmNewPassword: "0therPassw0rd!" } });
    expect(again.status).toBe(400);
    expect((await first.request("POST", "/api/auth/login", { body: { email: user.email, password: "N3wPassw0rd!" } })).status).toBe(200);
  });

  test("a verification link mailed at one edge works at the next at once; used, it is refused at the first", async () => {
    const email = uniqueEmail("verify");
    expect((await first.request("POST", "/api/auth/register", { body: validRegistration(email) })).status).toBe(201);
    const token = await mailedToken(first, email, "VERIFY_EMAIL");
    expect((await second.request("POST", "/api/auth/verify-email/confirm", { body: { token } })).status).toBe(200);
    expect((await first.request("POST", "/api/auth/verify-email/confirm", { body: { token } })).status).toBe(400);
  });
});

test("failed sign-ins split across two edges add up: the e-mail is throttled at both", async () => {
  const user = await signedIn(first);
  const wrong = { email: user.email, password: "Wr0ng-Passw0rd!" };
  // LOGIN_MAX_FAILURES (5) from one network: three at the first edge, two at the second.
  for (const edge of [first, first, first, second, second]) expect((await edge.request("POST", "/api/auth/login", { body: wrong })).status).toBe(401);
  const refused = await first.request("POST", "/api/auth/login", { body: credentials(user.email) });
  expect([refused.status, refused.body.errorCode]).toEqual([429, "TOO_MANY_REQUESTS"]);
});

test("an edge whose copy has not pulled another edge's failures refuses the right password once the primary's count is at the limit", async () => {
  const user = await signedIn(first);
  const wrong = { email: user.email, password: "Wr0ng-Passw0rd!" };
  // Every failure at the second edge: the first's copy, pulled when it signed the user in, knows of none.
  for (let i = 0; i < 5; i++) expect((await second.request("POST", "/api/auth/login", { body: wrong })).status).toBe(401);
  const refused = await first.request("POST", "/api/auth/login", { body: credentials(user.email) });
  expect([refused.status, refused.body.errorCode, Number(refused.headers.get("retry-after")) > 0]).toEqual([429, "TOO_MANY_REQUESTS", true]);
  const guessed = await first.request("POST", "/api/auth/login", { body: wrong });
  expect([guessed.status, guessed.body.errorCode]).toEqual([429, "TOO_MANY_REQUESTS"]);
});

test("a sign-in unlocked at one edge gets in at the next at once, though that edge's copy still holds the failures", async () => {
  const user = await signedIn(first);
  const { token: adminToken } = await second.admin();
  const wrong = { email: user.email, password: "Wr0ng-Passw0rd!" };
  // The failures at the first edge, whose copy pulls each; the unlock at the second, which the first has not pulled.
  for (let i = 0; i < 5; i++) expect((await first.request("POST", "/api/auth/login", { body: wrong })).status).toBe(401);
  expect((await second.request("POST", `/api/users/${user.id}/unlock`, { token: adminToken })).status).toBe(204);
  expect((await first.request("POST", "/api/auth/login", { body: credentials(user.email) })).status).toBe(200);
});

test("a password changed at one edge is the password at the next at once: the old one is refused there", async () => {
  const user = await signedIn(first);
  const change = { currentPassword: "Passw0rd!", newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" };
  expect((await second.request("POST", "/api/auth/change-password", { token: user.token, body: change })).status).toBe(200);
  const old = await first.request("POST", "/api/auth/login", { body: credentials(user.email) });
  expect([old.status, old.body.errorCode]).toEqual([401, "INVALID_CREDENTIALS"]);
  expect((await first.request("POST", "/api/auth/login", { body: { email: user.email, password: "N3wPassw0rd!" } })).status).toBe(200);
});

describe("the provider's authorization codes and refresh tokens", () => {
  const REDIRECT = "https://app.example.test/callback";
  const verifier = "v".repeat(43);

  /** A client made at the first edge, and a code it issued there for a user signed in there (consented there). */
  async function codeAtFirst() {
    const { token: adminToken } = await first.admin();
    const client = await first.request("POST", "/api/oauth/clients", { token: adminToken, body: { name: "Edge app", redirectUris: [REDIRECT], scopes: ["offline_access"] } });
    expect(client.status).toBe(201);
    const user = await signedIn(first);
    const session = await first.app.handle(new Request("http://localhost/oauth2/session", { method: "POST", headers: { authorization: `Bearer ${user.token}` } }));
    const cookie = session.headers.get("set-cookie")!.split(";")[0];
    const challenge = new Bun.CryptoHasher("sha256").update(verifier).digest("base64url");
    const query = new URLSearchParams({
      client_id: client.body.clientId,
      redirect_uri: REDIRECT,
      response_type: "code",
      scope: "openid offline_access",
      code_challenge: challenge,
      code_challenge_method: "S256",
      state: "s",
    });
    const consented = await first.app.handle(
      new Request("http://localhost/oauth2/interaction", {
        method: "POST",
        headers: { cookie, "content-type": "application/json" },
        body: JSON.stringify({ query: query.toString(), consent: true }),
      }),
    );
    expect(consented.status).toBe(200);
    const code = new URL(((await consented.json()) as { redirectTo: string }).redirectTo).searchParams.get("code")!;
    return { client: client.body as { clientId: string; clientSecret: string }, code };
  }
  const tokenAt = (edge: TestApp, client: { clientId: string; clientSecret: string }, form: Record<string, string>) =>
    edge.app.handle(
      new Request("http://localhost/oauth2/token", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${btoa(`${client.clientId}:${client.clientSecret}`)}` },
        body: new URLSearchParams(form),
      }),
    );
  const redeem = (edge: TestApp, client: { clientId: string; clientSecret: string }, code: string) =>
    tokenAt(edge, client, { grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier });

  test("a code issued at one edge is redeemed at the next at once, and its refresh token rotated at the first", async () => {
    const { client, code } = await codeAtFirst();
    const redeemed = await redeem(second, client, code);
    expect(redeemed.status).toBe(200);
    const { refresh_token } = (await redeemed.json()) as { refresh_token: string };
    expect((await tokenAt(first, client, { grant_type: "refresh_token", refresh_token })).status).toBe(200);
  });

  test("a code redeemed at one edge is refused at the next at once", async () => {
    const { client, code } = await codeAtFirst();
    await pulled(second);
    expect((await redeem(first, client, code)).status).toBe(200);
    const again = await redeem(second, client, code);
    expect([again.status, ((await again.json()) as { error: string }).error]).toEqual([400, "invalid_grant"]);
  });
});
