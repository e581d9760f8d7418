/**
 * Sign-in with a second factor against the real program: password + TOTP sign-ins per second
 * against password-only sign-ins (argon2id dominates both: target ≥ 0.9×), and passwordless
 * passkey sign-ins per second driven by the test kit's software authenticator (no password hash:
 * target ≥ 500/s).
 *
 * A TOTP step is accepted once per user, so each password + TOTP sign-in is a different user's
 * (BENCH_MFA_USERS of them). After a warm-up, the two sides alternate in BENCH_ROUNDS rounds, each
 * round a slice of the users on each side (drift on a shared machine hits both alike); the ratio is
 * the median of the rounds'. Passkey sign-ins (options, then the assertion: the whole ceremony) run
 * for BENCH_PASSKEY_S seconds, each worker with a credential of its own (a credential's counter
 * must only go forward).
 *
 *   bun bench/second-factors.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source),
 * BENCH_MFA_USERS (default 150), BENCH_ROUNDS (default 5), BENCH_CONCURRENCY (default 4), BENCH_PASSKEY_S (default 5).
 * Writes bench/results/second-factors.json.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startServer } from "../test/server-process";
import { SoftwareAuthenticator } from "../test/support/software-authenticator";
import { totpAt } from "../test/support/totp";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const USERS = Number(process.env.BENCH_MFA_USERS ?? 150);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
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

/** `count` users with the bench's password, made by the ADMIN. */
async function makeUsers(prefix: string, count: number) {
  const emails: string[] = [];
  for (let i = 0; i < count; i++) {
    const email = `${prefix}${i}@bench.example.test`;
    await call("/api/users", { name: `Bench ${prefix} ${i}`, email, password: PASSWORD }, server.token);
    emails.push(email);
  }
  return emails;
}

const signIn = async (email: string) => (await call("/api/auth/login", { email, password: PASSWORD })).data;

/** Runs `work` over the items with CONCURRENCY in flight; answers the items done per second. */
async function perSecond<T>(items: T[], work: (item: T) => Promise<void>) {
  const queue = [...items];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
  return Math.round((items.length / (performance.now() - started)) * 1000 * 10) / 10;
}

try {
  log(`${USERS} users with TOTP, ${USERS} without; ${CONCURRENCY} in flight`);
  const plain = await makeUsers("pwd", USERS);
  const enrolled = await makeUsers("totp", USERS);
  const secrets = new Map<string, string>();
  for (const email of enrolled) {
    const { token } = (await signIn(email)) as { token: string };
    const { secret } = (await call("/api/account/mfa/totp", undefined, token)) as unknown as { secret: string };
    await call("/api/account/mfa/totp/confirm", { code: totpAt(secret, Date.now()) }, token);
    secrets.set(email, secret);
  }
  // The enrolment used each user's current step: their sign-ins start from the next one.
  await Bun.sleep(30_000 - (Date.now() % 30_000) + 200);

  const passwordOnly = (email: string) =>
    signIn(email).then((data) => {
      if (typeof data.token !== "string") throw new Error("password-only sign-in gave no token");
    });
  const withTotp = async (email: string) => {
    const first = await signIn(email);
    if (first.mfaRequired !== true) throw new Error("no second step asked");
    const done = await call("/api/auth/login/mfa", { mfaToken: first.mfaToken, code: totpAt(secrets.get(email)!, Date.now()) });
    if (typeof done.data.token !== "string") throw new Error("password + TOTP sign-in gave no token");
  };
  await perSecond(plain.slice(0, 30), passwordOnly); // warm-up
  const slice = Math.floor(USERS / ROUNDS);
  const rounds: { passwordOnly: number; passwordTotp: number; ratio: number }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const pwd = await perSecond(plain.slice(r * slice, (r + 1) * slice), passwordOnly);
    const totp = await perSecond(enrolled.slice(r * slice, (r + 1) * slice), withTotp);
    rounds.push({ passwordOnly: pwd, passwordTotp: totp, ratio: +(totp / pwd).toFixed(3) });
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const ratio = median(rounds.map((round) => round.ratio));
  log(`rounds (password-only/s, password + TOTP/s): ${rounds.map((round) => `${round.passwordOnly}/${round.passwordTotp}`).join(", ")}; median ratio ${ratio}×`);

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
  let passkeySignIns = 0;
  const until = performance.now() + PASSKEY_S * 1000;
  const started = performance.now();
  await Promise.all(
    devices.map(async (device) => {
      while (performance.now() < until) {
        const options = (await call("/api/auth/passkey/options")).data as { challenge: string };
        const done = await call("/api/auth/passkey", { response: device.assert(options) });
        if (typeof done.data.token !== "string") throw new Error("passkey sign-in gave no token");
        passkeySignIns++;
      }
    }),
  );
  const passkeyPerSecond = Math.round((passkeySignIns / (performance.now() - started)) * 1000 * 10) / 10;
  log(`passkey sign-ins (options + assertion) ${passkeyPerSecond}/s over ${passkeySignIns}`);

  const result = {
    usersPerSide: USERS,
    concurrency: CONCURRENCY,
    rounds,
    totpRatio: ratio,
    totpTarget: "≥ 0.9× password-only",
    passkeySignInsPerSecond: passkeyPerSecond,
    passkeyTarget: "≥ 500/s",
  };
  mkdirSync(join(import.meta.dir, "results"), { recursive: true });
  writeFileSync(join(import.meta.dir, "results/second-factors.json"), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await server.stop();
}
