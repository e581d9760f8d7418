/**
 * The client network an address belongs to, for counting login failures per e-mail and network
 * (docs/security.md, "Throttling and lockout"): an IPv4 address's /24, an IPv6 address's /48 (an IPv4-mapped
 * IPv6 address counts as its IPv4 address). Anything else (app.handle's "local") is its own network.
 */
export function clientNetwork(address: string): string {
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.\d{1,3}$/i.exec(address);
  if (v4) return `${v4[1]}.${v4[2]}.${v4[3]}.0/24`;
  const groups = ipv6Groups(address);
  return groups ? `${groups.slice(0, 3).join(":")}::/48` : address;
}

/** The first three 16-bit groups of an IPv6 address (in lower-case hex, no leading zeros), or undefined if it is none. */
function ipv6Groups(address: string): string[] | undefined {
  // A zone ("%eth0") names an interface, not a network.
  const plain = address.split("%")[0].toLowerCase();
  if (!/^[0-9a-f:.]+$/.test(plain) || !plain.includes(":")) return undefined;
  const [head, tail, ...more] = plain.split("::");
  if (more.length > 0) return undefined;
  const parts = (text: string | undefined) => (text ? text.split(":") : []);
  const left = parts(head);
  const right = parts(tail);
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const all = [...left, ...Array(tail === undefined ? 0 : missing).fill("0"), ...right];
  if (!all.slice(0, 3).every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined;
  return all.slice(0, 3).map((group) => Number.parseInt(group, 16).toString(16));
}
