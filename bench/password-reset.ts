/**
 * Password-reset requests must not tell which addresses have accounts, by their answer (the
 * tests prove identical status and body) or by their time (measured here, not in a unit test).
 * Requests for a registered and an unregistered address alternate against the real program,
 * one at a time; the report gives each side's median and p90 and their ratio.
 *
 *   bun bench/password-reset.ts        (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (default dist/usersvc when it exists, else the source),
 * BENCH_RESET_SAMPLES per side (default 300). Writes bench/results/password-reset.json.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startServer } from "../test/server-process";

const ROOT = resolve(import.meta.dir, "..");
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const SAMPLES = Number(process.env.BENCH_RESET_SAMPLES ?? 300);
const log = (message: string) => process.stderr.write(`[password-reset] ${message}\n`);

const server = await startServer({ RESET_MAX_REQUESTS: "1000000", RESET_MAX_REQUESTS_PER_IP: "1000000", LOG_LEVEL: "error" }, existsSync(binary) ? binary : undefined);
try {
  const known = "known@reset.example.com";
  const registered = await fetch(`${server.url}/api/auth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      name: "Bench Reset",
      email: known,
      password: "Passw0rd!",
      confirmPassword: "Passw0rd!",
      age: 30,
      address: { city: "a", district: "b", detail: "c" },
      skills: ["x"],
    }),
  });
  if (registered.status !== 201) throw new Error(`registration answered ${registered.status}`);

  const request = async (email: string) => {
    const started = performance.now();
    const response = await fetch(`${server.url}/api/auth/password-reset/request`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email }),
    });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`reset request answered ${response.status}`);
    return performance.now() - started;
  };
  // Warm-up, then alternate so both sides see the same machine noise.
  for (let i = 0; i < 30; i++) await request(i % 2 ? known : `warm${i}@reset.example.com`);
  const times = { known: [] as number[], unknown: [] as number[] };
  for (let i = 0; i < SAMPLES; i++) {
    times.known.push(await request(known));
    times.unknown.push(await request("nobody@reset.example.com"));
  }
  const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
  const side = (values: number[]) => ({ medianMs: +quantile(values, 0.5).toFixed(3), p90Ms: +quantile(values, 0.9).toFixed(3) });
  const result = {
    samplesPerSide: SAMPLES,
    known: side(times.known),
    unknown: side(times.unknown),
    medianRatio: +(quantile(times.unknown, 0.5) / quantile(times.known, 0.5)).toFixed(3),
  };
  log(`known ${JSON.stringify(result.known)}, unknown ${JSON.stringify(result.unknown)}, median unknown/known ${result.medianRatio}`);
  mkdirSync(join(import.meta.dir, "results"), { recursive: true });
  writeFileSync(join(import.meta.dir, "results/password-reset.json"), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  await server.stop();
}
