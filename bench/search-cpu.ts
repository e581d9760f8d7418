/**
 * The name search against the user read as CPU per request, in this process: the issue's figure
 * (`npm run bench`, "name search against the user read") without the wall clock, which moves by
 * more than the effects measured here on two shared cores. The app is built as the tests build it
 * (test/helpers.ts) on the bench's 10,000 users with the name index in one segment, and each
 * request goes through app.handle.
 *
 *   bun bench/search-cpu.ts [rounds=100] [requests per block=300]
 *
 * A round is a block of user reads, a block of searches and a block of user reads again; its ratio
 * is the reads' mean over the search's, so load that comes and goes weighs on both sides alike.
 * Printed: the median of each request's main-thread CPU and the median ratio (≈ search req/s ÷
 * user req/s for a server bound by this thread). The main thread's time is read with
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID): /proc/thread-self/schedstat and process.threadCpuUsage
 * move by scheduler ticks on this kernel, too coarse for blocks of a few milliseconds.
 * SEARCH_PATH overrides the search request (default the one `npm run bench` measures).
 */
import { seedUsers } from "./seed-users";
import { dlopen, FFIType, ptr } from "bun:ffi";
import { makeTestApp } from "../test/helpers";

const USERS = 10_000;
const ROUNDS = Number(process.argv[2] ?? 100);
const BLOCK = Number(process.argv[3] ?? 300);
const SEARCH = process.env.SEARCH_PATH ?? "/api/search/users?name=Ann&size=10";

const CLOCK_THREAD_CPUTIME_ID = 3;
const libc = dlopen("libc.so.6", { clock_gettime: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 } });
const timespec = new BigInt64Array(2);
const timespecPtr = ptr(timespec);
/** This thread's CPU time in µs. */
function threadCpu() {
  libc.symbols.clock_gettime(CLOCK_THREAD_CPUTIME_ID, timespecPtr);
  return Number(timespec[0]) * 1e6 + Number(timespec[1]) / 1000;
}

const t = await makeTestApp({ LOG_LEVEL: "warn" });
const { token } = await t.admin();
// The seed of npm run bench: the same names, e-mails, ages and instants.
const file = seedUsers(t.config.databaseUrl.slice("file:".length), USERS);
// The index in one segment, as the server's upkeep leaves it (src/features/search/index-upkeep.ts),
// and the pages in the database file, as the bench's seeding leaves them.
file.exec("insert into users_name_fts (users_name_fts, rank) values ('merge', -100000)");
file.exec("PRAGMA wal_checkpoint(TRUNCATE)");
file.close();

const base = `http://localhost${t.config.basePath}`;
const headers = { authorization: `Bearer ${token}` };
const urls = {
  user: (i: number) => `${base}/api/users/${1 + (i % USERS)}`,
  search: () => base + SEARCH,
};

/** Main-thread CPU per request over `n` requests of one kind, each answer read whole. */
async function block(kind: keyof typeof urls, n = BLOCK) {
  const before = threadCpu();
  for (let i = 0; i < n; i++) {
    const response = await t.app.handle(new Request(urls[kind](i), { headers }));
    if (response.status !== 200) throw new Error(`${kind}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  }
  return (threadCpu() - before) / n;
}

const sample = await t.app.handle(new Request(urls.search(), { headers }));
const bytes = (await sample.arrayBuffer()).byteLength;
for (let i = 0; i < 10; i++) {
  await block("user");
  await block("search");
}
const user: number[] = [];
const search: number[] = [];
const ratios: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const before = await block("user");
  const s = await block("search");
  const reads = (before + (await block("user"))) / 2;
  user.push(reads);
  search.push(s);
  ratios.push(reads / s);
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.log(`GET /api/users/{id}: ${median(user).toFixed(1)} µs/request (median of ${ROUNDS} blocks of ${BLOCK})`);
console.log(`GET ${SEARCH}: ${median(search).toFixed(1)} µs/request, ${bytes} bytes`);
console.log(`ratio (user CPU / search CPU, paired by round): ${median(ratios).toFixed(3)}`);
await t.close();
