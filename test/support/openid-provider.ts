/**
 * A real OpenID Provider on loopback for the federation tests: panva's oidc-provider (a certified
 * implementation) with one confidential client and the users a test gives it, standing in for a
 * company IdP, Google's issuer or a Microsoft tenant. Its login and consent are one interaction
 * handler of ours: it signs in whichever user the test named with `loginAs` (or denies, with
 * none), so a test drives the whole flow over HTTP. `tamper` rewrites the next ID token (its
 * claims, re-signed with the provider's key or another one) or userinfo answer: the attacks the
 * relying party must refuse. With `form`, its login page is a real HTML form instead (a username
 * of `users`, Sign in or Cancel), for the browser suite. The provider is made at its first request,
 * so `redirectUris` may be filled after it starts (a server whose port was not known before).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import Provider from "oidc-provider";

export interface IdpUser {
  email?: string;
  email_verified?: boolean;
  name?: string;
  /** A Microsoft tenant id (its ID tokens' `tid`). */
  tid?: string;
}

export interface Tampering {
  /** The next ID token's claims rewritten; `otherKey`: signed by a key the provider never published. */
  idToken?: (claims: JWTPayload) => JWTPayload;
  otherKey?: boolean;
  /** The next userinfo answer rewritten. */
  userinfo?: (claims: Record<string, unknown>) => Record<string, unknown>;
}

export interface OpenIdProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Who the next interaction signs in (an id of `users`); undefined: the user denies. */
  loginAs(accountId: string | undefined): void;
  tamper(tampering: Tampering): void;
  /** The last authorization request's query (prompt, max_age, nonce …). */
  lastAuthorization(): URLSearchParams | undefined;
  stop(): Promise<void>;
}

export async function startOpenIdProvider(options: {
  redirectUris: string[];
  users: Record<string, IdpUser>;
  path?: string;
  claims?: string[];
  /** A login form of the provider's own, named so (Corp sign-in), for a browser. */
  form?: string;
}): Promise<OpenIdProvider> {
  const { users } = options;
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}${options.path ?? ""}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const other = await generateKeyPair("RS256", { extractable: true });
  const kid = "idp-key";
  const jwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" };
  const clientId = "usersvc";
  const clientSecret = "usersvc-secret-for-tests-only-0123456789";
  let next: string | undefined;
  let tampering: Tampering = {};
  let authorization: URLSearchParams | undefined;

  const made = () => {
    const provider = new Provider(issuer, {
      clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: options.redirectUris, grant_types: ["authorization_code"], response_types: ["code"] }],
      jwks: { keys: [jwk as never] },
      cookies: { keys: ["test-cookie-key-0123456789abcdef"] },
      claims: { openid: ["sub", ...(options.claims ?? [])], email: ["email", "email_verified"], profile: ["name"] },
      features: { devInteractions: { enabled: false } },
      pkce: { required: () => true },
      ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Grant: 600, Session: 600 },
      interactions: { url: (_ctx, interaction) => `${options.path ?? ""}/interaction/${interaction.uid}` },
      async findAccount(_ctx, id) {
        const user = users[id];
        if (!user) return undefined;
        return { accountId: id, claims: async () => ({ sub: id, ...user }) };
      },
    });
    provider.on("server_error", (_ctx, error) => console.error("openid-provider:", error));
    provider.use(async (ctx, nextMiddleware) => {
      if (ctx.path.endsWith("/auth") && ctx.method === "GET") authorization = new URLSearchParams(ctx.querystring);
      await nextMiddleware();
      const body = ctx.body as Record<string, unknown> | undefined;
      if (ctx.path.endsWith("/token") && typeof body?.id_token === "string" && tampering.idToken) {
        const claims = tampering.idToken(decodeJwt(body.id_token));
        body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid }).sign(tampering.otherKey ? other.privateKey : privateKey);
        tampering = { ...tampering, idToken: undefined, otherKey: undefined };
      }
      if (ctx.path.endsWith("/me") && body && tampering.userinfo) {
        ctx.body = tampering.userinfo(body);
        tampering = { ...tampering, userinfo: undefined };
      }
    });
    return { provider, callback: provider.callback() };
  };
  let made_: ReturnType<typeof made> | undefined;
  const lazily = () => {
    made_ ??= made();
    return made_;
  };

  server.on("request", async (req: IncomingMessage, res: ServerResponse) => {
    // Mounted under the issuer's path, as express's app.use(path, …) would: the provider routes the rest.
    if (options.path && req.url?.startsWith(options.path)) {
      (req as IncomingMessage & { originalUrl?: string }).originalUrl = req.url;
      req.url = req.url.slice(options.path.length) || "/";
    }
    const { provider, callback } = lazily();
    if (!req.url?.includes("/interaction/")) return callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      let accountId = next;
      if (options.form) {
        if (req.method !== "POST") return loginForm(res, options.form, `${options.path ?? ""}${req.url}`);
        const form = new URLSearchParams(await bodyOf(req));
        accountId = form.get("cancel") === null && users[form.get("username") ?? ""] ? (form.get("username") ?? undefined) : undefined;
      }
      if (!accountId) {
        await provider.interactionFinished(req, res, { error: "access_denied", error_description: "The user denied the request" });
        return;
      }
      const grant = new provider.Grant({ accountId, clientId: String(details.params.client_id) });
      grant.addOIDCScope(String(details.params.scope));
      await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: false });
    } catch (error) {
      res.statusCode = 500;
      res.end(String(error));
    }
  });
  return {
    issuer,
    clientId,
    clientSecret,
    loginAs: (accountId) => {
      next = accountId;
    },
    tamper: (t) => {
      tampering = t;
    },
    lastAuthorization: () => authorization,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A browser's way through the provider's pages: follows its redirects with a cookie jar until one
 * leads back to `until` (our callback), whose URL it answers.
 */
export async function throughProvider(start: string, until: string): Promise<string> {
  const jar = new Map<string, string>();
  let url = start;
  for (let hops = 0; hops < 20; hops++) {
    if (url.startsWith(until)) return url;
    const response = await fetch(url, { redirect: "manual", headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const at = pair.indexOf("=");
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    const location = response.headers.get("location");
    if (!location) throw new Error(`the provider stopped at ${url}: ${response.status} ${await response.text()}`);
    await response.body?.cancel();
    url = new URL(location, url).href;
  }
  throw new Error("too many redirects at the provider");
}

const bodyOf = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => resolve(text));
    req.on("error", reject);
  });

/** The provider's own sign-in page: a username and a password (any), Sign in or Cancel, posted back to the interaction. */
function loginForm(res: ServerResponse, name: string, action: string) {
  res.setHeader("content-type", "text/html; charset=utf-8");
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${name}</title>
<style>body{font-family:sans-serif;max-width:24rem;margin:3rem auto;background:#f4f1ea}label{display:block;margin-top:1rem}input{width:100%;padding:.4rem}button{margin-top:1rem;padding:.4rem 1rem}</style></head>
<body><main><h1>${name}</h1><p>The company's own sign-in page (a stand-in, for tests).</p>
<form method="post" action="${action}"><label for="username">Username</label><input id="username" name="username" autocomplete="username">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password">
<button type="submit">Sign in</button> <button type="submit" name="cancel" value="1">Cancel</button></form></main></body></html>`);
}
