/**
 * GitHub as the github preset uses it, and nothing more: the OAuth 2 authorize page (it signs in
 * whichever user the test named, at once), the token endpoint (checking the code, the client's
 * secret and PKCE), `/user` and `/user/emails`. Web and API on one loopback server.
 */
import { createHash, randomBytes } from "node:crypto";

export interface GitHubUser {
  id: number;
  login: string;
  name: string | null;
  emails: { email: string; primary: boolean; verified: boolean }[];
}

export function startGitHubStandIn(clientId: string, clientSecret: string) {
  let next: GitHubUser | undefined;
  const codes = new Map<string, { user: GitHubUser; challenge: string; redirectUri: string }>();
  const tokens = new Map<string, GitHubUser>();
  const json = (body: unknown, status = 200) => Response.json(body, { status });
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === "/login/oauth/authorize") {
        const redirectUri = url.searchParams.get("redirect_uri") ?? "";
        const back = new URL(redirectUri);
        back.searchParams.set("state", url.searchParams.get("state") ?? "");
        if (!next || url.searchParams.get("client_id") !== clientId) back.searchParams.set("error", "access_denied");
        else {
          const code = randomBytes(10).toString("hex");
          codes.set(code, { user: next, challenge: url.searchParams.get("code_challenge") ?? "", redirectUri });
          back.searchParams.set("code", code);
        }
        return new Response(null, { status: 302, headers: { location: back.href } });
      }
      if (url.pathname === "/login/oauth/access_token" && request.method === "POST") {
        const form = new URLSearchParams(await request.text());
        const grant = codes.get(form.get("code") ?? "");
        codes.delete(form.get("code") ?? "");
        const verifier = form.get("code_verifier") ?? "";
        const ok =
          grant &&
          form.get("client_id") === clientId &&
          form.get("client_secret") === clientSecret &&
          form.get("redirect_uri") === grant.redirectUri &&
          createHash("sha256").update(verifier).digest("base64url") === grant.challenge;
        // GitHub answers a bad code with 200 and an error body.
        if (!ok || !grant) return json({ error: "bad_verification_code" });
        const accessToken = `gho_${randomBytes(16).toString("hex")}`;
        tokens.set(accessToken, grant.user);
        return json({ access_token: accessToken, token_type: "bearer", scope: "read:user,user:email" });
      }
      const user = tokens.get(request.headers.get("authorization")?.replace(/^Bearer /i, "") ?? "");
      if (!user) return json({ message: "Bad credentials" }, 401);
      if (url.pathname === "/user") return json({ id: user.id, login: user.login, name: user.name });
      if (url.pathname === "/user/emails") return json(user.emails);
      return json({ message: "Not Found" }, 404);
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    loginAs: (user: GitHubUser | undefined) => {
      next = user;
    },
    stop: () => server.stop(true),
  };
}
