/**
 * The order workflow on the real program: first proves it end to end over HTTP (admin creates
 * products → user orders → pays, success and decline → notifications reach a webhook receiver
 * run here), then the two concurrency cases against the live server, then measures
 * `POST /api/orders` under 32 concurrent clients, beside an authenticated product read for scale.
 *
 *   bun bench/orders.ts            (also run by `npm run bench`)
 *
 * Environment: USERSVC_BINARY (serve with that compiled binary instead of `bun src/main.ts`),
 * BENCH_DURATION seconds (default 8), BENCH_CONNECTIONS (default 32).
 * Load generator: autocannon (devDependency; it can POST a JSON body without a script).
 * Writes bench/results/orders.json; exits 1 if a proof fails.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { eq } from "drizzle-orm";
import { openDatabase } from "../src/db/open";
import { migrate } from "../src/db/migrate";
import { roles, userRoles, users } from "../src/db/schema";
import { createTokens } from "../src/security/bearer-tokens";
import { answerOf } from "../test/answers";

const ROOT = resolve(import.meta.dir, "..");
const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP_S = 2;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SECRET = "orders-bench-secret-".padEnd(80, "o");
const GOOD_CARD = "4111111111111111";
const DECLINED_CARD = "4000000000000002";

const log = (message: string) => process.stderr.write(`[orders] ${message}\n`);
const proofs: Record<string, boolean> = {};
function prove(name: string, ok: boolean, detail?: unknown) {
  proofs[name] = ok;
  log(`${ok ? "PROVEN " : "FAILED "} ${name}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
}

const freePort = () => {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
};

/** Users written straight into the database before the server starts; tokens signed with its secret. */
async function seed(dir: string) {
  const database = await openDatabase({ url: `file:${join(dir, "usersvc.db")}` });
  await migrate(database);
  const tokens = createTokens(SECRET, Date.now);
  const make = async (email: string, roleNames: string[]) => {
    const now = new Date();
    const [{ id }] = await database.unguarded
      .insert(users)
      .values({ name: email.split("@")[0], email, createdAt: now, updatedAt: now })
      .returning({ id: users.id });
    for (const name of roleNames) {
      const [role] = await database.unguarded.select().from(roles).where(eq(roles.name, name));
      await database.unguarded.insert(userRoles).values({ userId: id, roleId: role.id });
    }
    return { id, email, token: await tokens.issue(email, 0) };
  };
  const admin = await make("admin@orders.bench", ["USER", "ADMIN"]);
  const buyers = [];
  for (let i = 0; i < 20; i++) buyers.push(await make(`buyer${i}@orders.bench`, ["USER"]));
  database.close();
  return { admin, buyers };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-orders-bench-"));
  const hooks: { kind: string; payload: unknown }[] = [];
  const receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      hooks.push((await request.json()) as { kind: string; payload: unknown });
      return new Response(null, { status: 204 });
    },
  });
  const { admin, buyers } = await seed(dir);
  const [buyer] = buyers;
  const port = freePort();
  const binary = process.env.USERSVC_BINARY;
  const command = binary && existsSync(binary) ? [binary, "serve"] : [process.execPath, join(ROOT, "src/main.ts"), "serve"];
  const server = Bun.spawn(command, {
    cwd: dir,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATA_DIR: dir,
      JWT_SECRET: SECRET,
      LOG_LEVEL: "warn",
      WORKERS: "1",
      NOTIFY_WEBHOOK_URL: `http://127.0.0.1:${receiver.port}/hook`,
    },
    stdout: "ignore",
    stderr: "inherit",
  });
  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const response = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return answerOf(response);
  };
  try {
    for (let until = Date.now() + 30_000; ; await Bun.sleep(100)) {
      if (Date.now() > until) throw new Error("the service did not start");
      if (
        await fetch(`${base}/actuator/health/liveness`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
    }

    // The workflow, end to end.
    const product = async (code: string, price: number, stock: number) => (await call("POST", "/api/products", admin.token, { name: code, code, price, stock })).body;
    const widget = await product("WIDGET", 19.99, 100);
    const placed = await call("POST", "/api/orders", buyer.token, { items: [{ productId: widget.id, quantity: 7 }] });
    prove("order placed PENDING with 19.99 × 7 = 139.93", placed.status === 201 && placed.body.status === "PENDING" && placed.body.totalAmount === 139.93, placed.body.totalAmount);
    const paid = await call("POST", `/api/orders/${placed.body.id}/pay`, buyer.token, { method: "CARD", cardNumber: GOOD_CARD });
    prove("payment succeeds → PAID with a paymentId", paid.status === 200 && paid.body.status === "PAID" && typeof paid.body.paymentId === "string");
    const doomed = await call("POST", "/api/orders", buyer.token, { items: [{ productId: widget.id, quantity: 3 }] });
    const declined = await call("POST", `/api/orders/${doomed.body.id}/pay`, buyer.token, { method: "CARD", cardNumber: DECLINED_CARD });
    const after = (await call("GET", `/api/products/${widget.id}`, buyer.token)).body;
    prove("decline → 400 ORDER_PAYMENT_FAILED, stock released", declined.status === 400 && declined.body.errorCode === "ORDER_PAYMENT_FAILED" && after.stock === 93, {
      message: declined.body.message,
      stock: after.stock,
    });
    for (let until = Date.now() + 10_000; Date.now() < until && hooks.length < 3; ) await Bun.sleep(50);
    const kinds = hooks.map((h) => h.kind).sort();
    prove("notifications reached the webhook", JSON.stringify(kinds) === JSON.stringify(["ORDER_CREATED", "ORDER_CREATED", "PAYMENT_SUCCESS"]), kinds);

    // Ten simultaneous payments of one order.
    const single = await call("POST", "/api/orders", buyer.token, { items: [{ productId: widget.id, quantity: 1 }] });
    const payments = await Promise.all(Array.from({ length: 10 }, () => call("POST", `/api/orders/${single.body.id}/pay`, buyer.token, { method: "CARD", cardNumber: GOOD_CARD })));
    const okPayments = payments.filter((p) => p.status === 200);
    const rest = payments.filter((p) => p.status !== 200).map((p) => `${p.status} ${p.body.errorCode}`);
    prove(
      "10 simultaneous payments → exactly one 200, nine 400 INVALID_ORDER_STATUS",
      okPayments.length === 1 && rest.length === 9 && rest.every((r) => r === "400 INVALID_ORDER_STATUS"),
      { ok: okPayments.length, rest: [...new Set(rest)] },
    );

    // Twenty simultaneous orders for five units.
    const scarce = await product("SCARCE", 2.5, 5);
    const rush = await Promise.all(buyers.map((b) => call("POST", "/api/orders", b.token, { items: [{ productId: scarce.id, quantity: 1 }] })));
    const tally: Record<string, number> = {};
    for (const r of rush) tally[`${r.status} ${r.body.errorCode ?? ""}`.trim()] = (tally[`${r.status} ${r.body.errorCode ?? ""}`.trim()] ?? 0) + 1;
    const left = (await call("GET", `/api/products/${scarce.id}`, admin.token)).body.stock;
    prove("20 simultaneous orders for stock 5 → five 201, stock 0", tally["201"] === 5 && tally["400 INSUFFICIENT_INVENTORY"] === 15 && left === 0, { tally, stock: left });

    // Throughput: every client orders one unit of a product that cannot run out.
    const bulk = await product("BULK", 0.1, 1_000_000_000);
    type Result = {
      requests: { average: number; total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
      statusCodeStats?: Record<string, { count: number }>;
    };
    const { default: autocannon } = (await import("autocannon" as string)) as { default: (options: object) => Promise<Result> };
    const options = {
      url: `${base}/api/orders`,
      method: "POST",
      connections: CONNECTIONS,
      headers: { authorization: `Bearer ${buyer.token}`, "content-type": "application/json" },
      body: JSON.stringify({ items: [{ productId: bulk.id, quantity: 1 }] }),
    };
    await autocannon({ ...options, duration: WARMUP_S });
    const stockBefore = (await call("GET", `/api/products/${bulk.id}`, admin.token)).body.stock;
    const result = await autocannon({ ...options, duration: DURATION_S });
    const rps = Math.round(result.requests.average);
    // A read through the same auth and app path, measured right after: the machine is shared, so the ratio says more than either figure.
    const read = await autocannon({ url: `${base}/api/products/${bulk.id}`, connections: CONNECTIONS, duration: DURATION_S, headers: { authorization: `Bearer ${buyer.token}` } });
    const readRps = Math.round(read.requests.average);
    log(
      `POST /api/orders, ${CONNECTIONS} clients, ${DURATION_S} s: ${rps} orders/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}, errors ${result.errors}`,
    );
    const stockLeft = (await call("GET", `/api/products/${bulk.id}`, admin.token)).body.stock;
    prove("no errors under load", result.non2xx === 0 && result.errors === 0, { non2xx: result.non2xx, errors: result.errors });

    const summary = {
      at: new Date().toISOString(),
      server: command[0] === process.execPath ? "bun src/main.ts" : "dist/usersvc",
      generator: "autocannon",
      connections: CONNECTIONS,
      durationSeconds: DURATION_S,
      createOrder: { rps, p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, errors: result.errors, ordersCreated: stockBefore - stockLeft },
      readProduct: { rps: readRps, p50Ms: read.latency.p50, p99Ms: read.latency.p99, non2xx: read.non2xx },
      ordersPerReadRatio: Number((rps / readRps).toFixed(3)),
      /** Notifications the receiver had when the run ended (the sender catches up afterwards). */
      webhookDeliveries: hooks.length,
      proofs,
    };
    console.log(`\nPOST /api/orders (autocannon, ${CONNECTIONS} connections, ${DURATION_S} s): ${rps} orders/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms`);
    console.log(
      `GET /api/products/{id} in the same run: ${readRps} req/s, p50 ${read.latency.p50} ms, p99 ${read.latency.p99} ms (orders = ${((rps / readRps) * 100).toFixed(0)}% of reads)`,
    );
    for (const [name, ok] of Object.entries(proofs)) console.log(`${ok ? "PROVEN" : "FAILED"}  ${name}`);
    mkdirSync(join(import.meta.dir, "results"), { recursive: true });
    writeFileSync(join(import.meta.dir, "results", "orders.json"), `${JSON.stringify(summary, null, 2)}\n`);
  } finally {
    server.kill("SIGTERM");
    await server.exited;
    receiver.stop(true);
    rmSync(dir, { recursive: true, force: true });
  }
  return Object.values(proofs).every(Boolean) ? 0 : 1;
}

process.exit(await main());
