/**
 * The test kit's Hrana server (test/support/hrana-server.ts) against the Hrana 2 specification:
 * raw pipeline requests over HTTP, the hrana2 WebSocket subprotocol, real contention between
 * streams, and the round-trip counter the remote leg's assertions rely on.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { startHranaServer, type HranaServer } from "./support/hrana";

let server: HranaServer;
beforeAll(async () => {
  server = await startHranaServer();
  await pipeline(null, [exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, score REAL, data BLOB)"), { type: "close" }]);
});
afterAll(() => server.stop());

const exec = (sql: string, args: unknown[] = []) => ({ type: "execute", stmt: { sql, args } });
const int = (n: number | bigint) => ({ type: "integer", value: String(n) });
const text = (value: string) => ({ type: "text", value });

/** A statement's, a batch's or a description's result, as these tests read it. */
interface StreamResult {
  rows?: { type: string; value?: unknown; base64?: string }[][];
  cols?: { name: string | null; decltype?: string | null }[];
  affected_row_count?: number;
  last_insert_rowid?: string | null;
  step_results?: (StreamResult | null)[];
  step_errors?: ({ message: string; code: string } | null)[];
  params?: { name: string | null }[];
  is_explain?: boolean;
  is_readonly?: boolean;
}
/** One request's outcome in a pipeline, or a WebSocket message: `response` on success, `error` on failure. */
interface Outcome {
  type: string;
  request_id?: number;
  response?: { type: string; result?: StreamResult };
  error?: { message: string; code: string };
}
/** The result of an outcome that must have succeeded. */
function resultOf(outcome: Outcome): StreamResult {
  expect(outcome.response?.result).toBeDefined();
  return outcome.response!.result!;
}

async function pipeline(baton: string | null, requests: unknown[]) {
  const response = await fetch(`${server.url}/v2/pipeline`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ baton, requests }) });
  return { status: response.status, body: (await response.json()) as { baton: string | null; base_url?: string | null; results: Outcome[] } };
}

describe("Hrana over HTTP", () => {
  test("execute binds every value type and answers them back exactly", async () => {
    const big = 9007199254740993n; // beyond a double's integers
    const { body } = await pipeline(null, [
      exec("INSERT INTO t (id, name, score, data) VALUES (?, ?, ?, ?) RETURNING id, name, score, data", [
        int(big),
        text("臺北"),
        { type: "float", value: 2.5 },
        { type: "blob", base64: "AQID" },
      ]),
      exec("SELECT NULL AS n"),
      { type: "close" },
    ]);
    expect(body.baton).toBeNull();
    const [insert, select] = body.results.slice(0, 2).map(resultOf);
    expect(insert.rows).toEqual([[int(big), text("臺北"), { type: "float", value: 2.5 }, { type: "blob", base64: "AQID" }]]);
    expect(insert.cols).toEqual([
      { name: "id", decltype: "INTEGER" },
      { name: "name", decltype: "TEXT" },
      { name: "score", decltype: "REAL" },
      { name: "data", decltype: "BLOB" },
    ]);
    expect(insert.affected_row_count).toBe(1);
    expect(insert.last_insert_rowid).toBe(String(big));
    expect(select.rows).toEqual([[{ type: "null" }]]);
    expect(select.affected_row_count).toBe(0);
  });

  test("named arguments bind with or without their prefix; a wrong count is ARGS_INVALID", async () => {
    const { body } = await pipeline(null, [
      {
        type: "execute",
        stmt: {
          sql: "SELECT :a + @b AS s",
          named_args: [
            { name: ":a", value: int(2) },
            { name: "b", value: int(3) },
          ],
        },
      },
      exec("SELECT ? AS one", []),
      { type: "close" },
    ]);
    expect(resultOf(body.results[0]).rows).toEqual([[int(5)]]);
    expect(body.results[1]).toMatchObject({ type: "error", error: { code: "ARGS_INVALID" } });
  });

  test("a failing statement is an error result; the pipeline goes on", async () => {
    await pipeline(null, [exec("INSERT INTO t (name) VALUES ('dup')"), { type: "close" }]);
    const { body } = await pipeline(null, [exec("INSERT INTO t (name) VALUES ('dup')"), exec("SELECT 1"), { type: "close" }]);
    expect(body.results[0]).toEqual({ type: "error", error: { message: expect.stringContaining("UNIQUE constraint failed: t.name"), code: "SQLITE_CONSTRAINT_UNIQUE" } });
    expect(body.results[1].type).toBe("ok");
  });

  test("batch conditions: ok, error, not, and, or; a skipped step has neither result nor error", async () => {
    const step = (sql: string, condition?: unknown) => ({ condition, stmt: { sql } });
    const { body } = await pipeline(null, [
      {
        type: "batch",
        batch: {
          steps: [
            step("SELECT 1"), // 0 ok
            step("SELECT * FROM missing"), // 1 error
            step("SELECT 2", { type: "ok", step: 1 }), // 2 skipped
            step("SELECT 3", { type: "error", step: 1 }), // 3 runs
            step("SELECT 4", { type: "not", cond: { type: "ok", step: 0 } }), // 4 skipped
            step("SELECT 5", {
              type: "and",
              conds: [
                { type: "ok", step: 0 },
                { type: "ok", step: 3 },
              ],
            }), // 5 runs
            step("SELECT 6", {
              type: "or",
              conds: [
                { type: "ok", step: 2 },
                { type: "error", step: 4 },
              ],
            }), // 6 skipped
          ],
        },
      },
      { type: "close" },
    ]);
    const { step_results, step_errors } = resultOf(body.results[0]);
    expect(step_results?.map((r) => (r ? r.rows?.[0][0].value : null))).toEqual(["1", null, null, "3", null, "5", null]);
    expect(step_errors?.map((e) => (e ? e.code : null))).toEqual([null, "SQLITE_ERROR", null, null, null, null, null]);
  });

  test("store_sql, sql_id, close_sql, sequence and describe", async () => {
    const { body } = await pipeline(null, [
      { type: "store_sql", sql_id: 7, sql: "SELECT count(*) FROM t WHERE name = ?" },
      { type: "execute", stmt: { sql_id: 7, args: [text("dup")] } },
      { type: "sequence", sql: "CREATE TABLE seq (x); INSERT INTO seq VALUES (1); INSERT INTO seq VALUES (2);" },
      exec("SELECT sum(x) FROM seq"),
      { type: "describe", sql: "SELECT name FROM t WHERE id = :id AND name = ?2" },
      { type: "describe", sql: "DELETE FROM t WHERE id = ?" },
      { type: "close_sql", sql_id: 7 },
      { type: "execute", stmt: { sql_id: 7, args: [] } },
      { type: "close" },
    ]);
    const r = body.results;
    expect(resultOf(r[1]).rows).toEqual([[int(1)]]);
    expect(resultOf(r[3]).rows).toEqual([[int(3)]]);
    expect(resultOf(r[4])).toEqual({ params: [{ name: ":id" }, { name: "?2" }], cols: [{ name: "name", decltype: "TEXT" }], is_explain: false, is_readonly: true });
    expect(resultOf(r[5])).toMatchObject({ params: [{ name: null }], cols: [], is_readonly: false });
    expect(r[7]).toMatchObject({ type: "error", error: { code: "SQL_NOT_FOUND" } });
  });

  test("a baton carries the stream (its connection and transaction); a stale one is refused", async () => {
    const first = await pipeline(null, [exec("BEGIN"), exec("INSERT INTO t (name) VALUES ('in-tx')")]);
    expect(first.body.baton).toEqual(expect.any(String));
    // Another stream does not see the uncommitted row.
    const other = await pipeline(null, [exec("SELECT count(*) FROM t WHERE name = 'in-tx'"), { type: "close" }]);
    expect(resultOf(other.body.results[0]).rows).toEqual([[int(0)]]);
    const second = await pipeline(first.body.baton, [exec("SELECT count(*) FROM t WHERE name = 'in-tx'"), exec("ROLLBACK")]);
    expect(resultOf(second.body.results[0]).rows).toEqual([[int(1)]]);
    expect(second.body.baton).not.toBe(first.body.baton);
    expect((await pipeline(first.body.baton, [exec("SELECT 1")])).status).toBe(400);
    const closed = await pipeline(second.body.baton, [{ type: "close" }]);
    expect(closed.body).toEqual({ baton: null, base_url: null, results: [{ type: "ok", response: { type: "close" } }] });
  });

  test("streams really contend: a writer meets SQLITE_BUSY while another stream holds the lock", async () => {
    const holder = await pipeline(null, [exec("BEGIN IMMEDIATE"), exec("INSERT INTO t (name) VALUES ('held')")]);
    // Refused, not queued behind the holder: a queued writer would wait for the holder's COMMIT and then
    // succeed. (How soon it is refused is the server's busy timeout, 0 unless HRANA_BUSY_TIMEOUT_MS says.)
    const blocked = await pipeline(null, [exec("INSERT INTO t (name) VALUES ('waiting')"), { type: "close" }]);
    expect(blocked.body.results[0]).toMatchObject({ type: "error", error: { code: "SQLITE_BUSY" } });
    // Readers are not blocked by a writer (WAL).
    const reader = await pipeline(null, [exec("SELECT count(*) FROM t"), { type: "close" }]);
    expect(reader.body.results[0].type).toBe("ok");
    await pipeline(holder.body.baton, [exec("COMMIT"), { type: "close" }]);
    const retried = await pipeline(null, [exec("INSERT INTO t (name) VALUES ('waiting')"), { type: "close" }]);
    expect(retried.body.results[0].type).toBe("ok");
  });

  test("foreign keys are enforced on every stream, as sqld does", async () => {
    const { body } = await pipeline(null, [
      exec("CREATE TABLE parent (id INTEGER PRIMARY KEY)"),
      exec("CREATE TABLE child (parent_id INTEGER REFERENCES parent(id))"),
      exec("INSERT INTO child VALUES (42)"),
      { type: "close" },
    ]);
    expect(body.results[2]).toMatchObject({ type: "error", error: { code: "SQLITE_CONSTRAINT_FOREIGNKEY" } });
  });

  test("round trips are counted per pipeline request and per stream; version probes are not", async () => {
    await server.reset();
    expect((await fetch(`${server.url}/v2`)).status).toBe(200);
    expect((await fetch(`${server.url}/v3`)).status).toBe(404); // Hrana 3 is not served: clients fall back to 2
    expect((await fetch(`${server.url}/v3-protobuf`)).status).toBe(404);
    const a = await pipeline(null, [exec("SELECT 1")]);
    await pipeline(a.body.baton, [{ type: "close" }]);
    await pipeline(null, [exec("SELECT 1"), { type: "close" }]);
    const stats = await server.stats();
    expect(stats.versionProbes).toBe(3);
    expect(stats.roundTrips).toBe(3);
    expect(stats.streams.map((s) => s.roundTrips)).toEqual([2, 1]);
    expect(stats.openStreams).toBe(0);
  });

  test("@libsql/client 0.18 speaks Hrana 2 over HTTP without a version probe; a write batch is one round trip; a fixed delay is added to each", async () => {
    const client = createClient({ url: server.url });
    try {
      await server.reset();
      await client.batch(["INSERT INTO t (name) VALUES ('b1')", "INSERT INTO t (name) VALUES ('b2')"], "write");
      expect(await server.stats()).toMatchObject({ roundTrips: 1, versionProbes: 0 });
      await server.setDelay(60);
      const started = performance.now();
      await client.execute("SELECT 1");
      expect(performance.now() - started).toBeGreaterThanOrEqual(55);
    } finally {
      await server.setDelay(0);
      client.close();
    }
  });

  test("every server starts on a fresh database", async () => {
    const fresh = await startHranaServer();
    try {
      const client = createClient({ url: fresh.url });
      const { rows } = await client.execute("SELECT count(*) AS n FROM sqlite_master");
      expect(rows[0].n).toBe(0);
      client.close();
    } finally {
      await fresh.stop();
    }
  });
});

describe("Hrana over WebSocket (hrana2)", () => {
  function connect(protocols: string[]) {
    const ws = new WebSocket(server.wsUrl, protocols);
    const inbox: Outcome[] = [];
    const waiters: (() => void)[] = [];
    ws.onmessage = (event) => {
      inbox.push(JSON.parse(String(event.data)));
      for (const wake of waiters.splice(0)) wake();
    };
    const next = async () => {
      while (inbox.length === 0) await new Promise<void>((r) => waiters.push(r));
      return inbox.shift()!;
    };
    const opened = new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("refused"));
    });
    return { ws, next, opened };
  }

  test("hello, streams, execute, batch, store_sql, close_stream", async () => {
    const { ws, next, opened } = connect(["hrana2"]);
    await opened;
    expect(ws.protocol).toBe("hrana2");
    const send = (msg: unknown) => ws.send(JSON.stringify(msg));
    const request = (request_id: number, request: unknown) => send({ type: "request", request_id, request });
    // The client may pipeline everything behind its hello.
    send({ type: "hello", jwt: null });
    request(1, { type: "open_stream", stream_id: 1 });
    request(2, { type: "store_sql", sql_id: 1, sql: "SELECT ? * 2" });
    request(3, { type: "execute", stream_id: 1, stmt: { sql_id: 1, args: [int(21)] } });
    request(4, {
      type: "batch",
      stream_id: 1,
      batch: { steps: [{ stmt: { sql: "SELECT * FROM missing" } }, { condition: { type: "error", step: 0 }, stmt: { sql: "SELECT 'fallback'" } }] },
    });
    request(5, { type: "execute", stream_id: 9, stmt: { sql: "SELECT 1" } });
    request(6, { type: "close_stream", stream_id: 1 });
    expect(await next()).toEqual({ type: "hello_ok" });
    expect(await next()).toEqual({ type: "response_ok", request_id: 1, response: { type: "open_stream" } });
    expect(await next()).toEqual({ type: "response_ok", request_id: 2, response: { type: "store_sql" } });
    expect(resultOf(await next()).rows).toEqual([[int(42)]]);
    expect(resultOf(await next()).step_results?.[1]?.rows).toEqual([[text("fallback")]]);
    expect(await next()).toMatchObject({ type: "response_error", request_id: 5, error: { code: "STREAM_NOT_FOUND" } });
    expect(await next()).toEqual({ type: "response_ok", request_id: 6, response: { type: "close_stream" } });
    ws.close();
  });

  test("a client that offers no hrana2 is refused", async () => {
    const { opened } = connect(["hrana3-protobuf"]);
    expect(opened).rejects.toThrow("refused");
  });

  test("@libsql/client over ws:// negotiates hrana2, runs a write batch and an interactive transaction", async () => {
    // The client offers hrana2 and hrana1 (hrana3 only when asked for version 3): we answer hrana2.
    const client = createClient({ url: server.wsUrl });
    try {
      await client.batch(["INSERT INTO t (name) VALUES ('ws1')", "INSERT INTO t (name) VALUES ('ws2')"], "write");
      const tx = await client.transaction("write");
      await tx.execute("DELETE FROM t WHERE name = 'ws1'");
      await tx.rollback();
      const { rows } = await client.execute("SELECT count(*) AS n FROM t WHERE name LIKE 'ws%'");
      expect(rows[0].n).toBe(2);
    } finally {
      client.close();
    }
  });
});
