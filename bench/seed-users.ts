/**
 * The benches' users: `count` of them in one transaction straight into a migrated database file
 * (seconds, not the minutes of as many requests), each with the USER role. It writes only columns
 * every build since the bench began has, so `npm run bench -- --against` seeds an older build's
 * own schema with it too.
 */
import { Database } from "bun:sqlite";

const FIRST = ["Ann", "Ben", "Chen", "Dara", "Eve", "Femi", "Gus", "Hana", "Ivan", "Jun", "Kai", "Lea", "Mei", "Nia", "Omar", "Pia"];
const LAST = ["Lin", "Wang", "Smith", "Garcia", "Kim", "Okafor", "Novak", "Rossi", "Tan", "Silva"];

export function seedUsers(dbFile: string, count: number) {
  const db = new Database(dbFile);
  db.exec("PRAGMA busy_timeout = 5000");
  const { id: userRole } = db.query("select id from roles where name = 'USER'").get() as { id: number };
  const insertUser = db.query("insert into users (name, email, active, age, created_at, updated_at) values (?, ?, 1, ?, ?, ?) returning id");
  const insertRole = db.query("insert into user_roles (user_id, role_id) values (?, ?)");
  const now = Date.now();
  db.transaction(() => {
    for (let i = 0; i < count; i++) {
      const name = `${FIRST[i % FIRST.length]} ${LAST[Math.floor(i / FIRST.length) % LAST.length]} ${i}`;
      const { id } = insertUser.get(name, `seed-${i}@bench.example.com`, 18 + (i % 60), now - i * 1000, now - i * 1000) as { id: number };
      insertRole.run(id, userRole);
    }
  })();
  return db;
}
