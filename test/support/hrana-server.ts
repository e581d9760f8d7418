/**
 * A Hrana 2 server for the test kit, written from the public specification
 * (tursodatabase/libsql docs/HRANA_2_SPEC.md and HRANA_3_SPEC.md): HTTP `POST /v2/pipeline` with
 * batons, and WebSocket subprotocol `hrana2`. Run it as its own process (test/support/hrana.ts
 * starts it): `bun test/support/hrana-server.ts` prints `listening <port>` once it accepts.
 *
 * Every stream gets its own bun:sqlite connection to one WAL file, so concurrent write
 * transactions contend exactly as SQLite makes them: a writer that cannot get the lock gets
 * SQLITE_BUSY after HRANA_BUSY_TIMEOUT_MS (default 0). Nothing here serialises streams.
 *
 * Not implemented: Hrana 3 (cursors, get_autocommit, protobuf). `GET /v3` and `/v3-protobuf`
 * answer 404, so a client that probes for 3 falls back to 2, as it would against an old sqld.
 *
 * Test control (not Hrana): `GET /_test/stats` gives the round trips counted since the last
 * `POST /_test/reset` — one per pipeline request over HTTP, version probes left out; per stream
 * too; `versionProbes` counts the GETs of /v2, /v3 … apart. `POST /_test/delay?ms=20` makes every pipeline request wait that long before it runs,
 * like a primary 20 ms away.
 *
 * Environment: HRANA_DB (file; default a fresh temp file, removed on exit), PORT (default 0: free),
 * HRANA_BUSY_TIMEOUT_MS, HRANA_DELAY_MS, HRANA_STREAM_IDLE_MS (default 15000), HRANA_LOG_SQL=1.
 */
import { Database, type Statement } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

type Value = { type: "null" } | { type: "integer"; value: string } | { type: "float"; value: number } | { type: "text"; value: string } | { type: "blob"; base64: string };
type Stmt = { sql?: string | null; sql_id?: number | null; args?: Value[]; named_args?: { name: string; value: Value }[]; want_rows?: boolean };
type BatchCond =
  | { type: "ok"; step: number }
  | { type: "error"; step: number }
  | { type: "not"; cond: BatchCond }
  | { type: "and"; conds: BatchCond[] }
  | { type: "or"; conds: BatchCond[] }
  | { type: "is_autocommit" };
type Batch = { steps: { condition?: BatchCond | null; stmt: Stmt }[] };
type HranaError = { message: string; code?: string };
/**
 * A request as a client sent it: parsed JSON, not checked beyond what each case reads (a field
 * that is missing or of another type fails there and is answered as an error, as a real server does).
 */
type Sent =
  | {
      type?: string;
      stmt?: Stmt;
      batch?: Batch;
      sql?: string | null;
      sql_id?: number | null;
      stream_id?: number;
      request_id?: number;
      request?: Sent;
    }
  | null
  | undefined;
type StmtResult = { cols: { name: string | null; decltype: string | null }[]; rows: Value[][]; affected_row_count: number; last_insert_rowid: string | null };

/** An error the client sees as a Hrana `Error` (statement failures, bad requests). */
class ResponseError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
  toJSON(): HranaError {
    return this.code ? { message: this.message, code: this.code } : { message: this.message };
  }
}

const toResponseError = (error: unknown): ResponseError => {
  if (error instanceof ResponseError) return error;
  const { message, code } = error as { message?: string; code?: string };
  // bun:sqlite's codes are SQLite's extended names (SQLITE_CONSTRAINT_UNIQUE, SQLITE_BUSY, …), as sqld sends them.
  return new ResponseError(`SQLite error: ${message ?? String(error)}`, code ?? "SQLITE_ERROR");
};

const busyTimeoutMs = Number(process.env.HRANA_BUSY_TIMEOUT_MS ?? 0);
const idleMs = Number(process.env.HRANA_STREAM_IDLE_MS ?? 15_000);
let delayMs = Number(process.env.HRANA_DELAY_MS ?? 0);
/** HRANA_LOG_SQL=1: every pipeline's requests on stderr, to see what a round trip carried. */
const logSql = process.env.HRANA_LOG_SQL === "1";
const describeRequest = (r: Sent): string[] =>
  r?.type === "execute"
    ? [r.stmt?.sql ?? `sql#${r.stmt?.sql_id}`]
    : r?.type === "batch"
      ? [`batch[${r.batch?.steps.map((s) => s.stmt.sql ?? `sql#${s.stmt.sql_id}`).join("; ")}]`]
      : [String(r?.type)];

const ownDir = process.env.HRANA_DB ? undefined : mkdtempSync(join(tmpdir(), "hrana-test-"));
const dbFile = process.env.HRANA_DB ?? join(ownDir!, "db.sqlite");

/** One SQLite connection of one stream. */
class Conn {
  readonly db: Database;
  private readonly cache = new Map<string, Statement>();
  constructor() {
    // safeIntegers: 64-bit integers round-trip exactly; strict: named args bind with or without their prefix.
    this.db = new Database(dbFile, { create: true, safeIntegers: true, strict: true });
    this.db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    this.db.exec("PRAGMA journal_mode = WAL");
    // As libsql-server (sqld) does on every connection: a client cannot, since its streams come and go.
    this.db.exec("PRAGMA foreign_keys = ON");
  }
  prepare(sql: string): Statement {
    let stmt = this.cache.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      if (this.cache.size >= 200) this.cache.clear();
      this.cache.set(sql, stmt);
    }
    return stmt;
  }
  /** A statement that failed mid-step stays active (COMMIT would fail "SQL statements in progress"): drop it. */
  forget(sql: string) {
    this.cache.get(sql)?.finalize();
    this.cache.delete(sql);
  }
  get autocommit() {
    return !this.db.inTransaction;
  }
  /** Ends an abandoned transaction, as a server does when a stream goes away. */
  reset() {
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
  }
  close() {
    for (const stmt of this.cache.values()) stmt.finalize();
    this.db.close(false);
  }
}

// Idle connections are kept for the next stream (opening one is most of a short request's cost).
const idle: Conn[] = [];
const takeConn = () => idle.pop() ?? new Conn();
function releaseConn(conn: Conn) {
  try {
    conn.reset();
    if (idle.length < 32) return void idle.push(conn);
  } catch {
    // a connection that cannot roll back is not reused
  }
  conn.close();
}

class Stream {
  readonly sqls = new Map<number, string>();
  roundTrips = 0;
  constructor(
    readonly id: string,
    readonly conn: Conn,
  ) {}
}

const counters = { roundTrips: 0, wsRequests: 0, versionProbes: 0, streams: [] as { id: string; roundTrips: number }[] };
function countRoundTrip(stream: Stream) {
  counters.roundTrips++;
  stream.roundTrips++;
  if (stream.roundTrips === 1) counters.streams.push(stream);
}

// ---- statements ----

function sqlOf(sqls: Map<number, string>, source: { sql?: string | null; sql_id?: number | null }): string {
  if (source.sql != null && source.sql_id != null) throw new ResponseError("Both sql and sql_id are given", "SQL_CONFLICT");
  if (source.sql != null) return source.sql;
  if (source.sql_id != null) {
    const sql = sqls.get(source.sql_id);
    if (sql === undefined) throw new ResponseError(`SQL text ${source.sql_id} is not stored`, "SQL_NOT_FOUND");
    return sql;
  }
  throw new ResponseError("Expected sql or sql_id", "SQL_MISSING");
}

function fromValue(value: Value): unknown {
  switch (value.type) {
    case "null":
      return null;
    case "integer":
      return BigInt(value.value);
    case "float":
      return Number(value.value);
    case "text":
      return value.value;
    case "blob":
      return Buffer.from(value.base64, "base64");
    default:
      throw new ResponseError(`Unknown value type ${JSON.stringify((value as { type: unknown }).type)}`, "ARGS_INVALID");
  }
}

function toValue(cell: unknown): Value {
  if (cell === null || cell === undefined) return { type: "null" };
  if (typeof cell === "bigint") return { type: "integer", value: cell.toString() };
  if (typeof cell === "number") return { type: "float", value: cell };
  if (typeof cell === "string") return { type: "text", value: cell };
  if (cell instanceof Uint8Array) return { type: "blob", base64: Buffer.from(cell).toString("base64") };
  throw new ResponseError(`Unsupported SQLite value ${String(cell)}`, "VALUE_ERROR");
}

function bindings(stmt: Statement, source: Stmt): unknown[] {
  const args = source.args ?? [];
  const named = source.named_args ?? [];
  if (args.length > 0 && named.length > 0) throw new ResponseError("Positional and named arguments together are not supported", "ARGS_INVALID");
  const provided = args.length + named.length;
  if (provided !== stmt.paramsCount) throw new ResponseError(`Required ${stmt.paramsCount} arguments, but ${provided} were provided`, "ARGS_INVALID");
  if (named.length === 0) return args.map(fromValue);
  return [Object.fromEntries(named.map(({ name, value }) => [name.replace(/^[:@$]/, ""), fromValue(value)]))];
}

function execute(conn: Conn, sqls: Map<number, string>, source: Stmt): StmtResult {
  const sql = sqlOf(sqls, source);
  try {
    const stmt = conn.prepare(sql);
    const args = bindings(stmt, source);
    const names = stmt.columnNames;
    const before = conn.db.query("SELECT total_changes()").values()[0][0];
    let rows: unknown[][] = [];
    if (names.length > 0) rows = stmt.values(...(args as never[])) as unknown[][];
    else stmt.run(...(args as never[]));
    const [[total, changes, rowid]] = conn.db.query("SELECT total_changes(), changes(), last_insert_rowid()").values() as bigint[][];
    // changes() counts the statement's own rows (not trigger rows); a read changes nothing.
    const affected = total === before ? 0 : Number(changes);
    return {
      cols: names.map((name, i) => ({ name, decltype: stmt.declaredTypes[i] ?? null })),
      rows: source.want_rows === false ? [] : rows.map((row) => row.map(toValue)),
      affected_row_count: affected,
      last_insert_rowid: String(rowid),
    };
  } catch (error) {
    conn.forget(sql);
    throw toResponseError(error);
  }
}

function evalCond(cond: BatchCond, conn: Conn, results: (StmtResult | null)[], errors: (HranaError | null)[]): boolean {
  switch (cond.type) {
    case "ok":
      return results[cond.step] != null;
    case "error":
      return errors[cond.step] != null;
    case "not":
      return !evalCond(cond.cond, conn, results, errors);
    case "and":
      return cond.conds.every((c) => evalCond(c, conn, results, errors));
    case "or":
      return cond.conds.some((c) => evalCond(c, conn, results, errors));
    case "is_autocommit":
      return conn.autocommit;
    default:
      throw new ResponseError(`Unknown condition ${JSON.stringify((cond as { type: unknown }).type)}`, "BATCH_COND_INVALID");
  }
}

function batch(conn: Conn, sqls: Map<number, string>, { steps }: Batch) {
  const step_results: (StmtResult | null)[] = [];
  const step_errors: (HranaError | null)[] = [];
  for (const step of steps) {
    let result: StmtResult | null = null;
    let error: HranaError | null = null;
    if (!step.condition || evalCond(step.condition, conn, step_results, step_errors)) {
      try {
        result = execute(conn, sqls, step.stmt);
      } catch (e) {
        error = toResponseError(e).toJSON();
      }
    }
    step_results.push(result);
    step_errors.push(error);
  }
  return { step_results, step_errors };
}

function sequence(conn: Conn, sql: string) {
  try {
    conn.db.exec(sql);
  } catch (error) {
    throw toResponseError(error);
  }
}

/**
 * bun:sqlite exposes neither parameter names nor sqlite3_stmt_readonly: read-only-ness comes
 * from the engine's EXPLAIN listing (a write transaction opcode), names from the SQL text.
 */
function describe(conn: Conn, sql: string) {
  try {
    const stmt = conn.db.prepare(sql);
    const explain = conn.db.prepare(`EXPLAIN ${sql}`);
    const program = explain.all(...(Array(stmt.paramsCount).fill(null) as never[])) as { opcode: string; p2: number | bigint }[];
    explain.finalize();
    const result = {
      params: parameterNames(sql, stmt.paramsCount).map((name) => ({ name })),
      cols: stmt.columnNames.map((name, i) => ({ name, decltype: stmt.declaredTypes[i] ?? null })),
      is_explain: /^\s*explain\b/i.test(sql),
      is_readonly: !program.some((op) => op.opcode === "Transaction" && Number(op.p2) > 0),
    };
    stmt.finalize();
    return result;
  } catch (error) {
    throw toResponseError(error);
  }
}

/** SQLite's numbering: `?` takes the next number, `?NNN` its own, a name keeps the number of its first use. */
function parameterNames(sql: string, count: number): (string | null)[] {
  const names: (string | null)[] = Array(count).fill(null);
  const byName = new Map<string, number>();
  let highest = 0;
  // String literals, quoted identifiers and comments are skipped; parameters are the rest.
  const tokens = /'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?\*\/|(\?\d*|[:@$][A-Za-z0-9_]+)/g;
  for (const [, param] of sql.matchAll(tokens)) {
    if (!param) continue;
    let index: number;
    if (param === "?") index = ++highest;
    else if (param.startsWith("?")) {
      index = Number(param.slice(1));
      names[index - 1] = param;
    } else {
      index = byName.get(param) ?? ++highest;
      byName.set(param, index);
      names[index - 1] = param;
    }
    highest = Math.max(highest, index);
  }
  return names;
}

/** A stream request, the same for HTTP pipelines and WebSocket requests (`sqls` is per stream or per connection). */
function handleStreamRequest(conn: Conn, sqls: Map<number, string>, request: Sent): Record<string, unknown> {
  switch (request?.type) {
    case "execute":
      return { type: "execute", result: execute(conn, sqls, request.stmt!) };
    case "batch":
      return { type: "batch", result: batch(conn, sqls, request.batch!) };
    case "sequence":
      sequence(conn, sqlOf(sqls, request));
      return { type: "sequence" };
    case "describe":
      return { type: "describe", result: describe(conn, sqlOf(sqls, request)) };
    case "store_sql":
      if (sqls.has(request.sql_id!)) throw new ResponseError(`SQL text ${request.sql_id} is already stored`, "SQL_STORE_CONFLICT");
      sqls.set(request.sql_id!, String(request.sql));
      return { type: "store_sql" };
    case "close_sql":
      sqls.delete(request.sql_id!);
      return { type: "close_sql" };
    default:
      throw new ResponseError(`Unknown request ${JSON.stringify(request?.type)}`, "REQUEST_INVALID");
  }
}

// ---- HTTP ----

const httpStreams = new Map<string, { stream: Stream; baton: string; timer: Timer }>();

function closeHttpStream(id: string) {
  const entry = httpStreams.get(id);
  if (!entry) return;
  clearTimeout(entry.timer);
  httpStreams.delete(id);
  releaseConn(entry.stream.conn);
}

async function pipeline(body: { baton?: string | null; requests?: unknown[] }): Promise<Response> {
  if (!body || !Array.isArray(body.requests)) return Response.json({ message: "Expected a pipeline body", code: "PROTO_ERROR" }, { status: 400 });
  let stream: Stream;
  if (body.baton != null) {
    const id = String(body.baton).split(".")[0];
    const entry = httpStreams.get(id);
    if (!entry || entry.baton !== body.baton) return Response.json({ message: "Unknown or expired baton", code: "STREAM_EXPIRED" }, { status: 400 });
    clearTimeout(entry.timer);
    stream = entry.stream;
  } else {
    stream = new Stream(crypto.randomUUID(), takeConn());
  }
  countRoundTrip(stream);
  if (logSql) console.error(`[hrana] ${stream.id.slice(0, 8)} #${stream.roundTrips}: ${(body.requests as Sent[]).flatMap(describeRequest).join(" | ")}`);
  if (delayMs > 0) await Bun.sleep(delayMs);
  const results: unknown[] = [];
  let closed = false;
  for (const request of body.requests as Sent[]) {
    if (closed) {
      results.push({ type: "error", error: { message: "The stream is closed", code: "STREAM_CLOSED" } });
      continue;
    }
    if (request?.type === "close") {
      closed = true;
      results.push({ type: "ok", response: { type: "close" } });
      continue;
    }
    try {
      results.push({ type: "ok", response: handleStreamRequest(stream.conn, stream.sqls, request) });
    } catch (error) {
      results.push({ type: "error", error: toResponseError(error).toJSON() });
    }
  }
  if (closed) {
    if (httpStreams.has(stream.id)) closeHttpStream(stream.id);
    else releaseConn(stream.conn);
    return Response.json({ baton: null, base_url: null, results });
  }
  const baton = `${stream.id}.${crypto.randomUUID()}`;
  // An abandoned stream (a client that died mid-transaction) is rolled back and closed after a while.
  const timer = setTimeout(() => closeHttpStream(stream.id), idleMs);
  httpStreams.set(stream.id, { stream, baton, timer });
  return Response.json({ baton, base_url: null, results });
}

// ---- WebSocket (hrana2) ----

type WsState = { hello: boolean; streams: Map<number, Stream>; sqls: Map<number, string> };

function wsMessage(state: WsState, msg: Sent): unknown[] {
  if (msg?.type === "hello") {
    state.hello = true;
    return [{ type: "hello_ok" }];
  }
  if (msg?.type !== "request" || !state.hello) throw new Error("protocol violation: expected hello, then requests");
  counters.wsRequests++;
  const { request_id, request } = msg;
  try {
    return [{ type: "response_ok", request_id, response: wsRequest(state, request) }];
  } catch (error) {
    return [{ type: "response_error", request_id, error: toResponseError(error).toJSON() }];
  }
}

function wsRequest(state: WsState, request: Sent): Record<string, unknown> {
  switch (request?.type) {
    case "open_stream": {
      if (state.streams.has(request.stream_id!)) throw new ResponseError(`Stream ${request.stream_id} is already open`, "STREAM_EXISTS");
      state.streams.set(request.stream_id!, new Stream(`ws-${request.stream_id}`, takeConn()));
      return { type: "open_stream" };
    }
    case "close_stream": {
      const stream = state.streams.get(request.stream_id!);
      state.streams.delete(request.stream_id!);
      if (stream) releaseConn(stream.conn);
      return { type: "close_stream" };
    }
    case "store_sql":
    case "close_sql":
      return handleStreamRequest(undefined as never, state.sqls, request);
    default: {
      const stream = state.streams.get(request?.stream_id ?? Number.NaN);
      if (!stream) throw new ResponseError(`Stream ${request?.stream_id} is not open`, "STREAM_NOT_FOUND");
      return handleStreamRequest(stream.conn, state.sqls, request);
    }
  }
}

// ---- server ----

const server = Bun.serve<WsState>({
  port: Number(process.env.PORT ?? 0),
  hostname: "127.0.0.1",
  async fetch(req, server) {
    const url = new URL(req.url);
    const path = url.pathname.replace(/\/+$/, "") || "/";
    if (req.headers.get("upgrade")?.toLowerCase() === "websocket") {
      const offered = (req.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim());
      if (!offered.includes("hrana2")) return new Response("Only the hrana2 subprotocol is served", { status: 400 });
      const upgraded = server.upgrade(req, { headers: { "Sec-WebSocket-Protocol": "hrana2" }, data: { hello: false, streams: new Map(), sqls: new Map() } });
      return upgraded ? undefined : new Response("WebSocket upgrade failed", { status: 400 });
    }
    if (req.method === "GET" && (path === "/" || /^\/v\d/.test(path))) {
      counters.versionProbes++;
      return path === "/" || path === "/v2" ? new Response("Hrana 2 test server") : new Response("Not found", { status: 404 });
    }
    if (req.method === "POST" && path === "/v2/pipeline") {
      const body = await req.json().catch(() => undefined);
      return pipeline(body as never);
    }
    if (path === "/_test/stats") {
      return Response.json({
        roundTrips: counters.roundTrips,
        wsRequests: counters.wsRequests,
        versionProbes: counters.versionProbes,
        openStreams: httpStreams.size,
        streams: counters.streams.map(({ id, roundTrips }) => ({ id, roundTrips })),
      });
    }
    if (req.method === "POST" && path === "/_test/reset") {
      counters.roundTrips = 0;
      counters.wsRequests = 0;
      counters.versionProbes = 0;
      counters.streams = [];
      return Response.json({ ok: true });
    }
    if (req.method === "POST" && path === "/_test/delay") {
      delayMs = Number(url.searchParams.get("ms") ?? 0);
      return Response.json({ delayMs });
    }
    return new Response("Not found", { status: 404 });
  },
  websocket: {
    message(ws, data) {
      let replies: unknown[];
      try {
        if (typeof data !== "string") throw new Error("protocol violation: binary frame on a JSON subprotocol");
        replies = wsMessage(ws.data, JSON.parse(data));
      } catch (error) {
        ws.close(1002, String((error as Error).message).slice(0, 120));
        return;
      }
      for (const reply of replies) ws.send(JSON.stringify(reply));
    },
    close(ws) {
      for (const stream of ws.data.streams.values()) releaseConn(stream.conn);
      ws.data.streams.clear();
    },
  },
});

function shutdown() {
  server.stop(true);
  for (const id of [...httpStreams.keys()]) closeHttpStream(id);
  for (const conn of idle.splice(0)) conn.close();
  if (ownDir) rmSync(ownDir, { recursive: true, force: true });
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
// Started by a test run: when that process goes away (its end of stdin closes), so does this server.
if (process.env.HRANA_EXIT_WITH_STDIN)
  (async () => {
    for await (const _ of Bun.stdin.stream());
    shutdown();
  })();

console.log(`listening ${server.port}`);
