/**
 * The ceilings usersvc is measured against: the least a Bun HTTP server can do.
 *   bun bench/ceiling.ts json PORT               a fixed ~250-byte JSON
 *   bun bench/ceiling.ts sqlite PORT FILE        one bun:sqlite point read of `users` by random id
 *   bun bench/ceiling.ts libsql PORT FILE        the same read through @libsql/client as usersvc opens it
 *                                                (with src/db/embedded-tuning.ts: the floor of usersvc's driver)
 */
import { Database } from "bun:sqlite";
import { createClient } from "@libsql/client";
import { tuneEmbeddedConnections } from "../src/db/embedded-tuning";

const [mode, portArg, file] = process.argv.slice(2);
const port = Number(portArg);
const headers = { "content-type": "application/json" };

const FIXED = JSON.stringify({
  id: 4711,
  name: "Ada Lovelace",
  email: "ada.lovelace@example.com",
  department: "Engineering",
  phone: "+44 20 7946 0000",
  active: true,
  createdAt: "2026-01-01T00:00:00.000Z",
  updatedAt: "2026-01-01T00:00:00.000Z",
  lastLogin: null,
  version: 3,
  roles: ["USER"],
});

let fetchHandler: (request: Request) => Response | Promise<Response>;
if (mode === "json") {
  fetchHandler = () => new Response(FIXED, { headers });
} else if (mode === "sqlite") {
  const db = new Database(file, { readonly: true });
  const count = (db.query("select max(id) as n from users").get() as { n: number }).n;
  const byId = db.query("select id, name, email, phone, active, created_at, updated_at, version from users where id = ?");
  fetchHandler = () => Response.json(byId.get(1 + Math.floor(Math.random() * count)));
} else if (mode === "libsql") {
  tuneEmbeddedConnections();
  const client = createClient({ url: `file:${file}` });
  const count = Number((await client.execute("select max(id) as n from users")).rows[0].n);
  fetchHandler = async () => {
    const result = await client.execute({ sql: "select id, name, email, phone, active, created_at, updated_at, version from users where id = ?", args: [1 + Math.floor(Math.random() * count)] });
    return Response.json(result.rows[0]);
  };
} else {
  throw new Error(`unknown ceiling "${mode}"`);
}

Bun.serve({ port, hostname: "127.0.0.1", fetch: fetchHandler });
console.log("ready");
