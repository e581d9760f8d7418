/**
 * Sign-in with a second factor against the real program: password + TOTP sign-ins per second
 * against password-only sign-ins (argon2id dominates both: target ≥ 0.9×), and passwordless
 * passkey sign-ins per second driven by the test kit's software authenticator (no password hash:
 * target ≥ 500/s). Beside each rate, the server's CPU per sign-in (/proc: every thread of the
 * process, argon2's included), which the neighbours on shared cores move far less than req/s.
 *
 * A TOTP step is accepted once per user, so each password + TOTP sign-in is a different user's
 * (BENCH_MFA_USERS of them, signing in with the next step's code, which ±1 step accepts: no wait
 * for the step after the enrolment's). After a warm-up, the two sides alternate in BENCH_ROUNDS
 * rounds, each a slice of the users on each side (60 a round by default, so a round's ragged end,
 * when fewer than CONCURRENCY sign-ins are in flight, weighs little), the side that goes first alternating too (drift
 * on a shared machine hits both alike); the ratio is the pooled one (all sign-ins of a side over
 * all its time), with the median of the rounds' beside it, and the ratio of CPU per sign-in.
 * Passkey sign-ins (options, then the assertion: the whole ceremony) run for BENCH_PASSKEY_S
 * seconds after a one-second warm-up, each worker with a credential of its own (a credential's
 * counter must only go forward); the bench's own CPU per sign-in (the client and its signatures,
 * on the same cores) is reported too.
 *
 *   bun bench/second-factors.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source),
 * BENCH_MFA_USERS (default 480), BENCH_ROUNDS (default 8), BENCH_CONCURRENCY (default 4), BENCH_PASSKEY_S (default 5).
 * Writes bench/results/second-factors.json.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cpuMsOf, startServer } from "../test/server-process";
import { SoftwareAuthenticator } from "../test/support/software-authenticator";
import { totpAt } from "../test/support/totp";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const USERS = Number(process.env.BENCH_MFA_USERS ?? 480);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const PASSKEY_S = Number(process.env.BENCH_PASSKEY_S ?? 5);
const RP = { id: "bench.example.test", origin: "https://bench.example.test" };
const PASSWORD = "BenchPassw0rd!";
const log = (message: string) => process.stderr.write(`[second-factors] ${message}\n`);

const server = await startServer(
  { PUBLIC_URL: RP.origin, LOGIN_MAX_FAILURES: "1000000", LOGIN_MAX_FAILURES_PER_IP: "1000000", PASSKEY_OPTIONS_MAX_PER_IP: "1000000", LOG_LEVEL: "error" },
  existsSync(binary) ? binary : undefined,
);

async function call(path: string, body?: unknown, token?: string) {
  const headers: Record<string, string> = { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) };
  const response = await fetch(`${server.url}${path}`, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = (await response.json()) as Record<string, unknown> & { data: Record<string, unknown> };
  if (response.status >= 300) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/** Runs `work` over the items with CONCURRENCY in flight: how many, in how long (ms), and the server's CPU for them (ms). */
async function measured<T>(items: T[], work: (item: T) => Promise<void>) {
  const queue = [...items];
  const cpu = cpuMsOf(server.pid);
  const own = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
  const { user, system } = process.cpuUsage(own);
  return { count: items.length, ms: performance.now() - started, cpuMs: cpuMsOf(server.pid) - cpu, benchCpuMs: (user + system) / 1000 };
}
type Measured = Awaited<ReturnType<typeof measured>>;

const perSecond = (m: Pick<Measured, "count" | "ms">) => Math.round((m.count / m.ms) * 1000 * 10) / 10;
const cpuPerSignIn = (m: Pick<Measured, "count" | "cpuMs">) => Math.round((m.cpuMs / m.count) * 100) / 100;
const pooled = (all: Measured[]) =>
  all.reduce((sum, m) => ({ count: sum.count + m.count, ms: sum.ms + m.ms, cpuMs: sum.cpuMs + m.cpuMs, benchCpuMs: sum.benchCpuMs + m.benchCpuMs }));
const benchCpuPerSignIn = (m: Pick<Measured, "count" | "benchCpuMs">) => Math.round((m.benchCpuMs / m.count) * 100) / 100;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** `count` users with the bench's password, made by the ADMIN, CONCURRENCY at a time. */
async function makeUsers(prefix: string, count: number) {
  const emails = Array.from({ length: count }, (_, i) => `${prefix}${i}@bench.example.test`);
  await measured(emails, async (email) => {
    await call("/api/users", { name: `Bench ${email}`, email, password: PASSWORD }, server.token);
  });
  return emails;
}

const signIn = async (email: string) => (await call("/api/auth/login", { email, password: PASSWORD })).data;

try {
  log(`${USERS} users with TOTP, ${USERS} without; ${CONCURRENCY} in flight; load average ${loadAverage()}`);
  const plain = await makeUsers("pwd", USERS);
  const enrolled = await makeUsers("totp", USERS);
  const secrets = new Map<string, string>();
  await measured(enrolled, async (email) => {
    const { token } = (await signIn(email)) as { token: string };
    const { secret } = (await call("/api/account/mfa/totp", undefined, token)) as unknown as { secret: string };
    await call("/api/account/mfa/totp/confirm", { code: totpAt(secret, Date.now()) }, token);
    secrets.set(email, secret);
  });

  const passwordOnly = (email: string) =>
    signIn(email).then((data) => {
      if (typeof data.token !== "string") throw new Error("password-only sign-in gave no token");
    });
  // The enrolment used each user's current step: the next step's code (within ±1) is one after it.
  const withTotp = async (email: string) => {
    const first = await signIn(email);
    if (first.mfaRequired !== true) throw new Error("no second step asked");
    const done = await call("/api/auth/login/mfa", { mfaToken: first.mfaToken, code: totpAt(secrets.get(email)!, Date.now() + 30_000) });
    if (typeof done.data.token !== "string") throw new Error("password + TOTP sign-in gave no token");
  };
  await measured(plain.slice(0, 30), passwordOnly); // warm-up
  const slice = Math.floor(USERS / ROUNDS);
  const rounds: { passwordOnly: Measured; passwordTotp: Measured }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const side = (users: string[], work: (email: string) => Promise<void>) => () => measured(users.slice(r * slice, (r + 1) * slice), work);
    const pwd = side(plain, passwordOnly);
    const totp = side(enrolled, withTotp);
    // The side that goes first alternates: neither always follows the other's tail.
    if (r % 2 === 0) rounds.push({ passwordOnly: await pwd(), passwordTotp: await totp() });
    else {
      const passwordTotp = await totp();
      rounds.push({ passwordOnly: await pwd(), passwordTotp });
    }
  }
  const pwdAll = pooled(rounds.map((round) => round.passwordOnly));
  const totpAll = pooled(rounds.map((round) => round.passwordTotp));
  const totp = {
    passwordOnlyPerSecond: perSecond(pwdAll),
    passwordTotpPerSecond: perSecond(totpAll),
    ratio: +(perSecond(totpAll) / perSecond(pwdAll)).toFixed(3),
    medianRoundRatio: median(rounds.map((round) => +(perSecond(round.passwordTotp) / perSecond(round.passwordOnly)).toFixed(3))),
    serverCpuMsPerSignIn: { passwordOnly: cpuPerSignIn(pwdAll), passwordTotp: cpuPerSignIn(totpAll) },
    // The bench's own CPU per sign-in (its requests, on the same 2 cores): two requests a TOTP sign-in.
    benchCpuMsPerSignIn: { passwordOnly: benchCpuPerSignIn(pwdAll), passwordTotp: benchCpuPerSignIn(totpAll) },
    // Sign-ins per CPU-second, password + TOTP against password-only.
    cpuRatio: +(pwdAll.cpuMs / pwdAll.count / (totpAll.cpuMs / totpAll.count)).toFixed(3),
  };
  log(`rounds (password-only/s, password + TOTP/s): ${rounds.map((round) => `${perSecond(round.passwordOnly)}/${perSecond(round.passwordTotp)}`).join(", ")}`);
  log(
    `password + TOTP ${totp.passwordTotpPerSecond}/s against password-only ${totp.passwordOnlyPerSecond}/s: ${totp.ratio}× (median of the rounds ${totp.medianRoundRatio}×); ` +
      `server CPU per sign-in ${totp.serverCpuMsPerSignIn.passwordTotp} against ${totp.serverCpuMsPerSignIn.passwordOnly} ms: ${totp.cpuRatio}× (target ≥ 0.9×); ` +
      `the bench's own ${totp.benchCpuMsPerSignIn.passwordTotp} against ${totp.benchCpuMsPerSignIn.passwordOnly} ms; load average ${loadAverage()}`,
  );

  // Passkeys: one credential per worker, each registered by a signed-in user of its own.
  const holders = await makeUsers("key", CONCURRENCY);
  const devices: SoftwareAuthenticator[] = [];
  for (const email of holders) {
    const { token } = (await signIn(email)) as { token: string };
    const device = new SoftwareAuthenticator(RP.id, RP.origin);
    const options = await call("/api/account/passkeys/options", undefined, token);
    await call("/api/account/passkeys", { name: "bench", response: device.register(options as never) }, token);
    devices.push(device);
  }
  const passkeyFor = async (ms: number) => {
    let count = 0;
    const cpu = cpuMsOf(server.pid);
    const own = process.cpuUsage();
    const started = performance.now();
    await Promise.all(
      devices.map(async (device) => {
        while (performance.now() - started < ms) {
          const options = (await call("/api/auth/passkey/options")).data as { challenge: string };
          const done = await call("/api/auth/passkey", { response: device.assert(options) });
          if (typeof done.data.token !== "string") throw new Error("passkey sign-in gave no token");
          count++;
        }
      }),
    );
    const { user, system } = process.cpuUsage(own);
    return { count, ms: performance.now() - started, cpuMs: cpuMsOf(server.pid) - cpu, benchCpuMs: (user + system) / 1000 };
  };
  await passkeyFor(1000); // warm-up
  const passkeyRun = await passkeyFor(PASSKEY_S * 1000);
  const passkey = {
    perSecond: perSecond(passkeyRun),
    signIns: passkeyRun.count,
    serverCpuMsPerSignIn: cpuPerSignIn(passkeyRun),
    benchCpuMsPerSignIn: Math.round((passkeyRun.benchCpuMs / passkeyRun.count) * 100) / 100,
  };
  log(
    `passkey sign-ins (options + assertion) ${passkey.perSecond}/s over ${passkey.signIns} (target ≥ 500/s); server CPU ${passkey.serverCpuMsPerSignIn} ms per sign-in ` +
      `(${Math.round(1000 / passkey.serverCpuMsPerSignIn)} per CPU-second), the bench's own ${passkey.benchCpuMsPerSignIn} ms; load average ${loadAverage()}`,
  );

  const result = {
    usersPerSide: USERS,
    concurrency: CONCURRENCY,
    loadAverage: loadAverage(),
    rounds: rounds.map((round) => ({ passwordOnly: perSecond(round.passwordOnly), passwordTotp: perSecond(round.passwordTotp) })),
    totp,
    totpRatio: totp.ratio,
    totpTarget: "≥ 0.9× password-only",
    passkey,
    passkeySignInsPerSecond: passkey.perSecond,
    passkeyTarget: "≥ 500/s",
  };
  mkdirSync(join(import.meta.dir, "results"), { recursive: true });
  writeFileSync(join(import.meta.dir, "results/second-factors.json"), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await server.stop();
}
