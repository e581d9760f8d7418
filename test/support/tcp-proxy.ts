/**
 * The test kit's TCP proxies in front of sqld (test/support/sqld.ts): one process per test run,
 * never inside the test runner, whose event loop an embedded replica's synchronous calls block
 * (a proxy there could not pass on the bytes the blocked call waits for). It prints
 * `listening <control port>` and ends when its stdin closes. Controls, over HTTP on that port:
 *
 *   POST   /proxies?target=PORT        a new proxy to 127.0.0.1:PORT: {"port": …}
 *   POST   /proxies/PORT/state?to=S    up; down (refuses connections, drops the open ones: a vanished
 *                                      primary); hung (takes connections, passes nothing on: a
 *                                      stopped primary); back up, the hung connections are dropped
 *   POST   /proxies/PORT/delay?ms=N    every chunk waits N ms, each direction (a primary far away)
 *   POST   /proxies/PORT/garble        the next chunk to a client comes after a WebSocket frame with RSV2
 *                                      set, which a client refuses, dropping its connection (what Bun's
 *                                      client does now and then to sqld's well-formed frames; libsql.ts)
 *   GET    /proxies/PORT/stats         {"roundTrips": Hrana requests and replica write delegations, "pulls": an
 *                                      embedded replica's syncs, since the last reset}
 *   POST   /proxies/PORT/reset
 *   DELETE /proxies/PORT
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

type State = "up" | "down" | "hung";

interface Proxy {
  target: number;
  server: Server;
  state: State;
  delayMs: number;
  /** The next chunk to a client is preceded by a frame it refuses (POST garble). */
  garble: boolean;
  roundTrips: number;
  pulls: number;
  sockets: Set<Socket>;
  /** Connections taken while hung: dropped when the proxy comes back up. */
  held: Set<Socket>;
}

const proxies = new Map<number, Proxy>();
/**
 * A round trip: a Hrana request over HTTP, or a statement an embedded replica hands to its
 * primary (gRPC-web write delegation); not the replica's pulls. Its request line, which a body
 * never holds (JSON has no raw CR LF, and a protobuf body is length-prefixed, never parsed here).
 */
const REQUEST = /POST \/(?:v\d+\/(?:pipeline|cursor)|proxy\.Proxy\/\w+) HTTP\/1\.1\r\n/g;
/** A replica's pull: its Hello, then one BatchLogEntries (two round trips, one after the other). */
const PULL = /POST \/wal_log\.ReplicationLog\/Hello HTTP\/1\.1\r\n/g;

function listen(proxy: Proxy, port = 0): Promise<number> {
  proxy.server = createServer((client) => accept(proxy, client));
  return new Promise((resolve) => proxy.server.listen(port, "127.0.0.1", () => resolve((proxy.server.address() as { port: number }).port)));
}

function accept(proxy: Proxy, client: Socket) {
  proxy.sockets.add(client);
  client.on("close", () => {
    proxy.sockets.delete(client);
    proxy.held.delete(client);
  });
  client.on("error", () => client.destroy());
  if (proxy.state === "hung") {
    proxy.held.add(client);
    client.on("data", () => {});
    return;
  }
  const upstream = createConnection(proxy.target, "127.0.0.1");
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  proxy.sockets.add(upstream);
  upstream.on("close", () => {
    proxy.sockets.delete(upstream);
    setTimeout(() => client.destroy(), proxy.delayMs);
  });
  client.on("close", () => setTimeout(() => upstream.destroy(), proxy.delayMs));
  upstream.on("error", () => upstream.destroy());
  let tail = "";
  pipe(proxy, client, upstream, (chunk) => {
    const text = tail + chunk.toString("latin1");
    let end = 0;
    for (const found of text.matchAll(REQUEST)) {
      proxy.roundTrips++;
      end = found.index + found[0].length;
    }
    for (const found of text.matchAll(PULL)) {
      proxy.pulls++;
      end = Math.max(end, found.index + found[0].length);
    }
    // A request line split between two chunks is counted with the second.
    tail = text.slice(Math.max(end, text.length - 40));
  });
  pipe(proxy, upstream, client, undefined, (chunk) => {
    if (!proxy.garble) return chunk;
    proxy.garble = false;
    return Buffer.concat([REFUSED_FRAME, chunk]);
  });
}

/** A final text frame, empty, with RSV2 set: no extension was negotiated, so a client must fail the connection (RFC 6455 5.2). */
const REFUSED_FRAME = Buffer.from([0xa1, 0x00]);

/** Passes `from`'s bytes on to `to`, after the delay; while hung, holds them back (they are dropped with the connection). */
function pipe(proxy: Proxy, from: Socket, to: Socket, seen?: (chunk: Buffer) => void, change = (chunk: Buffer) => chunk) {
  from.on("data", (chunk: Buffer) => {
    if (proxy.state === "hung") {
      proxy.held.add(from);
      return;
    }
    seen?.(chunk);
    const sent = change(chunk);
    const send = () => to.writable && to.write(sent);
    if (proxy.delayMs > 0) setTimeout(send, proxy.delayMs);
    else send();
  });
}

async function setState(proxy: Proxy, port: number, to: State) {
  const was = proxy.state;
  proxy.state = to;
  if (to === "down" && was !== "down") {
    // close() waits for the open connections, so they go first.
    const closed = new Promise((resolve) => proxy.server.close(resolve));
    for (const socket of proxy.sockets) socket.destroy();
    await closed;
  }
  if (to !== "down" && was === "down") await listen(proxy, port);
  if (to === "up" && was === "hung") {
    for (const socket of proxy.held) socket.destroy();
    proxy.held.clear();
  }
}

const json = (body: unknown, status = 200) => Response.json(body, { status });

const control = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/proxies") {
      const proxy: Proxy = {
        target: Number(url.searchParams.get("target")),
        server: undefined as never,
        state: "up",
        delayMs: 0,
        garble: false,
        roundTrips: 0,
        pulls: 0,
        sockets: new Set(),
        held: new Set(),
      };
      const port = await listen(proxy);
      proxies.set(port, proxy);
      return json({ port });
    }
    const match = /^\/proxies\/(\d+)(?:\/(\w+))?$/.exec(url.pathname);
    const port = Number(match?.[1]);
    const proxy = proxies.get(port);
    if (!proxy) return json({ error: "no such proxy" }, 404);
    switch (`${request.method} ${match?.[2] ?? ""}`) {
      case "POST state":
        await setState(proxy, port, url.searchParams.get("to") as State);
        break;
      case "POST delay":
        proxy.delayMs = Number(url.searchParams.get("ms"));
        break;
      case "POST garble":
        proxy.garble = true;
        break;
      case "GET stats":
        return json({ roundTrips: proxy.roundTrips, pulls: proxy.pulls });
      case "POST reset":
        proxy.roundTrips = 0;
        proxy.pulls = 0;
        break;
      case "DELETE ":
        await setState(proxy, port, "down");
        proxies.delete(port);
        break;
      default:
        return json({ error: "unknown control" }, 404);
    }
    return json({ ok: true });
  },
});

console.log(`listening ${control.port}`);
// The test run that started it is gone: so is it.
for await (const _ of Bun.stdin.stream());
process.exit(0);
