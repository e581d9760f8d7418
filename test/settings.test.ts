/**
 * Settings are declared once (src/settings.ts): this checks that what config.ts reads, what
 * `usersvc --help` prints and the README's configuration table all follow that one list.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Env, loadConfig } from "../src/config";
import { SETTING_NAMES } from "../src/settings";
import { withSettingsTable } from "../scripts/settings-table";

const ROOT = join(import.meta.dir, "..");

/** The names loadConfig asks of `env`. */
function namesRead(env: Env): Set<string> {
  const asked = new Set<string>();
  const watched = new Proxy(env, {
    get(target, name) {
      if (typeof name === "string") asked.add(name);
      return Reflect.get(target, name);
    },
  });
  loadConfig(watched, 2);
  return asked;
}

test("every declared setting is read, and nothing else is", () => {
  // Tracing's own settings are read only once an endpoint turns tracing on.
  const read = new Set([...namesRead({}), ...namesRead({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })]);
  expect([...read].sort()).toEqual([...SETTING_NAMES].sort());
});

test("usersvc --help has a line for every setting", async () => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "--help"], { cwd: ROOT, stdout: "pipe", env: { PATH: process.env.PATH } });
  const help = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const missing = SETTING_NAMES.filter((name) => !new RegExp(`^  ${name}\\b.*: \\S`, "m").test(help));
  expect(missing).toEqual([]);
});

test("the README's configuration table is the one src/settings.ts renders (npm run docs:settings)", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  expect(readme).toBe(withSettingsTable(readme));
});
