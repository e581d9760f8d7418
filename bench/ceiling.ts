/**
 * The machine's ceiling in npm run bench: the least a Bun HTTP server can do, a fixed ~250-byte JSON.
 *   bun bench/ceiling.ts json PORT
 * (The database-backed reference is the lean floor beside the repository: see bench/run.ts.)
 */
const [mode, portArg] = process.argv.slice(2);
if (mode !== "json") throw new Error(`unknown ceiling "${mode}"`);
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

Bun.serve({ port, hostname: "127.0.0.1", fetch: () => new Response(FIXED, { headers }) });
console.log("ready");
