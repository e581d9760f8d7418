/**
 * The remote-primary benches' load (bench/remote.ts, bench/multi.ts): autocannon (devDependency),
 * a one-second warm-up, then the measured run. Environment: BENCH_DURATION seconds (default 8),
 * BENCH_CONNECTIONS (default 32), BENCH_RTT_MS (the primary's wait per round trip, default 20).
 */
export const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
export const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const WARMUP_S = 1;

type Result = { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number };
const { default: autocannon } = (await import("autocannon" as string)) as { default: (options: object) => Promise<Result> };

export interface Figure {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

/** autocannon `options` (url, method, headers, body …) on CONNECTIONS connections for DURATION_S, after the warm-up. */
export async function load(options: object): Promise<Figure> {
  await autocannon({ ...options, connections: CONNECTIONS, duration: WARMUP_S });
  const r = await autocannon({ ...options, connections: CONNECTIONS, duration: DURATION_S });
  return { rps: Math.round(r.requests.average), p50Ms: r.latency.p50, p99Ms: r.latency.p99, non2xx: r.non2xx + r.errors };
}
