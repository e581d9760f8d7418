/**
 * npm run build → dist/usersvc, one self-contained executable.
 * The libSQL client picks its native addon with a computed require (`@libsql/${target}`)
 * that the bundler cannot follow (oven-sh/bun#18909); the plugin below makes it a static
 * require of this platform's index.node, so the addon is embedded in the binary.
 */
import { $ } from "bun";
import { mkdirSync } from "node:fs";

const target = process.env.USERSVC_TARGET ?? "bun-linux-x64";
const libsqlAddon = { "bun-linux-x64": "@libsql/linux-x64-gnu", "bun-linux-arm64": "@libsql/linux-arm64-gnu" }[target];
if (!libsqlAddon) throw new Error(`no libSQL addon known for ${target}`);

const commit = (await $`git rev-parse --short HEAD`.nothrow().quiet().text()).trim() || "unknown";
mkdirSync("dist", { recursive: true });

const result = await Bun.build({
  entrypoints: ["src/main.ts"],
  compile: { target: target as never, outfile: "dist/usersvc", autoloadDotenv: false, autoloadBunfig: false },
  minify: { whitespace: true, syntax: true, identifiers: false },
  bytecode: true,
  sourcemap: "none",
  define: { BUILD_COMMIT: JSON.stringify(commit), BUILD_TIME: JSON.stringify(new Date().toISOString()), "process.env.NODE_ENV": '"production"' },
  plugins: [
    {
      name: "libsql-static-addon",
      setup(build) {
        build.onLoad({ filter: /node_modules[\\/]libsql[\\/]index\.js$/ }, async ({ path }) => {
          const source = await Bun.file(path).text();
          const patched = source.replace("return require(`@libsql/${target}`);", `return require("${libsqlAddon}/index.node");`);
          if (patched === source) throw new Error("libsql/index.js changed: update the static addon patch in scripts/build.ts");
          return { contents: patched, loader: "js" };
        });
      },
    },
  ],
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
const size = Bun.file("dist/usersvc").size;
console.log(`dist/usersvc ${(size / 1024 / 1024).toFixed(1)} MiB (${target}, ${commit})`);
