/**
 * Sign-in with another provider against the real program, the provider a real OpenID Provider on
 * loopback (oidc-provider, test/support/openid-provider.ts, in this process: its CPU is not the
 * server's):
 *
 * - The callback-to-login-answer path: GET /api/auth/oidc/corp/callback (state taken, the code
 *   exchanged at the provider, the ID token verified by its JWKS, the account found, the one-time
 *   code kept) then POST /api/auth/oidc/exchange (the verifier checked, the session made): its p50
 *   and the server's CPU per sign-in, for users whose identity is linked already (each signed in
 *   once before), against a password sign-in (argon2id) of users of the same server, in
 *   alternating rounds. The provider's part of the browser's trip (its login and redirects) is
 *   done before each round and is not timed: the authorization codes are redeemed within their minute.
 * - Idle RSS with a provider configured against none: fresh servers, one second after start, the
 *   median of BENCH_IDLE_SAMPLES each (target ≤ +2 MiB: openid-client is loaded at the first sign-in).
 *
 *   bun bench/federation.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source), BENCH_ROUNDS
 * (default 6), BENCH_ROUND_SIZE (default 30), BENCH_IDLE_SAMPLES (default 3). Sign-ins run one at a
 * time: p50 is a single sign-in's latency. Writes bench/results/federation.json.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cpuMsOf, type ServerProcess, startServer } from "../test/server-process";
import { type IdpUser, startOpenIdProvider, throughProvider } from "../test/support/openid-provider";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const command = existsSync(binary) ? binary : undefined;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const ROUND_SIZE = Number(process.env.BENCH_ROUND_SIZE ?? 30);
const IDLE_SAMPLES = Number(process.env.BENCH_IDLE_SAMPLES ?? 3);
const PASSWORD = "BenchPassw0rd!";
const log = (message: string) => process.stderr.write(`[federation] ${message}\n`);
const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mib = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
const round2 = (n: number) => Math.round(n * 100) / 100;

const USERS = ROUNDS * ROUND_SIZE;
const users: Record<string, IdpUser> = Object.fromEntries(
  Array.from({ length: USERS }, (_, i) => [`fed${i}`, { email: `fed${i}@bench.example.test`, email_verified: true, name: `Bench Fed ${i}` }]),
);
const redirectUris: string[] = [];
const idp = await startOpenIdProvider({ redirectUris, users });
const providerEnv = {
  OIDC_PROVIDERS: "corp",
  OIDC_CORP_ISSUER: idp.issuer,
  OIDC_CORP_CLIENT_ID: idp.clientId,
  OIDC_CORP_CLIENT_SECRET: idp.clientSecret,
};
const limits = {
  LOG_LEVEL: "error",
  LOGIN_MAX_FAILURES: "1000000",
  LOGIN_MAX_FAILURES_PER_IP: "1000000",
  OIDC_START_MAX_PER_IP: "1000000",
  REGISTER_MAX_PER_IP: "1000000",
};

async function post(server: ServerProcess, path: string, body: unknown, token?: string) {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as { data: Record<string, unknown> };
  if (response.status >= 300) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/** The browser's trip up to our callback, untimed: the callback URL the provider sends it to, and the page's verifier. */
async function toCallback(server: ServerProcess, who: string) {
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const start = await fetch(`${server.url}/api/auth/oidc/corp/start?returnTo=%2Faccount&codeChallenge=${challenge}`, { redirect: "manual" });
  idp.loginAs(who);
  const callback = await throughProvider(start.headers.get("location") ?? "", `${server.url}/api/auth/oidc/corp/callback`);
  return { callback, verifier };
}

/** The timed part: the callback, then the exchange. Its wall time (ms). */
async function callbackToAnswer(server: ServerProcess, trip: { callback: string; verifier: string }) {
  const started = performance.now();
  const back = await fetch(trip.callback, { redirect: "manual" });
  const code = new URLSearchParams((back.headers.get("location") ?? "").split("#")[1]).get("code");
  if (!code) throw new Error(`the callback gave no code: ${back.headers.get("location")}`);
  const answer = await post(server, "/api/auth/oidc/exchange", { code, codeVerifier: trip.verifier });
  if (typeof answer.data.token !== "string") throw new Error("the exchange gave no token");
  return performance.now() - started;
}

async function passwordSignIn(server: ServerProcess, email: string) {
  const started = performance.now();
  const answer = await post(server, "/api/auth/login", { email, password: PASSWORD });
  if (typeof answer.data.token !== "string") throw new Error("the login gave no token");
  return performance.now() - started;
}

/** `work` over the items one at a time: each one's latency, and the server's CPU for them all (ms). */
async function measured<T>(server: ServerProcess, items: T[], work: (item: T) => Promise<number>) {
  const cpu = cpuMsOf(server.pid);
  const latencies: number[] = [];
  for (const item of items) latencies.push(await work(item));
  return { latencies, cpuMs: cpuMsOf(server.pid) - cpu };
}

/** Idle RSS one second after start: a fresh server with `env`, stopped again. */
async function idleRss(env: Record<string, string>) {
  const server = await startServer({ LOG_LEVEL: "error", ...env }, command);
  try {
    await Bun.sleep(1000);
    return server.rss();
  } finally {
    await server.stop();
  }
}

const server = await startServer((origin) => {
  redirectUris.push(`${origin}/api/auth/oidc/corp/callback`);
  return { ...limits, ...providerEnv };
}, command);
try {
  log(`${USERS} provider users and ${USERS} password users, ${ROUNDS} rounds of ${ROUND_SIZE}, one sign-in at a time; load average ${loadAverage()}`);
  const ids = Object.keys(users);
  // Each provider user signs in once first: the timed sign-ins find their identity linked.
  for (const who of ids) await callbackToAnswer(server, await toCallback(server, who));
  const emails = Array.from({ length: USERS }, (_, i) => `pwd${i}@bench.example.test`);
  for (const email of emails) await post(server, "/api/users", { name: `Bench ${email}`, email, password: PASSWORD }, server.token);
  for (const email of emails.slice(0, 10)) await passwordSignIn(server, email); // warm-up

  const federated: Awaited<ReturnType<typeof measured>>[] = [];
  const password: Awaited<ReturnType<typeof measured>>[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const slice = <T>(all: T[]) => all.slice(r * ROUND_SIZE, (r + 1) * ROUND_SIZE);
    const trips: Awaited<ReturnType<typeof toCallback>>[] = [];
    for (const who of slice(ids)) trips.push(await toCallback(server, who));
    const fed = () => measured(server, trips, (trip) => callbackToAnswer(server, trip));
    const pwd = () => measured(server, slice(emails), (email) => passwordSignIn(server, email));
    // The side that goes first alternates (the provider's codes live a minute: its trips were just made).
    if (r % 2 === 0) {
      federated.push(await fed());
      password.push(await pwd());
    } else {
      password.push(await pwd());
      federated.push(await fed());
    }
  }
  const summary = (all: typeof federated) => {
    const latencies = all.flatMap((m) => m.latencies);
    const cpuMs = all.reduce((sum, m) => sum + m.cpuMs, 0);
    return { signIns: latencies.length, p50Ms: round2(median(latencies)), serverCpuMsPerSignIn: round2(cpuMs / latencies.length) };
  };
  const fed = summary(federated);
  const pwd = summary(password);
  log(
    `callback-to-login-answer p50 ${fed.p50Ms} ms, server CPU ${fed.serverCpuMsPerSignIn} ms per sign-in; ` +
      `password (argon2id) sign-in p50 ${pwd.p50Ms} ms, server CPU ${pwd.serverCpuMsPerSignIn} ms; load average ${loadAverage()}`,
  );
  await server.stop();

  // Idle RSS: none configured against one provider, alternating, fresh servers.
  const none: number[] = [];
  const configured: number[] = [];
  for (let i = 0; i < IDLE_SAMPLES; i++) {
    none.push(await idleRss({}));
    configured.push(await idleRss(providerEnv));
  }
  const idle = {
    noneMiB: mib(median(none)),
    configuredMiB: mib(median(configured)),
    deltaMiB: mib(median(configured) - median(none)),
    samplesMiB: { none: none.map(mib), configured: configured.map(mib) },
    target: "≤ +2 MiB",
  };
  log(
    `idle RSS ${idle.configuredMiB} MiB with a provider configured, ${idle.noneMiB} MiB with none: ${idle.deltaMiB >= 0 ? "+" : ""}${idle.deltaMiB} MiB (target ≤ +2 MiB); samples ${JSON.stringify(idle.samplesMiB)}`,
  );

  const result = { rounds: ROUNDS, roundSize: ROUND_SIZE, loadAverage: loadAverage(), federated: fed, password: pwd, idle };
  mkdirSync(join(import.meta.dir, "results"), { recursive: true });
  writeFileSync(join(import.meta.dir, "results/federation.json"), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await server.stop().catch(() => undefined);
  await idp.stop();
}
