/**
 * The client's address, for per-address limits. By default the socket's peer: X-Forwarded-For
 * is anyone's to write, so trusting it would let a client pick a fresh address per attempt.
 * Behind N reverse proxies of your own, TRUST_PROXY=N takes the address the Nth proxy saw
 * (the Nth X-Forwarded-For entry from the right), as Express's "trust proxy" hop count does.
 * app.handle (tests) has no socket: such requests share the peer "local".
 */
type Server = { requestIP(request: Request): { address: string } | null } | null | undefined;

export function clientAddress(server: Server, request: Request, trustedProxies: number): string {
  const peer = server?.requestIP(request)?.address ?? "local";
  if (trustedProxies === 0) return peer;
  const forwarded = (request.headers.get("x-forwarded-for") ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  // Nearest first: the peer, then each proxy's view of who called it.
  const chain = [peer, ...forwarded.reverse()];
  return chain[Math.min(trustedProxies, chain.length - 1)];
}
