/**
 * usersvc as an OpenID Provider against the real program (OAUTH_SERVER=on): the token endpoint's
 * rate for the authorization code (each a code issued beforehand for a first-party client, then
 * redeemed: an access token and an ID token signed RS256) and for refresh tokens (workers each
 * rotating its own chain), and GET /api/users/{id} read with a client's access token against the
 * same read with a session token (target ≥ 0.95×), alternated in rounds with the server's CPU per
 * request beside req/s (the neighbours on shared cores move req/s far more than CPU).
 *
 *   bun bench/oauth-server.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source),
 * BENCH_CODES (default 1500), BENCH_CONCURRENCY (default 8), BENCH_REFRESH_S (default 4),
 * BENCH_ROUNDS (default 6), BENCH_ROUND_S (default 2), BENCH_CONNECTIONS (default 32).
 * Writes bench/results/oauth-server.json.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ADMIN, cpuMsOf, startServer } from "../test/server-process";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const CODES = Number(process.env.BENCH_CODES ?? 1500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const REFRESH_S = Number(process.env.BENCH_REFRESH_S ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const REDIRECT = "https://bench.example.test/callback";
const log = (message: string) => process.stderr.write(`[oauth-server] ${message}\n`);

type Result = { requests: { total: number }; duration: number; non2xx: number; errors: number };
const { default: autocannon } = (await import("autocannon" as string)) as { default: (options: object) => Promise<Result> };

const server = await startServer((origin) => ({ OAUTH_SERVER: "on", PUBLIC_URL: origin, LOG_LEVEL: "error" }), existsSync(binary) ? binary : undefined);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

try {
  const login = await fetch(`${server.url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(ADMIN) });
  const session = ((await login.json()) as { data: { token: string; user: { id: number } } }).data;
  const created = await fetch(`${server.url}/api/oauth/clients`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
    body: JSON.stringify({ name: "Bench", redirectUris: [REDIRECT], scopes: ["offline_access", "users:read"], firstParty: true }),
  });
  const client = (await created.json()) as { clientId: string; clientSecret: string };
  const basic = `Basic ${btoa(`${client.clientId}:${client.clientSecret}`)}`;
  const opened = await fetch(`${server.url}/oauth2/session`, { method: "POST", headers: { authorization: `Bearer ${session.token}` } });
  const cookie = opened.headers.get("set-cookie")!.split(";")[0];

  const code = async (scope: string) => {
    const query = new URLSearchParams({ client_id: client.clientId, redirect_uri: REDIRECT, response_type: "code", scope });
    const answer = await fetch(`${server.url}/oauth2/authorize?${query}`, { headers: { cookie }, redirect: "manual" });
    return new URL(answer.headers.get("location")!).searchParams.get("code")!;
  };
  const token = async (form: Record<string, string>) => {
    const answer = await fetch(`${server.url}/oauth2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: basic },
      body: new URLSearchParams(form),
    });
    if (answer.status !== 200) throw new Error(`the token endpoint answered ${answer.status}: ${await answer.text()}`);
    return (await answer.json()) as { access_token: string; refresh_token?: string };
  };

  /** Runs `work` CONCURRENCY at a time until `more()` says no: how many, how long (ms), the server's CPU (ms). */
  async function measured(work: (worker: number) => Promise<void>, more: (elapsedMs: number) => boolean) {
    const cpu = cpuMsOf(server.pid);
    const started = performance.now();
    let done = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, worker) => {
        while (more(performance.now() - started)) {
          await work(worker);
          done++;
        }
      }),
    );
    const ms = performance.now() - started;
    return { done, ms, cpuMs: cpuMsOf(server.pid) - cpu };
  }
  const rateOf = (run: { done: number; ms: number; cpuMs: number }) => ({
    perSecond: Math.round((run.done / run.ms) * 1000),
    cpuUsPerRequest: Math.round((run.cpuMs * 1000) / run.done),
    requests: run.done,
  });

  // 1. authorization_code: codes issued beforehand (60 s each), then redeemed.
  log(`issuing ${CODES} codes`);
  for (let i = 0; i < 50; i++) await token({ grant_type: "authorization_code", code: await code("openid users:read"), redirect_uri: REDIRECT }); // warm-up
  const codes: string[] = [];
  for (let i = 0; i < CODES; i++) codes.push(await code("openid users:read"));
  log("redeeming them");
  const byCode = rateOf(
    await measured(
      async () => void (await token({ grant_type: "authorization_code", code: codes.pop()!, redirect_uri: REDIRECT })),
      () => codes.length > 0,
    ),
  );

  // 2. refresh_token: each worker rotates a chain of its own for REFRESH_S seconds.
  const chains: string[] = [];
  for (let i = 0; i < CONCURRENCY; i++)
    chains.push((await token({ grant_type: "authorization_code", code: await code("openid offline_access users:read"), redirect_uri: REDIRECT })).refresh_token!);
  const byRefresh = rateOf(
    await measured(
      async (worker) => {
        chains[worker] = (await token({ grant_type: "refresh_token", refresh_token: chains[worker] })).refresh_token!;
      },
      (elapsed) => elapsed < REFRESH_S * 1000,
    ),
  );

  // 3. GET /api/users/{id}: a client's access token against a session token, alternated.
  const clientToken = (await token({ grant_type: "authorization_code", code: await code("openid users:read"), redirect_uri: REDIRECT })).access_token;
  const url = `${server.url}/api/users/${session.user.id}`;
  const sides = [
    { name: "session token", token: session.token },
    { name: "client access token", token: clientToken },
  ];
  for (const side of sides) await autocannon({ url, headers: { authorization: `Bearer ${side.token}` }, connections: CONNECTIONS, duration: 1 });
  const rounds: { rps: number; cpuUs: number }[][] = [[], []];
  for (let round = 0; round < ROUNDS; round++) {
    for (const index of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const cpu = cpuMsOf(server.pid);
      const r = await autocannon({ url, headers: { authorization: `Bearer ${sides[index].token}` }, connections: CONNECTIONS, duration: ROUND_S });
      if (r.non2xx + r.errors > 0) throw new Error(`${sides[index].name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
      rounds[index].push({ rps: r.requests.total / ROUND_S, cpuUs: ((cpuMsOf(server.pid) - cpu) * 1000) / r.requests.total });
    }
  }
  const ratios = rounds[1].map((r, i) => r.rps / rounds[0][i].rps);
  const cpuRatios = rounds[1].map((r, i) => rounds[0][i].cpuUs / r.cpuUs);
  const reads = sides.map((side, i) => ({
    side: side.name,
    rps: Math.round(median(rounds[i].map((r) => r.rps))),
    cpuUsPerRequest: Math.round(median(rounds[i].map((r) => r.cpuUs))),
  }));
  const ratio = median(ratios);

  const result = {
    server: existsSync(binary) ? "binary" : "source",
    concurrency: CONCURRENCY,
    tokenEndpoint: { authorizationCode: byCode, refreshToken: byRefresh },
    readUser: {
      ...Object.fromEntries(reads.map((r) => [r.side, r])),
      ratio: Number(ratio.toFixed(2)),
      ratioByCpu: Number(median(cpuRatios).toFixed(2)),
      rounds: ratios.map((r) => Number(r.toFixed(2))),
    },
    target: { "client-token read ≥ 0.95× session-token read": ratio >= 0.95 ? "MET" : "NOT MET" },
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/oauth-server.json"), `${JSON.stringify(result, null, 2)}\n`);
  console.log(`token endpoint, authorization_code: ${byCode.perSecond}/s (${byCode.cpuUsPerRequest} µs server CPU each, ${byCode.requests} codes)`);
  console.log(`token endpoint, refresh_token:      ${byRefresh.perSecond}/s (${byRefresh.cpuUsPerRequest} µs server CPU each, ${byRefresh.requests} rotations)`);
  for (const r of reads) console.log(`GET /api/users/{id}, ${r.side}: ${r.rps}/s (${r.cpuUsPerRequest} µs server CPU each)`);
  console.log(
    `client token vs session token: ${ratio.toFixed(2)}× by req/s (rounds ${ratios.map((r) => r.toFixed(2)).join(" ")}), ${median(cpuRatios).toFixed(2)}× by CPU per request: ${result.target["client-token read ≥ 0.95× session-token read"]}`,
  );
} finally {
  await server.stop();
}
