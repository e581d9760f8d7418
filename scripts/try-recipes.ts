/**
 * npm run test:recipes: the recipes of docs/contributing.md, done. Each docs/recipes/*.patch is a
 * worked example (a feature as the recipe writes it); for each, a scratch copy of the committed
 * HEAD (`git archive`, node_modules linked to this checkout's) gets the patch applied, its drizzle
 * migration generated (`npx drizzle-kit generate`, as the recipe says; a patch that changes
 * src/db/schema.ts must yield exactly one), then `npm run typecheck`, `npm run lint`, the patch's
 * own test files and `npm run test:surface` on the native leg. A recipe whose example no longer
 * applies, builds or passes fails here, so the doc cannot drift from the code.
 *
 * Prints one line per recipe, `recipe <name>: ok (Ns)` or what failed with the end of its output
 * (the copy is left in place then), and last `recipes: N ok, N failed`, which .ci/run counts;
 * exits 1 on any failure. Arguments: patch files to try instead of docs/recipes/*.patch (read
 * from the working tree, still applied to HEAD).
 */
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
/** One step's limit: a hung step (drizzle-kit asking a question, a test waiting forever) fails instead. */
const STEP_TIMEOUT_MS = 240_000;
/** Lines of a failed step's output shown. */
const TAIL = 40;

interface Run {
  code: number;
  output: string;
}

/** Runs `argv` in `cwd`, stdout and stderr together; a step past STEP_TIMEOUT_MS is killed. */
async function run(argv: string[], cwd: string): Promise<Run> {
  // The suites choose their leg from these: the recipe runs on the default one, native.
  const { TEST_LEG: _leg, DATABASE_DRIVER: _driver, ...env } = process.env;
  const child = Bun.spawn(argv, { cwd, env: { ...env, DATABASE_DRIVER: "native" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => child.kill("SIGKILL"), STEP_TIMEOUT_MS);
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  clearTimeout(timer);
  return { code: child.signalCode ? 124 : code, output: `${out}${err}` };
}

const tail = (text: string) => text.trimEnd().split("\n").slice(-TAIL).join("\n");
const migrations = (dir: string) => readdirSync(join(dir, "drizzle")).filter((name) => name.endsWith(".sql"));
/** The files a patch creates or changes, from its `+++ b/<path>` lines. */
const touched = (patch: string) => [...patch.matchAll(/^\+\+\+ b\/(\S+)$/gm)].map((match) => match[1]);

/** One recipe in its own copy: undefined when every step passed, else what failed and its output. */
async function tryRecipe(patch: string, copy: string): Promise<{ step: string; output: string } | undefined> {
  const tarball = join(copy, ".head.tar");
  const archive = await run(["git", "archive", "--format=tar", "-o", tarball, "HEAD"], ROOT);
  if (archive.code !== 0) return { step: "git archive HEAD", output: archive.output };
  const extracted = await run(["tar", "-xf", tarball, "-C", copy], ROOT);
  if (extracted.code !== 0) return { step: "tar -x", output: extracted.output };
  rmSync(tarball);
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(copy, "node_modules"));

  const text = readFileSync(patch, "utf8");
  writeFileSync(join(copy, ".recipe.patch"), text);
  const applied = await run(["git", "apply", "--whitespace=nowarn", ".recipe.patch"], copy);
  if (applied.code !== 0) return { step: "git apply (the patch no longer applies to HEAD)", output: applied.output };
  rmSync(join(copy, ".recipe.patch"));

  const files = touched(text);
  const before = migrations(copy);
  const generated = await run(["npx", "drizzle-kit", "generate"], copy);
  if (generated.code !== 0) return { step: "npx drizzle-kit generate", output: generated.output };
  const made = migrations(copy).filter((name) => !before.includes(name));
  const expected = files.includes("src/db/schema.ts") ? 1 : 0;
  if (made.length !== expected) return { step: `npx drizzle-kit generate made ${made.length} migrations, not ${expected}`, output: generated.output };

  const tests = files.filter((file) => /^test\/.*\.test\.ts$/.test(file));
  const steps: [string, string[]][] = [
    ["npm run typecheck", ["npm", "run", "typecheck"]],
    ["npm run lint", ["npm", "run", "lint"]],
    ...(tests.length > 0 ? [[`bun test ${tests.join(" ")}`, ["npx", "bun", "test", ...tests]] as [string, string[]]] : []),
    ["npm run test:surface", ["npm", "run", "test:surface"]],
  ];
  for (const [step, argv] of steps) {
    const result = await run(argv, copy);
    if (result.code !== 0) return { step, output: result.output };
  }
  return undefined;
}

const patches =
  process.argv.length > 2
    ? process.argv.slice(2).map((path) => resolve(path))
    : readdirSync(join(ROOT, "docs/recipes"))
        .filter((name) => name.endsWith(".patch"))
        .sort()
        .map((name) => join(ROOT, "docs/recipes", name));
const head = (await run(["git", "rev-parse", "--short", "HEAD"], ROOT)).output.trim();
console.log(`== ${patches.length} recipe(s) on a copy of HEAD ${head} (uncommitted changes are not in it)`);

let failed = 0;
for (const patch of patches) {
  const name = basename(patch, ".patch");
  const copy = mkdtempSync(join(tmpdir(), `usersvc-recipe-${name}-`));
  const started = performance.now();
  const failure = await tryRecipe(patch, copy);
  const seconds = Math.round((performance.now() - started) / 1000);
  if (failure === undefined) {
    console.log(`recipe ${name}: ok (${seconds}s)`);
    rmSync(copy, { recursive: true, force: true });
  } else {
    failed++;
    console.log(`recipe ${name}: FAILED at ${failure.step} (${seconds}s); the copy is left in ${copy}\n${tail(failure.output)}`);
  }
}
console.log(`recipes: ${patches.length - failed} ok, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
