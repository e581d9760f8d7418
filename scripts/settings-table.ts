/**
 * `npm run docs:settings`: writes the README's configuration table from src/settings.ts, between
 * its two markers. test/settings.test.ts fails while the README's table differs from this rendering.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { settingsTable } from "../src/settings";

export const START = "<!-- settings table: npm run docs:settings writes it from src/settings.ts -->";
export const END = "<!-- end of settings table -->";

/** The README with its table replaced by the current rendering. */
export function withSettingsTable(readme: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error("README.md lacks the settings table's markers");
  return `${readme.slice(0, start + START.length)}\n${settingsTable()}\n${readme.slice(end)}`;
}

if (import.meta.main) {
  const path = join(import.meta.dir, "..", "README.md");
  writeFileSync(path, withSettingsTable(readFileSync(path, "utf8")));
}
