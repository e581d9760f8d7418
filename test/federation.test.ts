/**
 * Sign-in with other providers, end to end over HTTP: a real OpenID Provider (oidc-provider on
 * loopback, test/support/openid-provider.ts) for a company IdP ("corp", e-mail not trusted) and
 * Google's issuer ("google", TRUST_EMAIL=on), a GitHub stand-in, the flow's every step and the
 * attacks it must refuse, with nothing signed in.
 */
import { createHash, randomBytes } from "node:crypto";
import { and, eq } from "drizzle-orm";
import { identities, mfaTotp, outbox, passkeys, users } from "../src/db/schema";
import { STEP_UP_TTL_MS } from "../src/security/step-up";
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { makeTestApp, type TestApp, uniqueEmail } from "./helpers";
import { startGitHubStandIn } from "./support/github-stand-in";
import { type IdpUser, type OpenIdProvider, startOpenIdProvider, throughProvider } from "./support/openid-provider";
import { totpAt } from "./support/totp";

const ORIGIN = "http://localhost";
const CALLBACK = `${ORIGIN}/api/auth/oidc/`;
const callbacks = (...names: string[]) => names.map((name) => `${CALLBACK}${name}/callback`);

const verifierPair = () => {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
};

let t: TestApp;
let corp: OpenIdProvider;
let google: OpenIdProvider;
let github: ReturnType<typeof startGitHubStandIn>;
const corpUsers: Record<string, IdpUser> = {};
const googleUsers: Record<string, IdpUser> = {};

beforeAll(async () => {
  corp = await startOpenIdProvider({ redirectUris: callbacks("corp"), users: corpUsers });
  google = await startOpenIdProvider({ redirectUris: callbacks("google"), users: googleUsers });
  github = startGitHubStandIn("gh-client", "gh-secret");
  t = await makeTestApp({
    OIDC_PROVIDERS: "corp,google,github",
    OIDC_CORP_ISSUER: corp.issuer,
    OIDC_CORP_CLIENT_ID: corp.clientId,
    OIDC_CORP_CLIENT_SECRET: corp.clientSecret,
    OIDC_CORP_LABEL: "Corp",
    OIDC_GOOGLE_ISSUER: google.issuer,
    OIDC_GOOGLE_CLIENT_ID: google.clientId,
    OIDC_GOOGLE_CLIENT_SECRET: google.clientSecret,
    OIDC_GOOGLE_TRUST_EMAIL: "on",
    OIDC_GOOGLE_KEEP_TOKENS: "on",
    OIDC_GITHUB_CLIENT_ID: "gh-client",
    OIDC_GITHUB_CLIENT_SECRET: "gh-secret",
    OIDC_GITHUB_WEB_URL: github.url,
    OIDC_GITHUB_API_URL: github.url,
    OIDC_RETURN_URLS: "https://app.example.com/signed-in",
    OIDC_START_MAX_PER_IP: "1000",
  });
});
afterAll(async () => {
  await t.close();
  await corp.stop();
  await google.stop();
  github.stop();
});

interface Started {
  verifier: string;
  location: string;
}

/** The page's first step: start, with a fresh verifier's challenge. */
async function start(provider: string, returnTo = "/account/security"): Promise<Started & { status: number; body: unknown }> {
  const { verifier, challenge } = verifierPair();
  const res = await t.request("GET", `/api/auth/oidc/${provider}/start?returnTo=${encodeURIComponent(returnTo)}&codeChallenge=${challenge}`);
  return { verifier, location: res.headers.get("location") ?? "", status: res.status, body: res.body };
}

/** The browser through the provider and back to our callback: where the callback sends it, as the fragment's values. */
async function callback(started: Started, idp: { loginAs(id: never): void } | undefined, who: unknown) {
  idp?.loginAs(who as never);
  const back = await throughProvider(started.location, CALLBACK);
  const res = await t.request("GET", back.slice(ORIGIN.length));
  expect(res.status).toBe(302);
  const location = res.headers.get("location") ?? "";
  return { location, fragment: new URLSearchParams(location.split("#")[1] ?? ""), back };
}

const exchange = (code: string, codeVerifier: string) => t.request("POST", "/api/auth/oidc/exchange", { body: { code, codeVerifier } });

/** A whole sign-in: the exchange's answer (or the callback's error). */
async function signIn(provider: string, idp: { loginAs(id: never): void }, who: unknown) {
  const started = await start(provider);
  const { fragment } = await callback(started, idp, who);
  if (fragment.get("error")) return { error: fragment.get("error") };
  return { answer: await exchange(fragment.get("code") ?? "", started.verifier) };
}

const corpUser = (user: IdpUser) => {
  const id = `corp-${crypto.randomUUID()}`;
  corpUsers[id] = user;
  return id;
};
const googleUser = (user: IdpUser) => {
  const id = `g-${crypto.randomUUID()}`;
  googleUsers[id] = user;
  return id;
};

/** The answer's data of a sign-in that got one. */
function dataOf<T>(result: Awaited<ReturnType<typeof signIn>>): T {
  expect(result.error).toBeUndefined();
  return result.answer?.body.data as T;
}

const identitiesOf = (userId: number) => t.db.select().from(identities).where(eq(identities.userId, userId));

describe("sign-in with a provider", () => {
  test("the providers a sign-in page offers, in order", async () => {
    const res = await t.request("GET", "/api/auth/oidc/providers");
    expect(res.body).toEqual([
      { name: "corp", label: "Corp", stepUp: true },
      { name: "google", label: "Google", stepUp: true },
      { name: "github", label: "GitHub", stepUp: false },
    ]);
  });

  test("start: 302 to the provider with state, nonce and PKCE S256", async () => {
    const started = await start("corp");
    expect(started.status).toBe(302);
    const url = new URL(started.location);
    expect(url.origin + url.pathname).toBe(`${corp.issuer}/auth`);
    expect(url.searchParams.get("state")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.get("redirect_uri")).toBe(`${CALLBACK}corp/callback`);
    expect(url.searchParams.get("scope")).toBe("openid email profile");
  });

  test("a new account by federated sign-in (USER, no password, amr fed), and the second sign-in lands in the same account", async () => {
    const email = uniqueEmail("fed");
    const who = corpUser({ email, email_verified: true, name: "Fed Person" });
    const first = await signIn("corp", corp, who);
    expect(first.answer?.status).toBe(200);
    const data = first.answer?.body.data as { token: string; refreshToken: string; user: { id: number; email: string; roles: string[]; name: string; emailVerified: boolean } };
    expect(data.user).toMatchObject({ email, roles: ["USER"], name: "Fed Person", emailVerified: true });
    expect(data.refreshToken).toBeString();
    const [row] = await t.db.select().from(users).where(eq(users.email, email));
    expect(row.passwordHash).toBeNull();
    const payload = JSON.parse(Buffer.from(data.token.split(".")[1], "base64url").toString());
    expect(payload.amr).toEqual(["fed"]);
    const me = await t.request("GET", "/api/account/identities", { token: data.token });
    expect(me.body).toEqual([{ id: expect.any(Number), provider: "corp", label: "Corp", email, linkedAt: expect.any(String), lastUsedAt: expect.any(String) }]);

    const second = await signIn("corp", corp, who);
    expect(dataOf<{ user: { id: number } }>(second).user.id).toBe(data.user.id);
    expect(await identitiesOf(data.user.id)).toHaveLength(1);
    const audit = await t.request("GET", "/api/audit?action=FEDERATED_LOGIN", { token: (await t.admin()).token });
    expect(JSON.stringify(audit.body)).toContain(`"subjectId":"${data.user.id}"`);
  });

  test("an account with TOTP gets the second step; a TOTP code completes it (amr fed, otp)", async () => {
    const email = uniqueEmail("fed-totp");
    const who = corpUser({ email, email_verified: true, name: "Two Steps" });
    const first = await signIn("corp", corp, who);
    const userId = dataOf<{ user: { id: number } }>(first).user.id;
    const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
    await t.db.insert(mfaTotp).values({ userId, secretSealed: t.cipher.seal(secret), createdAt: new Date(), confirmedAt: new Date() });
    const again = await signIn("corp", corp, who);
    const step = again.answer?.body.data as { mfaRequired: boolean; mfaToken: string; methods: string[] };
    expect(step).toMatchObject({ mfaRequired: true, methods: ["totp", "recovery_code"] });
    expect("token" in step).toBe(false);
    const done = await t.request("POST", "/api/auth/login/mfa", { body: { mfaToken: step.mfaToken, code: totpAt(secret, Date.now()) } });
    expect(done.status).toBe(200);
    const token = (done.body.data as { token: string }).token;
    expect(JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString()).amr).toEqual(["fed", "otp"]);
  });

  test("GitHub: identities keyed by its numeric id; a verified primary e-mail makes a verified account", async () => {
    const email = uniqueEmail("gh");
    const user = { id: 1000 + Math.floor(Math.random() * 1e6), login: "octo", name: "Octo Cat", emails: [{ email, primary: true, verified: true }] };
    const first = await signIn("github", github, user);
    const data = first.answer?.body.data as { user: { id: number; emailVerified: boolean } };
    expect(data.user.emailVerified).toBe(true);
    const [identity] = await identitiesOf(data.user.id);
    expect(identity).toMatchObject({ provider: "github", issuer: github.url, subject: String(user.id) });
  });

  test("GitHub: an unverified primary e-mail makes an account that opens no session until our own mail is confirmed", async () => {
    const email = uniqueEmail("gh-unverified");
    const user = {
      id: 2_000_000 + Math.floor(Math.random() * 1e6),
      login: "unv",
      name: null,
      emails: [
        { email: `other-${email}`, primary: false, verified: true },
        { email, primary: true, verified: false },
      ],
    };
    const first = await signIn("github", github, user);
    expect(first.error).toBe("VERIFICATION_SENT");
    const [row] = await t.db.select().from(users).where(eq(users.email, email));
    expect(row).toMatchObject({ emailVerified: false, passwordHash: null, name: "unv" });
    const [mail] = await t.db
      .select()
      .from(outbox)
      .where(and(eq(outbox.kind, "VERIFY_EMAIL"), eq(outbox.recipient, email)));
    expect(mail.token).toBeString();
  });
});

describe("e-mail matches", () => {
  /** An account of ours with a password, verified unless told. */
  async function ours(opts: { verified?: boolean; roles?: ("USER" | "ADMIN")[] } = {}) {
    const made = await t.createUser({ email: uniqueEmail("ours"), password: "Passw0rd!", roles: opts.roles });
    if (opts.verified !== false) await t.db.update(users).set({ emailVerified: true }).where(eq(users.id, made.id));
    return made;
  }

  test("linked with TRUST_EMAIL on and both verified: the same account, mailed IDENTITY_LINKED", async () => {
    const mine = await ours();
    const result = await signIn("google", google, googleUser({ email: mine.email, email_verified: true, name: "Mine" }));
    expect(result.error).toBeUndefined();
    expect(dataOf<{ user: { id: number } }>(result).user.id).toBe(mine.id);
    expect(await identitiesOf(mine.id)).toHaveLength(1);
    const mails = await t.db
      .select()
      .from(outbox)
      .where(and(eq(outbox.kind, "IDENTITY_LINKED"), eq(outbox.recipient, mine.email)));
    expect(mails).toHaveLength(1);
  });

  const refusals: [string, () => Promise<{ provider: string; idp: OpenIdProvider; who: string; userId: number }>][] = [
    [
      "TRUST_EMAIL off",
      async () => {
        const m = await ours();
        return { provider: "corp", idp: corp, who: corpUser({ email: m.email, email_verified: true }), userId: m.id };
      },
    ],
    [
      "email_verified false",
      async () => {
        const m = await ours();
        return { provider: "google", idp: google, who: googleUser({ email: m.email, email_verified: false }), userId: m.id };
      },
    ],
    [
      "email_verified missing",
      async () => {
        const m = await ours();
        return { provider: "google", idp: google, who: googleUser({ email: m.email }), userId: m.id };
      },
    ],
    [
      "our address unverified",
      async () => {
        const m = await ours({ verified: false });
        return { provider: "google", idp: google, who: googleUser({ email: m.email, email_verified: true }), userId: m.id };
      },
    ],
    [
      "an ADMIN",
      async () => {
        const m = await ours({ roles: ["USER", "ADMIN"] });
        return { provider: "google", idp: google, who: googleUser({ email: m.email, email_verified: true }), userId: m.id };
      },
    ],
    [
      "an account with a second factor",
      async () => {
        const m = await ours();
        await t.db
          .insert(passkeys)
          .values({ id: crypto.randomUUID(), userId: m.id, credentialId: crypto.randomUUID(), publicKey: "x", counter: 0, name: "key", createdAt: new Date() });
        return { provider: "google", idp: google, who: googleUser({ email: m.email, email_verified: true }), userId: m.id };
      },
    ],
  ];
  test.each(refusals)("refused with ACCOUNT_EXISTS: %s; nothing linked, nobody signed in", async (_name, setup) => {
    const { provider, idp, who, userId } = await setup();
    const result = await signIn(provider, idp, who);
    expect(result.error).toBe("ACCOUNT_EXISTS");
    expect(await identitiesOf(userId)).toHaveLength(0);
  });

  test("pre-account hijacking: an attacker's provider sign-up with the victim's unverified address loses its identity when the victim verifies", async () => {
    const victim = uniqueEmail("victim");
    const attacker = corpUser({ email: victim, email_verified: false, name: "Attacker" });
    expect((await signIn("corp", corp, attacker)).error).toBe("VERIFICATION_SENT");
    const [account] = await t.db.select().from(users).where(eq(users.email, victim));
    expect(await identitiesOf(account.id)).toHaveLength(1);
    const [mail] = await t.db
      .select()
      .from(outbox)
      .where(and(eq(outbox.kind, "VERIFY_EMAIL"), eq(outbox.recipient, victim)));
    const confirmed = await t.request("POST", "/api/auth/verify-email/confirm", { body: { token: mail.token } });
    expect(confirmed.status).toBe(200);
    expect(await identitiesOf(account.id)).toHaveLength(0);
    // The attacker's identity now finds a verified account it may not link to.
    expect((await signIn("corp", corp, attacker)).error).toBe("ACCOUNT_EXISTS");
  });

  test("pre-account hijacking: the victim's password reset removes the attacker's identity too", async () => {
    const victim = uniqueEmail("victim-reset");
    const attacker = corpUser({ email: victim, email_verified: false });
    expect((await signIn("corp", corp, attacker)).error).toBe("VERIFICATION_SENT");
    const [account] = await t.db.select().from(users).where(eq(users.email, victim));
    await t.request("POST", "/api/auth/password-reset/request", { body: { email: victim } });
    const { issueToken } = await import("../src/store/account-tokens");
    const token = await t.database.write((tx) => issueToken(tx, account.id, "PASSWORD_RESET", Date.now()));
    const reset = await t.request("POST", "/api/auth/password-reset/confirm", { body: { token, newPassword: "N3wPassw0rd!", confirmNewPassword: "N3wPassw0rd!" } });
    expect(reset.body).toMatchObject({ success: true });
    expect(await identitiesOf(account.id)).toHaveLength(0);
    expect((await signIn("corp", corp, attacker)).error).toBe("ACCOUNT_EXISTS");
  });
});

describe("refused, with nothing signed in", () => {
  test("a replayed state", async () => {
    const started = await start("corp");
    const { back, fragment } = await callback(started, corp, corpUser({ email: uniqueEmail("replay"), email_verified: true }));
    expect(fragment.get("code")).toBeString();
    const again = await t.request("GET", back.slice(ORIGIN.length));
    expect(again.headers.get("location")).toBe("/account#error=INVALID_OIDC_STATE");
  });

  test("an exchange with another browser's verifier, and the code is used up by it", async () => {
    const started = await start("corp");
    const { fragment } = await callback(started, corp, corpUser({ email: uniqueEmail("planted"), email_verified: true }));
    const code = fragment.get("code") ?? "";
    const other = await exchange(code, verifierPair().verifier);
    expect(other.status).toBe(401);
    expect(other.body.errorCode).toBe("INVALID_OIDC_CODE");
    expect((await exchange(code, started.verifier)).status).toBe(401);
  });

  test("a replayed code", async () => {
    const started = await start("corp");
    const { fragment } = await callback(started, corp, corpUser({ email: uniqueEmail("code-replay"), email_verified: true }));
    expect((await exchange(fragment.get("code") ?? "", started.verifier)).status).toBe(200);
    const again = await exchange(fragment.get("code") ?? "", started.verifier);
    expect(again.status).toBe(401);
    expect(again.body.errorCode).toBe("INVALID_OIDC_CODE");
  });

  const attacks: [string, Parameters<OpenIdProvider["tamper"]>[0]][] = [
    ["a wrong nonce", { idToken: (claims) => ({ ...claims, nonce: "not-the-flows-nonce" }) }],
    ["an ID token signed by another key", { idToken: (claims) => claims, otherKey: true }],
    ["an expired ID token", { idToken: (claims) => ({ ...claims, iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 }) }],
    ["an ID token for another audience", { idToken: (claims) => ({ ...claims, aud: "someone-else" }) }],
    ["userinfo with another sub", { userinfo: (claims) => ({ ...claims, sub: "someone-else" }) }],
  ];
  test.each(attacks)("%s: PROVIDER_REJECTED, no account made", async (_name, tampering) => {
    const email = uniqueEmail("tampered");
    const started = await start("corp");
    corp.tamper(tampering);
    const { fragment, location } = await callback(started, corp, corpUser({ email, email_verified: true }));
    expect(location.startsWith("/account/security#")).toBe(true);
    expect(fragment.get("error")).toBe("PROVIDER_REJECTED");
    expect(fragment.get("code")).toBeNull();
    expect(await t.db.select().from(users).where(eq(users.email, email))).toHaveLength(0);
  });

  test("consent denied at the provider comes back as PROVIDER_DENIED", async () => {
    const started = await start("corp");
    const { fragment } = await callback(started, corp, undefined);
    expect(fragment.get("error")).toBe("PROVIDER_DENIED");
  });

  test.each([
    "https://evil.example.com/account",
    "//evil.example.com/account",
    "/oauth2/authorize",
    "/api/users",
    "/account/../api/users",
    "/elsewhere",
    "https://app.example.com/signed-in/other",
    "/account#x",
  ])("returnTo %s: 400 INVALID_RETURN_URL", async (returnTo) => {
    const started = await start("corp", returnTo);
    expect(started.status).toBe(400);
    expect((started.body as { errorCode: string }).errorCode).toBe("INVALID_RETURN_URL");
  });

  test("returnTo listed in OIDC_RETURN_URLS, or a page under /admin, is taken", async () => {
    expect((await start("corp", "https://app.example.com/signed-in")).status).toBe(302);
    expect((await start("corp", "/admin/users?x=1")).status).toBe(302);
  });

  test("an unknown provider: 404 PROVIDER_NOT_FOUND", async () => {
    const started = await start("nobody");
    expect(started.status).toBe(404);
  });
});

describe("unlinking", () => {
  test("the last sign-in method: 409 LAST_SIGN_IN_METHOD; with a password: 204, and the identity no longer signs in", async () => {
    const email = uniqueEmail("unlink");
    const who = corpUser({ email, email_verified: true });
    const data = (await signIn("corp", corp, who)).answer?.body.data as { token: string; user: { id: number } };
    const [identity] = await identitiesOf(data.user.id);
    const refused = await t.request("DELETE", `/api/account/identities/${identity.id}`, { token: data.token });
    expect(refused.status).toBe(409);
    expect(refused.body.errorCode).toBe("LAST_SIGN_IN_METHOD");
    await t.db.update(users).set({ passwordHash: "$argon2id$placeholder" }).where(eq(users.id, data.user.id));
    const removed = await t.request("DELETE", `/api/account/identities/${identity.id}`, { token: data.token });
    expect(removed.status).toBe(204);
    expect(await identitiesOf(data.user.id)).toHaveLength(0);
    // The same provider account now finds an account it may not link to (TRUST_EMAIL off).
    expect((await signIn("corp", corp, who)).error).toBe("ACCOUNT_EXISTS");
  });

  test("an ADMIN lists a user's identities", async () => {
    const data = (await signIn("corp", corp, corpUser({ email: uniqueEmail("listed"), email_verified: true }))).answer?.body.data as { user: { id: number } };
    const admin = await t.admin();
    const res = await t.request("GET", `/api/users/${data.user.id}/identities`, { token: admin.token });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect((await t.request("GET", `/api/users/${data.user.id}/identities`, { token: (await t.createUser()).token })).status).toBe(403);
  });
});

describe("step-up: a fresh sign-in at a linked provider stands in for the password", () => {
  /** A step-up at `provider` for the caller: the fragment's values where it came back, the verifier, and the provider's authorization request. */
  async function stepUpAt(provider: string, idp: { loginAs(id: never): void; lastAuthorization?(): URLSearchParams | undefined }, who: unknown, token: string) {
    const { verifier, challenge } = verifierPair();
    const started = await t.request("POST", `/api/account/step-up/${provider}/start`, { token, body: { returnTo: "/account/security", codeChallenge: challenge } });
    if (started.status !== 200) return { status: started.status, errorCode: started.body.errorCode as string };
    idp.loginAs(who as never);
    const back = await throughProvider(started.body.url, CALLBACK);
    const res = await t.request("GET", back.slice(ORIGIN.length));
    const fragment = new URLSearchParams((res.headers.get("location") ?? "").split("#")[1] ?? "");
    return { status: 200, fragment, verifier, authorization: idp.lastAuthorization?.() };
  }
  const exchangeStepUp = (token: string, code: string, codeVerifier: string) => t.request("POST", "/api/account/step-up/exchange", { token, body: { code, codeVerifier } });

  /** An account a provider made (no password), signed in. */
  async function providerAccount() {
    const email = uniqueEmail("no-password");
    const who = corpUser({ email, email_verified: true, name: "No Password" });
    const data = dataOf<{ token: string; user: { id: number; version: number } }>(await signIn("corp", corp, who));
    return { email, who, token: data.token, id: data.user.id };
  }

  test("an account without a password changes its e-mail with a step-up at its provider (prompt=login, max_age=0); without one, 400", async () => {
    const { id, who, token } = await providerAccount();
    const moved = uniqueEmail("moved");
    const refused = await t.request("PATCH", `/api/users/${id}`, { token, body: { email: moved } });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual(["currentPassword: is required to change your e-mail address"]);
    const stepped = await stepUpAt("corp", corp, who, token);
    expect(stepped.authorization?.get("prompt")).toBe("login");
    expect(stepped.authorization?.get("max_age")).toBe("0");
    const answer = await exchangeStepUp(token, stepped.fragment?.get("code") ?? "", stepped.verifier ?? "");
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ stepUpToken: expect.any(String), expiresIn: STEP_UP_TTL_MS / 1000, method: "fed" });
    const changed = await t.request("PATCH", `/api/users/${id}`, { token, body: { email: moved, stepUpToken: answer.body.stepUpToken } });
    expect(changed.status).toBe(200);
    expect(changed.body.email).toBe(moved);
    // The identity still signs in to the account, at its new address.
    expect(dataOf<{ user: { id: number; email: string } }>(await signIn("corp", corp, who)).user).toMatchObject({ id, email: moved });
  });

  test("refused: a provider sign-in older than the step-up, another provider account, a provider not linked, GitHub, a code without its verifier or of another caller", async () => {
    const { who, token } = await providerAccount();
    corp.tamper({ idToken: (claims) => ({ ...claims, auth_time: Math.floor(Date.now() / 1000) - 3600 }) });
    expect((await stepUpAt("corp", corp, who, token)).fragment?.get("error")).toBe("PROVIDER_REJECTED");
    const stranger = corpUser({ email: uniqueEmail("stranger"), email_verified: true });
    expect((await stepUpAt("corp", corp, stranger, token)).fragment?.get("error")).toBe("IDENTITY_NOT_LINKED");
    expect(await stepUpAt("google", google, googleUser({ email: uniqueEmail("g") }), token)).toEqual({ status: 404, errorCode: "IDENTITY_NOT_FOUND" });
    expect(await stepUpAt("github", github, undefined, token)).toEqual({ status: 400, errorCode: "STEP_UP_NOT_SUPPORTED" });
    const good = await stepUpAt("corp", corp, who, token);
    const code = good.fragment?.get("code") ?? "";
    const other = await providerAccount();
    expect((await exchangeStepUp(other.token, code, good.verifier ?? "")).body.errorCode).toBe("INVALID_OIDC_CODE");
    // A sign-in's code is no step-up's, and the step-up's code is no sign-in's.
    const again = await stepUpAt("corp", corp, who, token);
    expect((await exchange(again.fragment?.get("code") ?? "", again.verifier ?? "")).body.errorCode).toBe("INVALID_OIDC_CODE");
  });

  test("linking another provider takes a step-up first; the linked identity then signs in to the account", async () => {
    const { id, who, token } = await providerAccount();
    const { verifier, challenge } = verifierPair();
    const link = (body: Record<string, unknown>) =>
      t.request("POST", "/api/account/identities/google/start", { token, body: { returnTo: "/account/security", codeChallenge: challenge, ...body } });
    expect((await link({})).status).toBe(400);
    expect((await link({ stepUpToken: "forged" })).body.errorCode).toBe("INVALID_STEP_UP");
    const stepped = await stepUpAt("corp", corp, who, token);
    const { stepUpToken } = (await exchangeStepUp(token, stepped.fragment?.get("code") ?? "", stepped.verifier ?? "")).body;
    const started = await link({ stepUpToken });
    expect(started.status).toBe(200);
    expect((await link({ stepUpToken })).body.errorCode).toBe("INVALID_STEP_UP");
    const googleAccount = googleUser({ email: uniqueEmail("other-address"), email_verified: true });
    google.loginAs(googleAccount as never);
    const back = await throughProvider(started.body.url, CALLBACK);
    const res = await t.request("GET", back.slice(ORIGIN.length));
    const code = new URLSearchParams((res.headers.get("location") ?? "").split("#")[1]).get("code") ?? "";
    const linked = await t.request("POST", "/api/account/identities/link", { token, body: { code, codeVerifier: verifier } });
    expect(linked.status).toBe(201);
    expect(linked.body).toMatchObject({ provider: "google", label: "Google" });
    expect(dataOf<{ user: { id: number } }>(await signIn("google", google, googleAccount)).user.id).toBe(id);
    expect(await identitiesOf(id)).toHaveLength(2);
  });
});

describe("unlinking with a passkey left", () => {
  test("an account with a passkey and its provider: unlinking the identity is 204, and it no longer signs in", async () => {
    const email = uniqueEmail("unlink-passkey");
    const who = corpUser({ email, email_verified: true });
    const data = dataOf<{ token: string; user: { id: number } }>(await signIn("corp", corp, who));
    await t.db
      .insert(passkeys)
      .values({ id: crypto.randomUUID(), userId: data.user.id, credentialId: crypto.randomUUID(), publicKey: "x", counter: 0, name: "key", createdAt: new Date() });
    const [identity] = await identitiesOf(data.user.id);
    expect((await t.request("DELETE", `/api/account/identities/${identity.id}`, { token: data.token })).status).toBe(204);
    expect(await identitiesOf(data.user.id)).toHaveLength(0);
    // Its provider account now finds an account with a second factor: no link, nobody signed in.
    expect((await signIn("corp", corp, who)).error).toBe("ACCOUNT_EXISTS");
  });
});

describe("provider tokens", () => {
  test("OIDC_<NAME>_KEEP_TOKENS=on keeps the provider's tokens sealed like TOTP secrets; off (the default) keeps none", async () => {
    const kept = dataOf<{ user: { id: number } }>(await signIn("google", google, googleUser({ email: uniqueEmail("kept"), email_verified: true })));
    const [row] = await identitiesOf(kept.user.id);
    expect(row.tokensSealed).toStartWith(`v1.${t.cipher.keyId}.`);
    const tokens = JSON.parse(t.cipher.open(row.tokensSealed ?? "").toString("utf8"));
    expect(tokens).toEqual({ accessToken: expect.any(String), idToken: expect.any(String), scope: expect.any(String), expiresAt: expect.any(Number) });
    expect(row.tokensSealed).not.toContain(tokens.accessToken);
    // Never in an answer.
    const admin = await t.admin();
    expect(JSON.stringify((await t.request("GET", `/api/users/${kept.user.id}/identities`, { token: admin.token })).body)).not.toContain("token");
    const plain = dataOf<{ user: { id: number } }>(await signIn("corp", corp, corpUser({ email: uniqueEmail("not-kept"), email_verified: true })));
    expect((await identitiesOf(plain.user.id))[0].tokensSealed).toBeNull();
  });
});

describe("CORS on the exchange, for the pages of OIDC_RETURN_URLS", () => {
  const preflight = (path: string, origin: string) =>
    t.request("OPTIONS", path, { headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type" } });
  test("the listed page's origin is answered on the exchange route only; any other origin, or route, gets no CORS header", async () => {
    const listed = "https://app.example.com";
    const ok = await preflight("/api/auth/oidc/exchange", listed);
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe(listed);
    expect(ok.headers.get("access-control-allow-methods")).toContain("POST");
    const answered = await t.request("POST", "/api/auth/oidc/exchange", { headers: { origin: listed }, body: { code: "x".repeat(43), codeVerifier: "y".repeat(43) } });
    expect(answered.status).toBe(401);
    expect(answered.headers.get("access-control-allow-origin")).toBe(listed);
    for (const [path, origin] of [
      ["/api/auth/oidc/exchange", "https://evil.example.com"],
      ["/api/users", listed],
      ["/api/auth/login", listed],
    ]) {
      const res = await preflight(path, origin);
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin"), `${path} ${origin}`).toBeNull();
    }
  });
});

describe("Microsoft: the tenant of each sign-in", () => {
  const TENANT_A = "11111111-1111-4111-8111-111111111111";
  const TENANT_B = "22222222-2222-4222-8222-222222222222";
  const TENANT_C = "33333333-3333-4333-8333-333333333333";
  let tenantA: OpenIdProvider;
  const entra: Record<string, IdpUser> = {};
  const apps: TestApp[] = [];
  beforeAll(async () => {
    // A stand-in for tenant A's issuer, https://login.microsoftonline.com/<tid>/v2.0, on loopback; its ID tokens carry tid.
    tenantA = await startOpenIdProvider({ redirectUris: callbacks("microsoft"), users: entra, path: `/${TENANT_A}/v2.0`, claims: ["tid"] });
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await tenantA.stop();
  });
  async function microsoftApp(env: Record<string, string>) {
    const app = await makeTestApp({
      OIDC_PROVIDERS: "microsoft",
      OIDC_MICROSOFT_ISSUER: tenantA.issuer,
      OIDC_MICROSOFT_CLIENT_ID: tenantA.clientId,
      OIDC_MICROSOFT_CLIENT_SECRET: tenantA.clientSecret,
      OIDC_START_MAX_PER_IP: "1000",
      ...env,
    });
    apps.push(app);
    return app;
  }
  /** A sign-in at the stand-in as a user of tenant `tid`: the fragment's error, or "signed in". */
  async function signInTo(app: TestApp, tid: string | undefined) {
    const id = `ms-${crypto.randomUUID()}`;
    entra[id] = { email: uniqueEmail("ms"), email_verified: true, name: "Tenant User", ...(tid && { tid }) };
    const { verifier, challenge } = verifierPair();
    const started = await app.request("GET", `/api/auth/oidc/microsoft/start?returnTo=%2Faccount&codeChallenge=${challenge}`);
    tenantA.loginAs(id);
    const back = await throughProvider(started.headers.get("location") ?? "", CALLBACK);
    const res = await app.request("GET", back.slice(ORIGIN.length));
    const fragment = new URLSearchParams((res.headers.get("location") ?? "").split("#")[1]);
    if (fragment.get("error")) return fragment.get("error");
    const answer = await app.request("POST", "/api/auth/oidc/exchange", { body: { code: fragment.get("code"), codeVerifier: verifier } });
    return answer.status === 200 ? "signed in" : answer.body.errorCode;
  }

  test("OIDC_MICROSOFT_TENANT=<id>: that tenant's users only", async () => {
    const app = await microsoftApp({ OIDC_MICROSOFT_TENANT: TENANT_A });
    expect(await signInTo(app, TENANT_A)).toBe("signed in");
    expect(await signInTo(app, TENANT_B)).toBe("PROVIDER_REJECTED");
    expect(await signInTo(app, undefined)).toBe("PROVIDER_REJECTED");
  });

  test("common with OIDC_MICROSOFT_TENANTS: an allowed tenant's user, whose iss is that tenant's own; a token whose tid names another tenant than its iss is refused", async () => {
    const app = await microsoftApp({ OIDC_MICROSOFT_TENANT: "common", OIDC_MICROSOFT_TENANTS: `${TENANT_A},${TENANT_B}` });
    expect(await signInTo(app, TENANT_A)).toBe("signed in");
    // Allowed tenant B, but the token comes from tenant A's issuer: the pair does not match.
    expect(await signInTo(app, TENANT_B)).toBe("PROVIDER_REJECTED");
    expect(await signInTo(app, TENANT_C)).toBe("PROVIDER_REJECTED");
  });
});

describe("OIDC_SIGNUP=off", () => {
  test("a provider's sign-in makes no account: SIGNUP_DISABLED, nobody signed in", async () => {
    const app = await makeTestApp({
      OIDC_PROVIDERS: "corp",
      OIDC_CORP_ISSUER: corp.issuer,
      OIDC_CORP_CLIENT_ID: corp.clientId,
      OIDC_CORP_CLIENT_SECRET: corp.clientSecret,
      OIDC_SIGNUP: "off",
    });
    try {
      const email = uniqueEmail("no-signup");
      const { challenge } = verifierPair();
      const started = await app.request("GET", `/api/auth/oidc/corp/start?returnTo=%2Faccount&codeChallenge=${challenge}`);
      corp.loginAs(corpUser({ email, email_verified: true }) as never);
      const back = await throughProvider(started.headers.get("location") ?? "", CALLBACK);
      const res = await app.request("GET", back.slice(ORIGIN.length));
      expect(res.headers.get("location")).toBe("/account#error=SIGNUP_DISABLED");
      expect(await app.db.select().from(users).where(eq(users.email, email))).toHaveLength(0);
    } finally {
      await app.close();
    }
  });
});
