/**
 * The README's walk-through, run as written: its sh block extracted from README.md and
 * run by bash in the repository, with only Node.js and npm on the PATH (no bun), a free port
 * and a fresh data folder. It must succeed, create and list the user, and stop the server it
 * started; whatever it left running is killed with its process group.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repo = resolve(import.meta.dir, "..");
const dataDir = mkdtempSync(join(tmpdir(), "usersvc-readme-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** The first sh block after the walk-through's heading. */
function walkThrough(): string {
  const readme = readFileSync(join(repo, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## A walk through with curl"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error("README.md has no sh block under '## A walk through with curl'");
  return block;
}

function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

const tools = ["bash", "setsid", "curl"].filter((tool) => !Bun.which(tool));
if (tools.length > 0) console.warn(`skipping the README walk-through: ${tools.join(", ")} not installed`);
test.skipIf(tools.length > 0)(
  "the README walk-through runs verbatim: admin, server, token, create and list a user, server stopped",
  async () => {
    const port = freePort();
    // A user's PATH: whatever node_modules/.bin npm test put in front is taken out again.
    const path = (process.env.PATH ?? "")
      .split(":")
      .filter((dir) => !dir.includes("node_modules"))
      .join(":");
    expect(Bun.which("bun", { PATH: path })).toBeNull();
    // setsid: the script and all it starts form one process group, to be killed whole at the end.
    const script = Bun.spawn(["setsid", "bash", "-e", "-c", walkThrough()], {
      cwd: repo,
      env: { PATH: path, HOME: process.env.HOME, PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: "warn" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => killGroup(script.pid), 90_000);
    try {
      const [stdout, stderr, code] = await Promise.all([new Response(script.stdout).text(), new Response(script.stderr).text(), script.exited]);
      expect({ code, stderr: code === 0 ? "" : stderr }).toEqual({ code: 0, stderr: "" });
      expect(stdout).toMatch(/^created admin admin@example.com \(id \d+\)$/m);
      expect(stdout).toContain('"email":"ada@example.com"');
      expect(stdout).toMatch(/^x-total-count: 2\r?$/im);
      expect(existsSync(join(dataDir, "usersvc.db"))).toBe(true);
      // `kill %1` stopped the server: the port no longer answers.
      let stopped = false;
      for (let i = 0; i < 100 && !stopped; i++) {
        stopped = await fetch(`http://127.0.0.1:${port}/actuator/health`).then(
          () => false,
          () => true,
        );
        if (!stopped) await Bun.sleep(100);
      }
      expect(stopped).toBe(true);
    } finally {
      clearTimeout(timer);
      killGroup(script.pid);
    }
  },
  120_000,
);

function killGroup(pid: number) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // the group has ended already
  }
}
