/**
 * The smallest reproduction of the lean floor's slowdown on Bun 1.4.5 (docs/performance.md, "Bun 1.4.5 re-prepares"):
 * bun:sqlite re-prepares a statement that joins each time a value is bound to it.
 *
 *   bun bench/sqlite-rebind.ts                     CPU per .get() of each variant, in a loop
 *   bun bench/sqlite-rebind.ts serve PORT VARIANT  Bun.serve answering one read per request, for wrk
 *                                                 (VARIANT: join, plus, literal, table or none)
 *
 * Run it with both Buns: node_modules/.bin/bun (the project's, 1.4.4) and node_modules/bun-1.4.5/bin/bun.
 */
import { Database } from "bun:sqlite";

const db = new Database(":memory:");
db.exec(`CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT);
  CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, department_id INTEGER);
  INSERT INTO departments VALUES (1, 'Eng');`);
const insert = db.prepare("INSERT INTO users VALUES (?, ?, 1)");
for (let i = 1; i <= 1000; i++) insert.run(i, `u${i}`);

const JOIN = "SELECT u.id, u.name, d.name AS department FROM users u JOIN departments d ON d.id = u.department_id WHERE u.id =";
/** Each variant reads user `id`; only `join` pays the re-prepare on 1.4.5. */
const variants: Record<string, (id: number) => unknown> = {
  join: (
    (q) => (id: number) =>
      q.get(id)
  )(db.prepare(`${JOIN} ?`)),
  plus: (
    (q) => (id: number) =>
      q.get(id)
  )(db.prepare(`${JOIN} +?`)),
  literal: (
    (q) => () =>
      q.get()
  )(db.prepare(`${JOIN} 7`)),
  table: (
    (q) => (id: number) =>
      q.get(id)
  )(db.prepare("SELECT id, name, department_id FROM users WHERE id = ?")),
  none: () => ({ id: 7, name: "u7", department: "Eng" }),
};

const [mode, port, variant = "join"] = process.argv.slice(2);
if (mode === "serve") {
  const read = variants[variant];
  if (!read) throw new Error(`unknown variant ${variant}: ${Object.keys(variants).join(", ")}`);
  let n = 0;
  Bun.serve({ hostname: "127.0.0.1", port: Number(port), fetch: () => Response.json(read(1 + (n++ % 1000))) });
  console.log(`Bun ${Bun.version}: ${variant} on 127.0.0.1:${port}`);
} else {
  const runs = 20_000;
  const line = [`Bun ${Bun.version} (${Bun.revision.slice(0, 9)}), µs CPU per read:`];
  for (const [name, read] of Object.entries(variants)) {
    read(1);
    const before = process.cpuUsage();
    for (let i = 0; i < runs; i++) read(1 + (i % 1000));
    const used = process.cpuUsage(before);
    line.push(`${name} ${((used.user + used.system) / runs).toFixed(2)}`);
  }
  console.log(line.join(" "));
}
