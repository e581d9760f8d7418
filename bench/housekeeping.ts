/**
 * The outbox sender's token erasing (its housekeeping pass, about once a second) in-process on
 * the native driver: an outbox of ROWS settled notifications, a few rows still holding tokens
 * (pending mail), and PER_PASS settled rows whose tokens each pass erases. Prints the time of
 * the erasing statement per pass (median, p90) and SQLite's plan for it.
 *
 *   bun bench/housekeeping.ts [rows] [passes]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database as Connection, type SQLQueryBindings } from "bun:sqlite";
import { sql } from "drizzle-orm";
import { openDatabase } from "../src/db/open";
import { migrate } from "../src/db/migrate";
import { eraseTokens } from "../src/store/account-tokens";

const ROWS = Number(process.argv[2] ?? 20_000);
const PASSES = Number(process.argv[3] ?? 200);
/** Tokens a pass finds to erase (mail sent since the last pass), and tokens still waiting for their mail. */
const PER_PASS = 5;
const WAITING = 20;

const dir = mkdtempSync(join(tmpdir(), "usersvc-housekeeping-"));
const path = join(dir, "h.db");
try {
  const db = await openDatabase({ url: `file:${path}`, driver: "native" });
  await migrate(db);
  // Outside any unit, on the writer: the bench's own rows (db.unguarded is for fixtures).
  const writer = db.unguarded;
  const now = Date.now();
  // Settled rows without tokens (what the outbox mostly holds), then the waiting ones.
  const rows = (count: number, name: string, token: string | null, mailStatus: string) =>
    writer.run(sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
      INSERT INTO outbox (kind, recipient, payload, token, created_at, next_attempt_at, mail_status, mail_next_attempt_at, webhook_status)
      SELECT 'VERIFY_EMAIL', ${name} || i || '@example.com', '{}', ${token}, ${now}, ${now}, ${mailStatus}, ${now}, 'sent' FROM n`);
  await rows(ROWS, "user", null, "sent");
  await rows(WAITING, "waiting", "raw-token", "pending");
  // The fill's pages out of the WAL first, or the passes would pay for copying them back.
  await writer.run(sql`PRAGMA wal_checkpoint(TRUNCATE)`);
  const statement = eraseTokens(writer, now) as unknown as { _prepare(): { getQuery(): { sql: string; params: unknown[] } } };
  const { sql: text, params } = statement._prepare().getQuery();
  // On a connection of its own, closed before the passes (an EXPLAIN run on the writer kept it busy).
  const probe = new Connection(path, { readonly: true });
  const plan = probe
    .query<{ detail: string }, SQLQueryBindings[]>(`EXPLAIN QUERY PLAN ${text}`)
    .all(...(params as SQLQueryBindings[]))
    .map((r) => r.detail);
  probe.close();
  const giveTokens = () => writer.run(sql`UPDATE outbox SET token = 'raw-token' WHERE id IN (SELECT id FROM outbox WHERE token IS NULL ORDER BY random() LIMIT ${PER_PASS})`);
  const times: number[] = [];
  for (let pass = 0; pass < PASSES; pass++) {
    await giveTokens();
    // The statement alone (autocommit on the writer): the sender's unit adds BEGIN, COMMIT and its other statements.
    const started = performance.now();
    await eraseTokens(writer, Date.now());
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const ms = (q: number) => Math.round(times[Math.floor(q * (times.length - 1))] * 1000) / 1000;
  const [{ left }] = await writer.all<{ left: number }>(sql`SELECT count(*) AS left FROM outbox WHERE token IS NOT NULL`);
  db.close();
  console.log(JSON.stringify({ rows: ROWS + WAITING, erasedPerPass: PER_PASS, msPerPass: { median: ms(0.5), p90: ms(0.9) }, tokensLeft: left, plan }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
