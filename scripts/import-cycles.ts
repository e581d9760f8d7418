/**
 * npm run check:cycles: every import circle among the modules of src/, found by walking their
 * relative imports (static, dynamic and re-exports; type-only ones too, since a type import
 * still ties the two modules' designs together). Prints each circle as a chain of paths and
 * exits 1 when there is any, so CI fails on the first one.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const SRC = join(ROOT, "src");
const SOURCE = /\.(ts|tsx|js|mjs)$/;
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return SOURCE.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The module a relative specifier names, as the bundler resolves it (extension or index optional). */
function resolveImport(from: string, specifier: string): string | undefined {
  const base = resolve(dirname(from), specifier);
  const candidates = [base, ...[".ts", ".tsx", ".js", ".mjs"].map((ext) => base + ext), ...["index.ts", "index.tsx", "index.js"].map((index) => join(base, index))];
  return candidates.find((path) => existsSync(path) && statSync(path).isFile() && SOURCE.test(path));
}

const files = sources(SRC);
const edges = new Map<string, string[]>();
for (const file of files) {
  // Comments may quote an import; they are no edge.
  const text = readFileSync(file, "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  const targets = new Set<string>();
  for (const [, specifier] of text.matchAll(IMPORT)) {
    const target = resolveImport(file, specifier);
    if (target?.startsWith(SRC)) targets.add(target);
  }
  edges.set(file, [...targets].sort());
}

/** Tarjan's strongly connected components: a component of two or more modules (or one importing itself) holds a circle. */
function components(): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (edges.get(node) ?? []).includes(node)) found.push(component);
    }
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return found;
}

/** One shortest circle through the component's first module, by breadth-first search inside it. */
function circleIn(component: string[]): string[] {
  const members = new Set(component);
  const start = [...component].sort()[0];
  const previous = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const next of edges.get(queue[i]) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const chain = [queue[i]];
        while (chain[0] !== start) chain.unshift(previous.get(chain[0])!);
        return [...chain, start];
      }
      if (!previous.has(next)) {
        previous.set(next, queue[i]);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

const circles = components();
for (const component of circles) {
  const name = (path: string) => relative(ROOT, path);
  console.log(`circle (${component.length} modules): ${circleIn(component).map(name).join(" → ")}`);
}
console.log(`import circles in src: ${circles.length} (${files.length} modules, ${[...edges.values()].reduce((n, targets) => n + targets.length, 0)} imports)`);
process.exit(circles.length > 0 ? 1 : 0);
