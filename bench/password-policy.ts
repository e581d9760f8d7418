/**
 * What PASSWORD_POLICY=strict costs: the check's time per password, the memory of the
 * common-password list once it is unpacked, and the idle RSS it adds to a server (the list is
 * unpacked on the first strict check only, so an idle strict server should weigh what a seed one
 * does). Targets: < 5 µs a check, < 2 MiB of idle RSS.
 *
 *   bun bench/password-policy.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source),
 * BENCH_POLICY_CHECKS (default 200,000). Writes bench/results/password-policy.json.
 * The idle figure against main's binary: `USERSVC_BINARY=… npm run bench -- --idle 9`.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { passwordViolations } from "../src/security/password-policy";
import { freePort, rssOf } from "../test/server-process";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const CHECKS = Number(process.env.BENCH_POLICY_CHECKS ?? 200_000);
const log = (message: string) => process.stderr.write(`[password-policy] ${message}\n`);
const MiB = (bytes: number) => Math.round((bytes / 1024 / 1024) * 100) / 100;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The check in this process: the first one (which unpacks the list) apart, then CHECKS of a mix. */
async function inProcess() {
  const deps = { config: { passwordPolicy: "strict" as const }, logger: { warn() {} } };
  Bun.gc(true);
  const before = process.memoryUsage().rss;
  const t0 = performance.now();
  await passwordViolations(deps, "a first password", "someone@example.com", "password");
  const firstMs = performance.now() - t0;
  Bun.gc(true);
  const listBytes = process.memoryUsage().rss - before;
  // Refused and accepted ones, ASCII and not, short and long: the answer's shape does not matter, only the work.
  const mix = ["Password1!", "Qwerty123!", "P@ssw0rd", "correct horse battery staple", "Tr0ub4dor&3", "春眠不覺曉 處處聞啼鳥 in my quiet garden", "x7Kq!pL2#mZ9", "someone1234"];
  for (let i = 0; i < 10_000; i++) await passwordViolations(deps, mix[i % mix.length], "someone@example.com", "password");
  const t1 = performance.now();
  for (let i = 0; i < CHECKS; i++) await passwordViolations(deps, mix[i % mix.length], "someone@example.com", "password");
  const perCheckUs = ((performance.now() - t1) * 1000) / CHECKS;
  return { firstCheckMs: +firstMs.toFixed(2), listMiB: MiB(listBytes), perCheckUs: +perCheckUs.toFixed(3) };
}

/** A server on a fresh data folder with no ADMIN_* (an admin's bootstrap would run the check at start), ready to answer. */
async function serve(policy: "seed" | "strict") {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-policy-"));
  const port = freePort();
  const argv = existsSync(binary) ? [binary] : [process.execPath, join(ROOT, "src/main.ts")];
  const env = {
    PATH: process.env.PATH ?? "",
    DATA_DIR: dir,
    JWT_SECRET: "bench-policy-".padEnd(80, "s"),
    LOG_LEVEL: "warn",
    HOST: "127.0.0.1",
    PORT: String(port),
    PASSWORD_POLICY: policy,
  };
  const proc = Bun.spawn([...argv, "serve"], { cwd: dir, env, stdout: "ignore", stderr: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  for (
    let i = 0;
    !(await fetch(`${url}/actuator/health`).then(
      (r) => r.ok,
      () => false,
    ));
    i++
  ) {
    if (i > 200) throw new Error(`usersvc (${policy}) did not start`);
    await Bun.sleep(50);
  }
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  return { url, rss: () => rssOf(proc.pid), stop };
}

/** Idle RSS of fresh seed and strict servers, alternating (3 each), then after one registration each. */
async function servers() {
  const idle = { seed: [] as number[], strict: [] as number[] };
  const used = { seed: [] as number[], strict: [] as number[] };
  for (let round = 0; round < 3; round++) {
    for (const policy of ["seed", "strict"] as const) {
      const server = await serve(policy);
      try {
        await Bun.sleep(1000);
        idle[policy].push(server.rss());
        // Valid under both policies: the seed's composition, and on no list.
        const password = `Aa1!${crypto.randomUUID().replaceAll("-", "")}`.slice(0, 20);
        const registered = await fetch(`${server.url}/api/auth/register`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            name: "Bench Policy",
            email: `policy${round}@bench.example.com`,
            password,
            confirmPassword: password,
            age: 30,
            address: { city: "a", district: "b", detail: "c" },
            skills: ["x"],
          }),
        });
        if (registered.status !== 201) throw new Error(`registration under ${policy} answered ${registered.status}`);
        await Bun.sleep(500);
        used[policy].push(server.rss());
      } finally {
        await server.stop();
      }
    }
  }
  return {
    binary: existsSync(binary) ? binary : "source",
    idleMiB: { seed: MiB(median(idle.seed)), strict: MiB(median(idle.strict)) },
    idleAddedMiB: MiB(median(idle.strict) - median(idle.seed)),
    afterOneRegistrationMiB: { seed: MiB(median(used.seed)), strict: MiB(median(used.strict)) },
  };
}

const checks = await inProcess();
log(`first strict check (unpacks the list) ${checks.firstCheckMs} ms, +${checks.listMiB} MiB; then ${checks.perCheckUs} µs a check`);
const rss = await servers();
log(
  `idle RSS seed ${rss.idleMiB.seed} MiB, strict ${rss.idleMiB.strict} MiB (added ${rss.idleAddedMiB} MiB); after one registration ${JSON.stringify(rss.afterOneRegistrationMiB)}`,
);
const targets = { perCheck: checks.perCheckUs < 5 ? "MET" : "NOT MET", idleAdded: rss.idleAddedMiB < 2 ? "MET" : "NOT MET" };
log(`targets: < 5 µs a check ${targets.perCheck}; < 2 MiB idle RSS ${targets.idleAdded}`);
mkdirSync(join(import.meta.dir, "results"), { recursive: true });
writeFileSync(join(import.meta.dir, "results/password-policy.json"), `${JSON.stringify({ ...checks, ...rss, targets }, null, 2)}\n`);
