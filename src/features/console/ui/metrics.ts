/**
 * The operations charts' numbers, from two scrapes of /actuator/prometheus: the server keeps no
 * history (Prometheus does), so the page keeps its own samples. Pure functions, no DOM.
 */

/** One scrape, reduced to what the charts need. Counters are totals since the server started. */
export interface Scrape {
  /** When it was read, in ms. */
  at: number;
  requests: number;
  /** Requests answered 5xx. */
  errors: number;
  /** Cumulative request-duration buckets: upper bound in seconds (Infinity for +Inf) → count. */
  buckets: Map<number, number>;
  activeUsers?: number;
}

/** What happened between two scrapes. */
export interface Point {
  at: number;
  /** Requests per second. */
  rate: number;
  /** 99th percentile latency in ms, interpolated within its bucket as histogram_quantile does; null without requests. */
  p99: number | null;
  /** Per cent of the answers that were 5xx. */
  errorRate: number;
}

const LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

export function readScrape(text: string, at: number): Scrape {
  const scrape: Scrape = { at, requests: 0, errors: 0, buckets: new Map() };
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = LINE.exec(line);
    if (!match) continue;
    const [, name, labelText = "", raw] = match;
    const value = Number(raw);
    if (!Number.isFinite(value)) continue;
    if (name === "users_active") {
      scrape.activeUsers = value;
      continue;
    }
    if (!name.startsWith("http_server_requests_seconds_")) continue;
    const labels = Object.fromEntries([...labelText.matchAll(LABEL)].map((m) => [m[1], m[2]]));
    if (name === "http_server_requests_seconds_count") {
      scrape.requests += value;
      if (Number(labels.status) >= 500) scrape.errors += value;
    } else if (name === "http_server_requests_seconds_bucket" && labels.le !== undefined) {
      const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
      scrape.buckets.set(le, (scrape.buckets.get(le) ?? 0) + value);
    }
  }
  return scrape;
}

/** The point between two scrapes; undefined when the counters went back (a restarted server). */
export function pointBetween(before: Scrape, after: Scrape): Point | undefined {
  const seconds = (after.at - before.at) / 1000;
  const requests = after.requests - before.requests;
  if (seconds <= 0 || requests < 0 || after.errors < before.errors) return undefined;
  return {
    at: after.at,
    rate: requests / seconds,
    p99: quantile(0.99, before.buckets, after.buckets),
    errorRate: requests > 0 ? (100 * (after.errors - before.errors)) / requests : 0,
  };
}

function quantile(q: number, before: Map<number, number>, after: Map<number, number>): number | null {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => after.get(le)! - (before.get(le) ?? 0));
  const total = counts.at(-1) ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i] < rank) continue;
    const upper = bounds[i];
    const lower = i === 0 ? 0 : bounds[i - 1];
    // Past the last finite bound nothing is known but that bound.
    if (upper === Infinity) return lower * 1000;
    const below = i === 0 ? 0 : counts[i - 1];
    const inBucket = counts[i] - below;
    const share = inBucket > 0 ? (rank - below) / inBucket : 1;
    return (lower + (upper - lower) * share) * 1000;
  }
  return null;
}
