/**
 * Settings are declared once (src/settings.ts): this checks that what config.ts reads, what
 * `usersvc --help` prints and the README's configuration table all follow that one list.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Env, loadConfig } from "../src/config";
import { PROVIDER_SETTINGS, providerSettingName, SETTING_NAMES } from "../src/settings";
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

test("a provider's settings are the declared OIDC_<NAME>_* ones, each read for every name in OIDC_PROVIDERS", () => {
  const env = { OIDC_PROVIDERS: "corp,github,microsoft", OIDC_CORP_ISSUER: "https://id.example.com", OIDC_MICROSOFT_TENANT: "t1" };
  const read = namesRead(Object.fromEntries(["CORP", "GITHUB", "MICROSOFT"].map((n) => [`OIDC_${n}_CLIENT_ID`, "id"]).concat(Object.entries(env))));
  const perProvider = ["corp", "github", "microsoft"].flatMap((name) =>
    Object.keys(PROVIDER_SETTINGS).map((key) => providerSettingName(name, key as keyof typeof PROVIDER_SETTINGS)),
  );
  const declared = new Set<string>([...SETTING_NAMES, ...perProvider]);
  expect([...read].filter((name) => !declared.has(name))).toEqual([]);
  // Each declared key is read for some kind of provider (github's URLs only for github, and so on).
  const keysRead = new Set([...read].map((name) => /^OIDC_(CORP|GITHUB|MICROSOFT)_(.+)$/.exec(name)?.[2]));
  expect(Object.keys(PROVIDER_SETTINGS).filter((key) => !keysRead.has(key))).toEqual([]);
});

test("usersvc --help has a line for every setting", async () => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "--help"], { cwd: ROOT, stdout: "pipe", env: { PATH: process.env.PATH } });
  const help = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const perProvider = Object.keys(PROVIDER_SETTINGS).map((key) => providerSettingName("<NAME>", key as keyof typeof PROVIDER_SETTINGS));
  const missing = [...SETTING_NAMES, ...perProvider].filter((name) => !help.split("\n").some((line) => line.startsWith(`  ${name}`) && /: \S/.test(line)));
  expect(missing).toEqual([]);
});

test("the README's configuration table is the one src/settings.ts renders (npm run docs:settings)", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  expect(readme).toBe(withSettingsTable(readme));
});
