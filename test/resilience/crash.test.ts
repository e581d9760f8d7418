/**
 * Crash safety of the compiled binary (heavy: RESILIENCE_HEAVY=1, npm run test:resilience).
 * From an empty folder, each round runs a burst of concurrent user creates, orders (most of
 * them then paid, some declined) and uploads, kills the process with SIGKILL mid-burst (a different moment each round),
 * restarts it on the same folder and checks: every request that got a 2xx is all there, and
 * nothing is half-written (orders have their items, stock adds up, every file row has its
 * exact bytes, no partial file under a real name, PRAGMA integrity_check is ok).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import type { Envelope } from "../../src/envelope";
import type { FileUploadResponse } from "../../src/features/files/model";
import type { Order } from "../../src/features/orders/model";
import type { Product } from "../../src/features/products/model";
import type { User } from "../../src/models/user";
import { jsonOf } from "../answers";
import { freePort, HEAVY, loginToken, startBinary, type Service } from "./support";

const KILL_AFTER_MS = [50, 250, 700, 1500];
const WORKERS = 12;
const INITIAL_STOCK = 1_000_000;

if (!HEAVY) console.warn("crash: skipped: heavy, run it with npm run test:resilience");

interface Acked {
  users: { id: number; email: string }[];
  /** The status the last acknowledged answer gave (PENDING until a payment was answered). */
  orders: { id: number; quantity: number; status: Order["status"] }[];
  files: { name: string; sha256: string; size: number }[];
}

/** Deterministic upload bytes, so a file found after a crash can be checked against what was sent. */
function uploadBytes(tag: string, size: number): Uint8Array {
  const seed = new TextEncoder().encode(`${tag}|`);
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = seed[i % seed.length] ^ (i & 0xff);
  return out;
}
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

describe.skipIf(!HEAVY)("kill -9 mid-burst, restart: acknowledged work is all there, nothing half-written", () => {
  let dir = "";
  let port = 0;
  let service: Service | undefined;
  let token = "";
  let productId = 0;
  const acked: Acked = { users: [], orders: [], files: [] };
  const sentShas = new Set<string>();
  /** Left by kills: complete files renamed into place whose row was never written, and temp files. */
  const orphans = new Set<string>();
  const temps = new Set<string>();
  let survived = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "usersvc-crash-"));
    port = freePort();
    service = await startBinary(dir, port);
    token = await loginToken(service.url);
    const product = await fetch(`${service.url}/api/products`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Crash stock", code: "CRASH-1", price: 1.25, stock: INITIAL_STOCK }),
    });
    expect(product.status).toBe(201);
    productId = (await jsonOf<Product>(product)).id;
  });

  afterAll(() => {
    service?.proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    const paid = acked.orders.filter((o) => o.status === "PAID").length;
    const declined = acked.orders.filter((o) => o.status === "PAYMENT_FAILED").length;
    console.log(
      `crash: ${survived} kills survived; acknowledged and found intact: ${acked.users.length} users, ${acked.orders.length} orders ` +
        `(${paid} paid, ${declined} declined), ${acked.files.length} files; left behind: ${orphans.size} complete files without a row, ${temps.size} temp files`,
    );
  });

  /** One worker's loop: a create, an order or an upload in turn, until the server dies. */
  async function worker(url: string, round: number, w: number, stop: { dead: boolean }) {
    const auth = { authorization: `Bearer ${token}` };
    for (let i = 0; !stop.dead; i++) {
      const tag = `r${round}-w${w}-${i}`;
      try {
        if (i % 3 === 0) {
          const email = `${tag}@crash.example.com`;
          const res = await fetch(`${url}/api/users`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ name: `Crash ${tag}`, email, department: `Dept ${w}` }),
          });
          if (res.status === 201) acked.users.push({ id: (await jsonOf<User>(res)).id, email });
        } else if (i % 3 === 1) {
          const quantity = 1 + (i % 4);
          const res = await fetch(`${url}/api/orders`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ items: [{ productId, quantity }] }),
          });
          if (res.status !== 201) continue;
          const order: Acked["orders"][number] = { id: (await jsonOf<Order>(res)).id, quantity, status: "PENDING" };
          acked.orders.push(order);
          // Pay most orders, a quarter of them with the simulator's declined card (stock goes back).
          if (i % 6 === 4) continue;
          const declined = i % 4 === 1;
          const paid = await fetch(`${url}/api/orders/${order.id}/pay`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ method: "CARD", cardNumber: declined ? "4000000000000002" : "4242424242424242" }),
          });
          const body = await jsonOf<Envelope>(paid);
          if (paid.status === 200) order.status = "PAID";
          else if (body.errorCode === "ORDER_PAYMENT_FAILED") order.status = "PAYMENT_FAILED";
        } else {
          const bytes = uploadBytes(tag, 20_000 + ((w * 7919 + i * 104_729) % 400_000));
          const hash = sha256(bytes);
          sentShas.add(hash);
          const form = new FormData();
          form.append("file", new File([bytes], `${tag}.bin`));
          const res = await fetch(`${url}/api/files/upload`, { method: "POST", headers: auth, body: form });
          if (res.status === 201) acked.files.push({ name: (await jsonOf<FileUploadResponse>(res)).fileName, sha256: hash, size: bytes.length });
        }
      } catch {
        // The connection died with the server: this request's outcome is unknown, and allowed either way.
      }
    }
  }

  async function verify(url: string) {
    const auth = { authorization: `Bearer ${token}` };
    for (const user of acked.users) {
      const res = await fetch(`${url}/api/users/${user.id}`, { headers: auth });
      expect({ id: user.id, status: res.status }).toEqual({ id: user.id, status: 200 });
      expect((await jsonOf<User>(res)).email).toBe(user.email);
    }
    for (const order of acked.orders) {
      const res = await fetch(`${url}/api/orders/${order.id}`, { headers: auth });
      expect({ id: order.id, status: res.status }).toEqual({ id: order.id, status: 200 });
      const body = await jsonOf<Order>(res);
      expect(body.orderItems.map((item) => [item.productId, item.quantity])).toEqual([[productId, order.quantity]]);
      // An answered payment is durable; an unanswered one may or may not have happened.
      if (order.status !== "PENDING") expect({ id: order.id, status: body.status }).toEqual({ id: order.id, status: order.status });
      if (body.status === "PAID") expect(typeof body.paymentId === "string" && typeof body.paidAt === "string").toBe(true);
    }
    for (const file of acked.files) {
      const res = await fetch(`${url}/api/files/download/${file.name}`, { headers: auth });
      expect({ name: file.name, status: res.status }).toEqual({ name: file.name, status: 200 });
      const bytes = new Uint8Array(await res.arrayBuffer());
      expect({ name: file.name, size: bytes.length, sha256: sha256(bytes) }).toEqual({ name: file.name, size: file.size, sha256: file.sha256 });
    }

    // Straight from the database file (WAL allows a reader beside the server).
    const db = createClient({ url: `file:${join(dir, "usersvc.db")}` });
    try {
      const one = async (sql: string) => (await db.execute(sql)).rows[0];
      expect((await one("PRAGMA integrity_check"))[0]).toBe("ok");
      expect(Number((await one("SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id)"))[0])).toBe(0);
      expect(Number((await one("SELECT count(*) FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id)"))[0])).toBe(0);
      const stock = Number((await one(`SELECT stock FROM products WHERE id = ${productId}`))[0]);
      const reserved = Number(
        (
          await one(`SELECT coalesce(sum(i.quantity), 0) FROM order_items i JOIN orders o ON o.id = i.order_id WHERE i.product_id = ${productId} AND o.status <> 'PAYMENT_FAILED'`)
        )[0],
      );
      expect({ stock, reserved, total: stock + reserved }).toEqual({ stock, reserved, total: INITIAL_STOCK });
      const totals = Number((await one("SELECT count(*) FROM orders o WHERE o.total_cents <> (SELECT sum(total_price_cents) FROM order_items i WHERE i.order_id = o.id)"))[0]);
      expect(totals).toBe(0);

      // Files: every row has its exact bytes; every file under a real name is complete.
      const uploads = join(dir, "uploads");
      const rows = (await db.execute("SELECT id, size, sha256 FROM files")).rows;
      const byName = new Map(rows.map((r) => [String(r.id), r]));
      for (const row of rows) {
        const path = join(uploads, String(row.id));
        const bytes = new Uint8Array(readFileSync(path));
        expect({ name: row.id, size: bytes.length, sha256: sha256(bytes) }).toEqual({ name: row.id, size: Number(row.size), sha256: String(row.sha256) });
      }
      for (const entry of readdirSync(uploads)) {
        if (entry.startsWith(".")) {
          temps.add(entry); // a temp name: never served, swept at start once stale
          continue;
        }
        if (byName.has(entry)) continue;
        orphans.add(entry);
        // Renamed into place but the process died before its row: whole bytes of something sent, never partial.
        const bytes = new Uint8Array(readFileSync(join(uploads, entry)));
        expect({ orphan: entry, complete: sentShas.has(sha256(bytes)) }).toEqual({ orphan: entry, complete: true });
        expect(statSync(join(uploads, entry)).isFile()).toBe(true);
      }
    } finally {
      db.close();
    }
  }

  for (const [round, killAfter] of KILL_AFTER_MS.entries()) {
    test(`round ${round + 1}: SIGKILL ${killAfter} ms into the burst, restart, verify`, async () => {
      const stop = { dead: false };
      const url = service!.url;
      const burst = Array.from({ length: WORKERS }, (_, w) => worker(url, round, w, stop));
      await Bun.sleep(killAfter);
      service!.proc.kill("SIGKILL");
      await service!.proc.exited;
      stop.dead = true;
      await Promise.all(burst);
      survived++;

      service = await startBinary(dir, port);
      await verify(service.url);
      expect(acked.users.length + acked.orders.length + acked.files.length).toBeGreaterThan(0);
    }, 120_000);
  }
});
