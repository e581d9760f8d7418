/**
 * npm test: `bun test` once per database leg (test/legs.ts). The native leg runs every test
 * file; the libsql leg runs the files that take their test functions from test/legs.ts (the
 * ones that touch the database), or whatever files were named. Arguments pass through to each
 * run; a JUnit report (--reporter-outfile=FILE) is written per leg and merged into FILE.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const LEGS = ["native", "libsql"] as const;
const OUTFILE = "--reporter-outfile=";

const args = process.argv.slice(2);
const outfile = args.find((a) => a.startsWith(OUTFILE))?.slice(OUTFILE.length);
const named = args.some((a) => !a.startsWith("-"));

/** Test files that import ./legs or ../legs. */
function legFiles(dir = join(ROOT, "test")): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return legFiles(path);
    return entry.name.endsWith(".test.ts") && /from "\.\.?\/legs"/.test(readFileSync(path, "utf8")) ? [`./${relative(ROOT, path)}`] : [];
  });
}

let failed = false;
const reports: string[] = [];
for (const leg of LEGS) {
  const report = outfile && `${outfile}.${leg}.xml`;
  const legArgs = args.map((a) => (report && a.startsWith(OUTFILE) ? OUTFILE + report : a));
  const files = leg === "native" || named ? [] : legFiles();
  console.log(`\n== bun test, DATABASE_DRIVER=${leg}`);
  const run = Bun.spawnSync([process.execPath, "test", ...legArgs, ...files], { cwd: ROOT, env: { ...process.env, DATABASE_DRIVER: leg }, stdio: ["inherit", "inherit", "inherit"] });
  if (run.exitCode !== 0) failed = true;
  if (report) reports.push(report);
}

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
