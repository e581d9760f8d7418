/**
 * `usersvc serve --workers N`: N processes of this same executable share the port
 * (SO_REUSEPORT: the kernel spreads connections) and the one WAL database file.
 *
 * The primary migrates and bootstraps once, serves like any worker, and starts N-1 children
 * (marked by USERSVC_WORKER in their environment, so they skip migration and bootstrap). It
 * restarts a child that dies, forwards SIGTERM/SIGINT, waits for every child and exits 0.
 * A child whose primary is gone stops too.
 *
 * Metrics are summed at scrape time: every process serves its registry as JSON on a Unix
 * socket in a folder the primary creates, and the process a scrape lands on merges all of
 * them with prom-client's AggregatorRegistry (counters and histograms add up; gauges follow
 * their `aggregator`). Health and readiness are each process's own: every process holds its
 * own database connections, and a load balancer probes whichever one it reaches.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Registry } from "prom-client";
import type { Logger } from "pino";

/** Set in a child's environment: its worker number (1..N-1). */
export const WORKER_ENV = "USERSVC_WORKER";
/** The folder of the metrics sockets, shared by every process of one `serve`. */
const SOCKETS_ENV = "USERSVC_WORKER_SOCKETS";
const RESTART_DELAY_MS = 1000;

export const isWorkerChild = () => process.env[WORKER_ENV] !== undefined;

/** In a compiled executable argv[1] is the embedded entry (/$bunfs/…), not an argument to repeat. */
export const isCompiled = () => process.argv[1]?.startsWith("/$bunfs/") ?? false;

/** The command that started this process: `bun src/main.ts …` and the compiled binary alike. */
function ownCommand(): string[] {
  return [process.execPath, ...(isCompiled() ? [] : [process.argv[1]]), ...process.argv.slice(2)];
}

export interface MetricsPeers {
  /** Every live process's metrics, summed into one registry. */
  current(): Promise<Registry>;
  close(): void;
}

/** Serves this process's registry to its peers and reads theirs at scrape time. */
export function joinMetricsPeers(registry: () => Promise<Registry>, socketsDir: string): MetricsPeers {
  const own = join(socketsDir, `${process.pid}.sock`);
  const server = Bun.serve({ unix: own, fetch: async () => Response.json(await (await registry()).getMetricsAsJSON()) });
  return {
    async current() {
      const sockets = readdirSync(socketsDir)
        .filter((f) => f.endsWith(".sock"))
        .map((f) => join(socketsDir, f));
      const all = await Promise.all(
        sockets.map(async (socket) => {
          if (socket === own) return (await registry()).getMetricsAsJSON();
          try {
            const response = await fetch("http://worker/metrics", { unix: socket, signal: AbortSignal.timeout(2000) } as RequestInit);
            return (await response.json()) as Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;
          } catch {
            return undefined; // a worker that is restarting: its counters come back with it
          }
        }),
      );
      // Loaded here, by a process that has peers: it brings node:cluster along (see src/metrics.ts).
      const { default: AggregatorRegistry } = await import("prom-client/lib/cluster");
      return AggregatorRegistry.aggregate(all.filter((m) => m !== undefined));
    },
    close() {
      server.stop(true);
      rmSync(own, { force: true });
    },
  };
}

/** The primary's side: the sockets folder its children inherit. */
export function metricsSocketsDir(): string {
  const dir = process.env[SOCKETS_ENV] ?? mkdtempSync(join(tmpdir(), "usersvc-workers-"));
  process.env[SOCKETS_ENV] = dir;
  return dir;
}

export interface Supervisor {
  /** SIGTERM to every child, then wait for all of them. */
  stop(): Promise<void>;
}

/** Starts `count` children of this executable and keeps that many running until stop(). */
export function superviseWorkers(count: number, logger: Logger): Supervisor {
  const socketsDir = metricsSocketsDir();
  const children = new Map<number, Bun.Subprocess>();
  let stopping = false;

  const spawn = (worker: number) => {
    const child = Bun.spawn(ownCommand(), {
      env: { ...process.env, [WORKER_ENV]: String(worker), [SOCKETS_ENV]: socketsDir },
      stdio: ["ignore", "inherit", "inherit"],
    });
    children.set(worker, child);
    logger.info({ worker, pid: child.pid }, "worker started");
    void child.exited.then((code) => {
      rmSync(join(socketsDir, `${child.pid}.sock`), { force: true });
      if (stopping) return;
      logger.error({ worker, pid: child.pid, code, signal: child.signalCode }, "worker died: restarting it");
      setTimeout(() => !stopping && spawn(worker), RESTART_DELAY_MS);
    });
  };
  for (let worker = 1; worker <= count; worker++) spawn(worker);

  return {
    async stop() {
      stopping = true;
      for (const child of children.values()) child.kill("SIGTERM");
      await Promise.all([...children.values()].map((c) => c.exited));
      rmSync(socketsDir, { recursive: true, force: true });
    },
  };
}

/** A child stops when its primary is gone (killed with SIGKILL, crashed), instead of serving on alone. */
export function stopWhenOrphaned(stop: () => void) {
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && stop(), 1000).unref();
}
