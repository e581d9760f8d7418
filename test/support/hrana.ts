/**
 * Starts test/support/hrana-server.ts as its own process (never inside the test runner: its
 * synchronous SQLite calls would block the app under test) and talks to its test controls.
 * Each call gets a fresh database.
 */
import { resolve } from "node:path";

const SCRIPT = resolve(import.meta.dir, "hrana-server.ts");

export interface HranaServer {
  /** http://127.0.0.1:<port> */
  url: string;
  /** ws://127.0.0.1:<port> */
  wsUrl: string;
  /** Pipeline requests (HTTP round trips) since the last reset; version probes are not counted. */
  roundTrips(): Promise<number>;
  stats(): Promise<{ roundTrips: number; wsRequests: number; versionProbes: number; openStreams: number; streams: { id: string; roundTrips: number }[] }>;
  reset(): Promise<void>;
  /** Every later pipeline request waits this long before it runs. */
  setDelay(ms: number): Promise<void>;
  stop(): Promise<void>;
  /** SIGKILL, as a crash: the database file stays as the kill left it (for a restart on it). */
  kill(): Promise<void>;
  /** SIGSTOP, a hung primary: connections are still accepted (by the kernel), nothing is answered, until `resume` (SIGCONT). */
  pause(): void;
  resume(): void;
}

export interface HranaOptions {
  delayMs?: number;
  busyTimeoutMs?: number;
  /** Idle HTTP streams are rolled back and closed after this long. */
  streamIdleMs?: number;
  /** A fixed port and database file, to start it again where a killed one was (default: free port, fresh file). */
  port?: number;
  file?: string;
}

export async function startHranaServer(options: HranaOptions = {}): Promise<HranaServer> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>), HRANA_EXIT_WITH_STDIN: "1", PORT: String(options.port ?? 0) };
  delete env.HRANA_DB;
  if (options.file) env.HRANA_DB = options.file;
  if (options.delayMs !== undefined) env.HRANA_DELAY_MS = String(options.delayMs);
  if (options.busyTimeoutMs !== undefined) env.HRANA_BUSY_TIMEOUT_MS = String(options.busyTimeoutMs);
  if (options.streamIdleMs !== undefined) env.HRANA_STREAM_IDLE_MS = String(options.streamIdleMs);
  const proc = Bun.spawn([process.execPath, SCRIPT], { env, stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const port = await readPort(proc.stdout);
  if (!port) {
    proc.kill();
    throw new Error(`the Hrana test server did not start (exit ${await proc.exited})`);
  }
  const url = `http://127.0.0.1:${port}`;
  type Stats = Awaited<ReturnType<HranaServer["stats"]>>;
  const control = (path: string, init?: RequestInit) => fetch(`${url}/_test/${path}`, init).then((r) => r.json() as Promise<Stats>);
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}`,
    stats: () => control("stats"),
    roundTrips: async () => (await control("stats")).roundTrips,
    reset: async () => void (await control("reset", { method: "POST" })),
    setDelay: async (ms) => void (await control(`delay?ms=${ms}`, { method: "POST" })),
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
    async kill() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
    pause: () => proc.kill("SIGSTOP"),
    resume: () => proc.kill("SIGCONT"),
  };
}

/** The first stdout line is `listening <port>`. */
async function readPort(stdout: ReadableStream<Uint8Array>): Promise<number | undefined> {
  const decoder = new TextDecoder();
  let text = "";
  const reader = stdout.getReader();
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  // The rest of stdout is never read; the server writes nothing more.
  const match = /^listening (\d+)/.exec(text);
  return match ? Number(match[1]) : undefined;
}
