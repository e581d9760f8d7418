/**
 * `serve --workers 2` as a real process tree: two processes on one port and one database file.
 * Concurrent creates landing on either worker give exactly one user per address, the scrape
 * sums both workers' counters, a killed worker is replaced, and SIGTERM stops every process
 * with exit code 0.
 */
import { afterAll, expect, test } from "./legs";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createTokens } from "../src/security/bearer-tokens";
import { TEST_SECRET } from "./helpers";

const ROOT = resolve(import.meta.dir, "..");
const ADMIN = { email: "admin@workers.example.com", password: "Workers-Admin-1!" };
const METRICS_TOKEN = "workers-test-metrics-token";
const dir = mkdtempSync(join(tmpdir(), "usersvc-workers-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function freePort(): number {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

const childrenOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

test("two workers share the port and the database, and SIGTERM stops both", async () => {
  const port = freePort();
  const base = `http://127.0.0.1:${port}`;
  const primary = Bun.spawn([process.execPath, "src/main.ts", "serve", "--workers", "2"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dir,
      PORT: String(port),
      HOST: "127.0.0.1",
      JWT_SECRET: TEST_SECRET,
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
      LOG_LEVEL: "warn",
      METRICS_TOKEN,
    },
    stdout: "ignore",
    stderr: "inherit",
  });
  try {
    await until("health", async () => ((await fetch(`${base}/actuator/health`).catch(() => undefined))?.status === 200 ? true : undefined));
    const [firstChild] = await until("a worker child", () => (childrenOf(primary.pid).length === 1 ? childrenOf(primary.pid) : undefined));

    const token = await createTokens(TEST_SECRET, Date.now).issue(ADMIN.email, 0);
    const create = async (email: string) => {
      // A fresh connection each time, so SO_REUSEPORT spreads the creates over both workers.
      const response = await fetch(`${base}/api/users`, {
        keepalive: false,
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ name: "Worker Test", email }),
      });
      await response.arrayBuffer();
      return response.status;
    };
    const unique = Array.from({ length: 120 }, (_, i) => create(`unique-${i}@workers.example.com`));
    const same = Array.from({ length: 20 }, () => create("same@workers.example.com"));
    const uniqueStatuses = await Promise.all(unique);
    const sameStatuses = await Promise.all(same);
    expect(uniqueStatuses.filter((s) => s !== 201)).toEqual([]);
    expect(sameStatuses.filter((s) => s === 201)).toHaveLength(1);
    expect(sameStatuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);

    const list = await fetch(`${base}/api/users?size=1`, { headers: { authorization: `Bearer ${token}` } });
    expect(list.status).toBe(200);
    expect(list.headers.get("x-total-count")).toBe(String(1 + 120 + 1));

    // Whichever worker answers, the scrape and the Spring-style view report both workers' creates.
    for (let i = 0; i < 8; i++) {
      const scrape = await (await fetch(`${base}/actuator/prometheus`, { keepalive: false, headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
      expect(scrape).toMatch(/^users_created_total 121$/m);
      const view = (await (await fetch(`${base}/actuator/metrics/users.created`, { keepalive: false, headers: { authorization: `Bearer ${token}` } })).json()) as {
        measurements: unknown;
      };
      expect(view.measurements).toEqual([{ statistic: "COUNT", value: 121 }]);
    }

    process.kill(firstChild, "SIGKILL");
    const [replacement] = await until("a replacement worker", () => {
      const now = childrenOf(primary.pid);
      return now.length === 1 && now[0] !== firstChild ? now : undefined;
    });
    await until("health after the restart", async () => ((await fetch(`${base}/actuator/health`).catch(() => undefined))?.status === 200 ? true : undefined));

    primary.kill("SIGTERM");
    expect(await primary.exited).toBe(0);
    expect(() => process.kill(replacement, 0)).toThrow(); // no such process
  } finally {
    primary.kill("SIGKILL");
  }
}, 60_000);
