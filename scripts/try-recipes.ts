/**
 * npm run test:recipes: the recipes of docs/contributing.md, done. Each docs/recipes/*.patch is a
 * worked example (a feature as the recipe writes it); for each, a scratch copy of the committed
 * HEAD (`git archive`, node_modules linked to this checkout's) gets the patch applied, its drizzle
 * migration generated (`npx drizzle-kit generate`, as the recipe says; a patch that changes
 * src/db/schema.ts must yield exactly one), then `npm run typecheck`, `npm run lint`, the patch's
 * own test files and `npm run test:surface` on the native leg. A recipe whose example no longer
 * applies, builds or passes fails here, so the doc cannot drift from the code.
 *
 * A patch whose context lines moved (the next feature added its line beside the same anchor in
 * src/app.ts or schema.ts) is applied with `patch --fuzz` and still tried: the line says so, and
 * `--refresh` writes the example back as it now applies (the patch's opening text kept).
 *
 * Prints one line per recipe, `recipe <name>: ok (Ns: the steps)` or what failed with the end of
 * its output (the copy is left in place then), and last `recipes: N ok, N failed`, which .ci/run
 * counts; exits 1 on any failure. Arguments: `--refresh`, and patch files to try instead of
 * docs/recipes/*.patch (read from the working tree, still applied to HEAD).
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

/** The patch's opening text, before its first file: `git apply` and `patch` skip it. */
const preamble = (patch: string) => patch.slice(0, Math.max(0, patch.indexOf("diff --git ")));

/**
 * Applies the patch in `copy`: exactly (`git apply`), or else with moved context (`patch --fuzz`,
 * no reject files). With --refresh the copy is made a git repository of HEAD first, so the example
 * as it now stands can be read back (`refreshed`); a plain run spares committing the whole tree.
 */
async function applyPatch(text: string, copy: string): Promise<{ fuzzy: boolean } | { output: string }> {
  if (refresh) {
    for (const argv of [
      ["git", "init", "-q"],
      ["git", "add", "-A"],
      ["git", "-c", "user.name=recipe", "-c", "user.email=recipe@localhost", "commit", "-qm", "HEAD"],
    ]) {
      const step = await run(argv, copy);
      if (step.code !== 0) return { output: step.output };
    }
  }
  writeFileSync(join(copy, ".recipe.patch"), text);
  try {
    if ((await run(["git", "apply", "--whitespace=nowarn", ".recipe.patch"], copy)).code === 0) return { fuzzy: false };
    const fuzzed = await run(["patch", "-p1", "--fuzz=3", "--forward", "--no-backup-if-mismatch", "--reject-file=-", "-i", ".recipe.patch"], copy);
    return fuzzed.code === 0 ? { fuzzy: true } : { output: fuzzed.output };
  } finally {
    rmSync(join(copy, ".recipe.patch"));
  }
}

/** The example as applied in `copy`, as a patch with `text`'s opening (drizzle/, which the recipe generates, left out). */
async function refreshed(text: string, copy: string): Promise<string | undefined> {
  await run(["git", "add", "-N", "."], copy);
  const diff = await run(["git", "diff", "--", ".", ":(exclude)drizzle"], copy);
  return diff.code === 0 ? `${preamble(text)}${diff.output}` : undefined;
}

interface Tried {
  failure?: { step: string; output: string };
  fuzzy: boolean;
  steps: string[];
}

/** One recipe in its own copy: the steps it passed, or what failed and its output. */
async function tryRecipe(patch: string, copy: string): Promise<Tried> {
  const tried = await stepsOf(patch, copy);
  if (refresh && !tried.failure && tried.fuzzy) {
    const text = await refreshed(readFileSync(patch, "utf8"), copy);
    if (text === undefined) return { ...tried, failure: { step: "git diff (--refresh)", output: "" } };
    writeFileSync(patch, text);
  }
  return tried;
}

async function stepsOf(patch: string, copy: string): Promise<Tried> {
  const failed = (step: string, output: string, fuzzy = false): Tried => ({ failure: { step, output }, fuzzy, steps: [] });
  const tarball = join(copy, ".head.tar");
  const archive = await run(["git", "archive", "--format=tar", "-o", tarball, "HEAD"], ROOT);
  if (archive.code !== 0) return failed("git archive HEAD", archive.output);
  const extracted = await run(["tar", "-xf", tarball, "-C", copy], ROOT);
  if (extracted.code !== 0) return failed("tar -x", extracted.output);
  rmSync(tarball);

  const text = readFileSync(patch, "utf8");
  const applied = await applyPatch(text, copy);
  if ("output" in applied) return failed("applying the patch (it no longer applies to HEAD, even with fuzz)", applied.output);
  const { fuzzy } = applied;
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(copy, "node_modules"));

  const files = touched(text);
  const before = migrations(copy);
  const generated = await run(["npx", "drizzle-kit", "generate", "--name", "recipe"], copy);
  if (generated.code !== 0) return failed("npx drizzle-kit generate", generated.output, fuzzy);
  const made = migrations(copy).filter((name) => !before.includes(name));
  const expected = files.includes("src/db/schema.ts") ? 1 : 0;
  if (made.length !== expected) return failed(`npx drizzle-kit generate made ${made.length} migrations, not ${expected}`, generated.output, fuzzy);

  const tests = files.filter((file) => /^test\/.*\.test\.ts$/.test(file));
  const steps: [string, string[]][] = [
    ["npm run typecheck", ["npm", "run", "typecheck"]],
    ["npm run lint", ["npm", "run", "lint"]],
    ...(tests.length > 0 ? [[`bun test ${tests.join(" ")}`, ["npx", "bun", "test", ...tests]] as [string, string[]]] : []),
    ["npm run test:surface", ["npm", "run", "test:surface"]],
  ];
  for (const [step, argv] of steps) {
    const result = await run(argv, copy);
    if (result.code !== 0) return failed(step, result.output, fuzzy);
  }
  return { fuzzy, steps: ["apply", "generate", ...steps.map(([step]) => step.replace(/^(npm run|bun) /, ""))] };
}

const args = process.argv.slice(2);
const refresh = args.includes("--refresh");
const named = args.filter((arg) => arg !== "--refresh");
const patches =
  named.length > 0
    ? named.map((path) => resolve(path))
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
  const { failure, fuzzy, steps } = await tryRecipe(patch, copy);
  const seconds = Math.round((performance.now() - started) / 1000);
  if (failure === undefined) {
    const moved = !fuzzy
      ? ""
      : refresh
        ? "; its context had moved: written back as it now applies"
        : "; its context has moved (applied with fuzz): npm run test:recipes -- --refresh";
    console.log(`recipe ${name}: ok (${seconds}s: ${steps.join(", ")}${moved})`);
    rmSync(copy, { recursive: true, force: true });
  } else {
    failed++;
    console.log(`recipe ${name}: FAILED at ${failure.step} (${seconds}s); the copy is left in ${copy}\n${tail(failure.output)}`);
  }
}
console.log(`recipes: ${patches.length - failed} ok, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
