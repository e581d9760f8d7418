/**
 * usersvc from source as a child process with its stdout (the JSON log) and stderr (plain lines:
 * the first-run link) collected as they come; with none of the environment's ADMIN_*, PUBLIC_URL
 * or BASE_PATH, so a fresh data folder is a first run.
 */
import { join, resolve } from "node:path";
import { freePort } from "../server-process";

const ROOT = resolve(import.meta.dir, "../..");
const SECRET = "first-run-secret-".padEnd(80, "f");

export function program(args: string[], env: Record<string, string>) {
  const { ADMIN_EMAIL: _email, ADMIN_PASSWORD: _password, PUBLIC_URL: _url, BASE_PATH: _base, ...inherited } = process.env;
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    env: { ...inherited, JWT_SECRET: SECRET, HOST: "127.0.0.1", LOG_LEVEL: "info", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = { stdout: "", stderr: "" };
  const collect = async (stream: ReadableStream<Uint8Array>, into: "stdout" | "stderr") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) out[into] += decoder.decode(chunk, { stream: true });
  };
  const collected = Promise.all([collect(proc.stdout, "stdout"), collect(proc.stderr, "stderr")]);
  return { proc, out, collected };
}

/** `usersvc serve` on a port, answering health; `stop` sends SIGTERM and waits for every line. */
export async function serveProgram(dataDir: string, env: Record<string, string> = {}) {
  const port = freePort();
  const running = program(["serve"], { DATA_DIR: dataDir, DATABASE_URL: `file:${join(dataDir, "usersvc.db")}`, PORT: String(port), ...env });
  const origin = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const health = await fetch(`${origin}${env.BASE_PATH ?? ""}/actuator/health`).catch(() => undefined);
    if (health?.ok) break;
    if (i > 300 || running.proc.exitCode !== null) throw new Error(`usersvc did not start: ${running.out.stderr}`);
    await Bun.sleep(50);
  }
  return {
    port,
    url: `${origin}${env.BASE_PATH ?? ""}`,
    out: running.out,
    async stop() {
      running.proc.kill("SIGTERM");
      await running.proc.exited;
      await running.collected;
    },
  };
}

/** stderr's lines once it has one (the notice follows the first answers by a moment: it is written once listening). */
export async function stderrLines(out: { stderr: string }) {
  for (let i = 0; i < 100 && !out.stderr.includes("\n"); i++) await Bun.sleep(50);
  return linesOf(out.stderr);
}

export const linesOf = (text: string) => text.split("\n").filter(Boolean);
