/**
 * What the service writes to disk is its owner's alone, whatever the umask: the data folder,
 * uploads and backups folders 0700; the database with its -wal and -shm, the kept signing key,
 * uploaded files and backup archives 0600. Proved on the real program started under `umask 022`
 * (a shell in front of it), on both file drivers: serve, migrate, restore, and a database
 * left readable by an older version.
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, driver, expect, remote, test } from "./legs";
import { startServer, streamUpload, type ServerProcess } from "./server-process";

const ROOT = resolve(import.meta.dir, "..");
const dir = mkdtempSync(join(tmpdir(), "usersvc-modes-"));
/** `usersvc …` under umask 022, as a login shell on most systems leaves it. */
const wrapper = join(dir, "usersvc-umask-022");
writeFileSync(wrapper, `#!/bin/sh\numask 022\nexec "${process.execPath}" "${join(ROOT, "src/main.ts")}" "$@"\n`, { mode: 0o755 });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const modeOf = (path: string) => `0${(statSync(path).mode & 0o777).toString(8)}`;
/** Every path under `folder` (itself included, as "."), with its mode. */
function modesUnder(folder: string): Record<string, string> {
  const modes: Record<string, string> = { ".": modeOf(folder) };
  for (const entry of readdirSync(folder, { recursive: true }) as string[]) modes[entry] = modeOf(join(folder, entry));
  return modes;
}
/** The database 0600, and its -wal and -shm 0600 when the driver left them after closing (libsql does). */
const databaseModes = (modes: Record<string, string>) => ({
  "usersvc.db": "0600",
  ...("usersvc.db-wal" in modes ? { "usersvc.db-wal": "0600" } : {}),
  ...("usersvc.db-shm" in modes ? { "usersvc.db-shm": "0600" } : {}),
});
/** Archives carry the kept keys only when encrypted: with this key, the restore brings them back (and their modes are checked). */
const BACKUP_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64");
const env = (dataDir: string) => ({ ...process.env, DATA_DIR: dataDir, DATABASE_DRIVER: driver, LOG_LEVEL: "warn", BACKUP_ENCRYPTION_KEY });
function run(args: string[], dataDir: string) {
  const done = Bun.spawnSync([wrapper, ...args], { cwd: dir, env: env(dataDir) });
  if (done.exitCode !== 0) throw new Error(`usersvc ${args.join(" ")} failed: ${done.stderr}`);
  return done.stdout.toString().trim();
}

describe.skipIf(remote)("file modes under umask 022", () => {
  test("the shell in front of the program really leaves umask 022: a file it makes is 0644", () => {
    const probe = join(dir, "probe");
    expect(Bun.spawnSync(["sh", "-c", `umask 022; : > "${probe}"`]).exitCode).toBe(0);
    expect(modeOf(probe)).toBe("0644");
  });

  let archive: string;
  test("serve: data folder 0700; database, -wal, -shm, kept key, upload and backup archive 0600", async () => {
    const dataDir = join(dir, "served");
    // JWT_SECRET unset: the key is generated and kept in the data folder.
    const server: ServerProcess = await startServer({ DATA_DIR: dataDir, JWT_SECRET: "", DATABASE_DRIVER: driver, BACKUP_ENCRYPTION_KEY }, wrapper);
    try {
      expect((await streamUpload(server, 1000, "notes.txt")).status).toBe(201);
      const backup = await fetch(`${server.url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${server.token}` } });
      expect(backup.status).toBe(201);
      const { name } = (await backup.json()) as { name: string };
      archive = join(dataDir, "backups", name);
      // While it runs: the WAL and its index exist beside the database.
      const modes = modesUnder(dataDir);
      const upload = Object.keys(modes).find((path) => path.startsWith("uploads/"))!;
      expect(modes).toEqual({
        ".": "0700",
        "usersvc.db": "0600",
        "usersvc.db-wal": "0600",
        "usersvc.db-shm": "0600",
        "jwt.secret": "0600",
        "encryption.key": "0600",
        uploads: "0700",
        [upload]: "0600",
        backups: "0700",
        [`backups/${name}`]: "0600",
      });
    } finally {
      await server.stop();
    }
  }, 60_000);

  test("migrate on an empty folder: folder 0700, database 0600", () => {
    const dataDir = join(dir, "migrated");
    expect(run(["migrate"], dataDir)).toBe("migrations applied");
    const modes = modesUnder(dataDir);
    expect(modes).toEqual({ ".": "0700", ...databaseModes(modes) });
  });

  test("a database an older version left 0644 (with its -wal and -shm) is made 0600 when opened", () => {
    const dataDir = join(dir, "migrated");
    for (const name of ["usersvc.db", "usersvc.db-wal", "usersvc.db-shm"]) {
      if (name !== "usersvc.db") writeFileSync(join(dataDir, name), "");
      chmodSync(join(dataDir, name), 0o644);
    }
    run(["migrate"], dataDir);
    const modes = modesUnder(dataDir);
    expect(modes).toEqual({ ".": "0700", ...databaseModes(modes) });
  });

  test("restore into an empty folder: the restored database, key and upload are 0600, their folders 0700", () => {
    const dataDir = join(dir, "restored");
    run(["restore", archive], dataDir);
    const modes = modesUnder(dataDir);
    const upload = Object.keys(modes).find((path) => path.startsWith("uploads/"))!;
    expect(modes).toEqual({ ".": "0700", ...databaseModes(modes), "encryption.key": "0600", "jwt.secret": "0600", uploads: "0700", [upload]: "0600" });
  });
});
