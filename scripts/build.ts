/**
 * npm run build → dist/usersvc, one self-contained executable.
 * The libSQL client picks its native addon with a computed require (`@libsql/${target}`)
 * that the bundler cannot follow (oven-sh/bun#18909); the plugin below makes it a static
 * require of this platform's index.node, so the addon is embedded in the binary.
 */
import { $ } from "bun";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleConsole } from "../src/features/console/bundle";
import { bundleAccountPages } from "../src/features/account/bundle";
import { MERGE_EVERY_MS } from "../src/features/search/index-upkeep";

const target = process.env.USERSVC_TARGET ?? "bun-linux-x64";
const libsqlAddon = { "bun-linux-x64": "@libsql/linux-x64-gnu", "bun-linux-arm64": "@libsql/linux-arm64-gnu" }[target];
if (!libsqlAddon) throw new Error(`no libSQL addon known for ${target}`);

/**
 * Tier-up thresholds × this until main.ts calls Bun.unsafe.setJITPolicy(1) (its first answer to
 * anything but a health probe). It keeps an idle server's background work (the outbox sender's
 * pass every second, the name index's upkeep) out of the optimizing JIT too: at 100 that work
 * reached the DFG and FTL after ~100 s of idling, whose compilers' code pages took ~4 MiB of RSS.
 */
const STARTUP_JIT_POLICY = 10_000;

const commit = (await $`git rev-parse --short HEAD`.nothrow().quiet().text()).trim() || "unknown";
mkdirSync("dist", { recursive: true });
// The admin console, bundled once and embedded (src/features/console/bundle.ts reads CONSOLE_BUNDLE).
const consoleBundle = await bundleConsole();
// The setup and security pages, likewise (src/features/account/bundle.ts reads ACCOUNT_BUNDLE).
const accountBundle = await bundleAccountPages();

const build = (bytecodeOrder: string | null) =>
  Bun.build({
    entrypoints: ["src/main.ts"],
    compile: {
      target: target as never,
      outfile: "dist/usersvc",
      autoloadDotenv: false,
      autoloadBunfig: false,
      // Start-up code (migrations, route compilation) runs once, and an idle server's background work
      // is little: kept out of the JIT until main.ts serves real traffic and sets the normal policy
      // again, so an idle process holds no JIT code (nor the compilers' pages) for it.
      jitPolicy: STARTUP_JIT_POLICY,
      bytecodeOrder,
    },
    // Not minified: Elysia reads each hook's and handler's source to decide whether to await it
    // (`=>` or `return`, then unbroken text and a `(`), so the binary must carry the source the
    // tests ran. Minified, almost every arrow function read as async: the binary awaited the access
    // log's and the body parser's sync hooks on every request (~1.4 µs of a served user read's ~46).
    // Minifying syntax alone turned `return findUser(…)` into a comma expression that no longer
    // read so: /api/search/profile answered `{}`, its promise unawaited. Costs 2.2 MiB of binary
    // and ~0.4 MiB of idle RSS (Elysia reads that source at start).
    minify: false,
    bytecode: true,
    sourcemap: "none",
    define: {
      BUILD_COMMIT: JSON.stringify(commit),
      BUILD_TIME: JSON.stringify(new Date().toISOString()),
      CONSOLE_BUNDLE: JSON.stringify(JSON.stringify(consoleBundle)),
      ACCOUNT_BUNDLE: JSON.stringify(JSON.stringify(accountBundle)),
      "process.env.NODE_ENV": '"production"',
    },
    plugins: [
      {
        name: "libsql-static-addon",
        setup(build) {
          build.onLoad({ filter: /node_modules[\\/]libsql[\\/]index\.js$/ }, async ({ path }) => {
            const source = await Bun.file(path).text();
            // biome-ignore lint/suspicious/noTemplateCurlyInString: libsql's own source text, matched literally.
            const patched = source.replace("return require(`@libsql/${target}`);", `return require("${libsqlAddon}/index.node");`);
            if (patched === source) throw new Error("libsql/index.js changed: update the static addon patch in scripts/build.ts");
            return { contents: patched, loader: "js" };
          });
        },
      },
    ],
  });

/**
 * Profile-guided bytecode layout: the executable is run once (start, health, a refused read,
 * idling until the name index's first upkeep step has run, SIGTERM) with BUN_BYTECODE_ORDER_OUT,
 * then built again with what that run used laid out together, so a process touches fewer pages
 * of its bytecode (~2.5 MiB less idle RSS, npm run bench). The idling is part of it: code first
 * run by an idle server's background work, laid out among cold code, faulted in a 128 KiB window
 * of the executable per function (~1 MiB by 60 s). Skipped when this machine cannot run the
 * target (cross builds).
 */
async function recordStartOrder(): Promise<{ dir: string; file: string } | null> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-order-"));
  const order = join(dir, "bytecode.order");
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  const env = {
    ...process.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    DATA_DIR: join(dir, "data"),
    DATABASE_URL: `file:${join(dir, "data/usersvc.db")}`,
    BUN_BYTECODE_ORDER_OUT: order,
  };
  try {
    // Recorded as a server usually starts: on a data folder that has its ADMIN, with ADMIN_EMAIL set
    // (a restart's check of it otherwise loads its code from cold pages, ~1 MiB).
    const admin = { ADMIN_EMAIL: "admin@order.example.com", ADMIN_PASSWORD: "Order-Admin-1!" };
    const made = Bun.spawnSync(["dist/usersvc", "admin", "create", "--email", admin.ADMIN_EMAIL, "--password", admin.ADMIN_PASSWORD], {
      env: { ...env, BUN_BYTECODE_ORDER_OUT: undefined },
      stdout: "ignore",
      stderr: "ignore",
    });
    if (made.exitCode !== 0) return null;
    const proc = Bun.spawn(["dist/usersvc", "serve"], { env: { ...env, ...admin }, stdout: "ignore", stderr: "ignore" });
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 200 && proc.exitCode === null; i++) {
      const health = await fetch(`${base}/actuator/health`).catch(() => undefined);
      if (health?.status === 200) {
        await fetch(`${base}/api/users/1`);
        await Bun.sleep(MERGE_EVERY_MS + 2000);
        break;
      }
      await Bun.sleep(25);
    }
    proc.kill("SIGTERM");
    await proc.exited;
    return existsSync(order) ? { dir, file: order } : null;
  } catch {
    return null;
  }
}

let result = await build(null);
if (result.success && target === `bun-linux-${process.arch}`) {
  const order = await recordStartOrder();
  if (order) result = await build(order.file);
  else console.warn("no bytecode order recorded: building without one");
  if (order) rmSync(order.dir, { recursive: true, force: true });
}
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
const size = Bun.file("dist/usersvc").size;
console.log(`dist/usersvc ${(size / 1024 / 1024).toFixed(1)} MiB (${target}, ${commit})`);
