/**
 * The single binary as a user gets it: built once by the real build script, then ONLY
 * dist/usersvc copied into an empty folder (no node_modules, no source, no migrations)
 * and driven there: serve, migrate, admin create, token, SIGTERM, bad configuration.
 * scripts/smoke-binary.sh is CI's shell twin of the serve part; this is the thorough one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";

const repo = resolve(import.meta.dir, "..");
let dir: string;
let binary: string;
const running = new Set<Subprocess>();

beforeAll(async () => {
  const build = Bun.spawn([process.execPath, "scripts/build.ts"], { cwd: repo, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(build.stdout).text(), new Response(build.stderr).text(), build.exited]);
  if (code !== 0) throw new Error(`build failed (${code}):\n${out}\n${err}`);
  dir = mkdtempSync(join(tmpdir(), "usersvc-bin-"));
  binary = join(dir, "usersvc");
  copyFileSync(join(repo, "dist/usersvc"), binary);
  Bun.spawnSync(["chmod", "755", binary]);
}, 180_000);

afterAll(() => {
  for (const proc of running) proc.kill(9);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Only what a bare machine has: no inherited NODE_*, BUN_*, or service variables. */
const bareEnv = (env: Record<string, string> = {}) => ({ PATH: "/usr/bin:/bin", HOME: dir, LOG_LEVEL: "warn", ...env });

async function run(args: string[], env: Record<string, string> = {}) {
  const proc = Bun.spawn([binary, ...args], { cwd: dir, env: bareEnv(env), stdout: "pipe", stderr: "pipe" });
  running.add(proc);
  const timer = setTimeout(() => proc.kill(9), 30_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  running.delete(proc);
  return { code, stdout, stderr };
}

async function freePort(): Promise<number> {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const { port } = probe;
  probe.stop(true);
  return port;
}

/** Polls until the server answers (any status) or the deadline passes. */
async function waitForHttp(url: string, deadlineMs: number): Promise<Response> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await fetch(url, { signal: AbortSignal.timeout(1000) });
    } catch (error) {
      if (Date.now() > until) throw new Error(`no answer from ${url} within ${deadlineMs} ms: ${error}`);
      await Bun.sleep(25);
    }
  }
}

describe("dist/usersvc alone in an empty folder", () => {
  let server: Subprocess<"ignore", "pipe", "pipe">;
  let base: string;

  test("the folder holds nothing but the binary", () => {
    expect(readdirSync(dir)).toEqual(["usersvc"]);
  });

  test("serve: answers /actuator/health 200, creating ./data/usersvc.db and a 0600 jwt.secret", async () => {
    // A stray .env must not be read by the binary (built with autoloadDotenv off): loaded, it would stop the start.
    writeFileSync(join(dir, ".env"), "JWT_SECRET=too-short\nBASE_PATH=/dotenv\n");
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // RP_ID: passkeys configured, so the WebAuthn library (loaded on first use) can be asked for below.
    server = Bun.spawn([binary, "serve"], { cwd: dir, env: bareEnv({ PORT: String(port), HOST: "127.0.0.1", RP_ID: "localhost" }), stdout: "pipe", stderr: "pipe" });
    running.add(server);
    const health = await waitForHttp(`${base}/actuator/health`, 15_000);
    expect(health.status).toBe(200);
    expect(health.headers.get("x-request-id")).toBeTruthy();
    expect(existsSync(join(dir, "data/usersvc.db"))).toBe(true);
    expect(statSync(join(dir, "data/jwt.secret")).mode & 0o777).toBe(0o600);
    const anonymous = await fetch(`${base}/api/users`);
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { errorCode: string }).errorCode).toBe("UNAUTHORIZED");
  }, 30_000);

  test("the admin console is embedded: the shell and the bundle it links, with no sources beside the binary", async () => {
    const shell = await fetch(`${base}/admin`);
    expect(shell.status).toBe(200);
    expect(shell.headers.get("content-security-policy")).toContain("script-src 'self'");
    const script = /src="([^"]+app\.js[^"]*)"/.exec(await shell.text())![1];
    const bundle = await fetch(`${base}${script}`);
    expect(bundle.status).toBe(200);
    expect(await bundle.text()).toContain("usersvc.console.token");
  });

  test("first run: stderr carries the one-time setup link (no ADMIN yet), and the setup page with its bundle is embedded", async () => {
    const reader = server.stderr.getReader();
    let stderr = "";
    while (!stderr.includes("\n")) stderr += new TextDecoder().decode((await reader.read()).value);
    reader.releaseLock();
    const link = /^usersvc: no ADMIN yet\. Create the first one at (\S+) /.exec(stderr)![1];
    expect(link).toMatch(/^http:\/\/localhost:\d+\/account\/setup\?token=[A-Za-z0-9_-]{43}$/);
    const page = await fetch(`${base}${new URL(link).pathname}${new URL(link).search}`);
    expect(page.status).toBe(200);
    const script = /src="([^"]+app\.js[^"]*)"/.exec(await page.text())![1];
    const bundle = await fetch(`${base}${script}`);
    expect(bundle.status).toBe(200);
    expect(await bundle.text()).toContain("usersvc.account.session");
  });

  test("migrate: applies (nothing left to do) and exits 0 beside the running server", async () => {
    const { code, stdout } = await run(["migrate"]);
    expect(code).toBe(0);
    expect(stdout).toContain("migrations applied");
  });

  test("admin create, then token, then an authenticated call to the running server", async () => {
    const created = await run(["admin", "create", "--email", "Root@Example.com", "--password", "Admin@12345", "--name", "Root"]);
    expect(created.code).toBe(0);
    expect(created.stdout).toContain("created admin");
    const again = await run(["admin", "create", "--email", "root@example.com", "--password", "Admin@12345"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("promoted admin");

    const token = await run(["token", "--email", "root@example.com"]);
    expect(token.code).toBe(0);
    const bearer = token.stdout.trim();
    expect(bearer.split(".")).toHaveLength(3);

    const headers = { authorization: `Bearer ${bearer}`, "content-type": "application/json" };
    const post = await fetch(`${base}/api/users`, { method: "POST", headers, body: JSON.stringify({ name: "From Binary", email: "bin@example.com" }) });
    expect(post.status).toBe(201);
    const list = await fetch(`${base}/api/users`, { headers });
    expect(list.status).toBe(200);
    expect(list.headers.get("x-total-count")).toBe("2");
    expect(((await list.json()) as { email: string }[]).map((u) => u.email)).toEqual(["root@example.com", "bin@example.com"]);

    const unknown = await run(["token", "--email", "nobody@example.com"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("nobody@example.com");
  }, 30_000);

  test("libraries loaded on first use are embedded and load: jose, prom-client's default metrics, @simplewebauthn/server", async () => {
    const login = await fetch(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "root@example.com", password: "Admin@12345" }),
    });
    expect(login.status).toBe(200);
    const { token } = ((await login.json()) as { data: { token: string } }).data;
    const scrape = await fetch(`${base}/actuator/prometheus`, { headers: { authorization: `Bearer ${token}` } });
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toContain("\nprocess_cpu_user_seconds_total ");
    const options = await fetch(`${base}/api/auth/passkey/options`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(options.status).toBe(200);
    expect(((await options.json()) as { data: { rpId: string; challenge: string } }).data).toMatchObject({ rpId: "localhost", challenge: expect.any(String) });
  });

  test("an API key works and its use records the caller's address (the guard's hooks read the same in the minified binary)", async () => {
    const login = await fetch(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "root@example.com", password: "Admin@12345" }),
    });
    const session = { authorization: `Bearer ${((await login.json()) as { data: { token: string } }).data.token}`, "content-type": "application/json" };
    const created = await fetch(`${base}/api/account/api-keys`, { method: "POST", headers: session, body: JSON.stringify({ name: "binary", scopes: ["users:read"] }) });
    expect(created.status).toBe(201);
    const { id, key } = (await created.json()) as { id: number; key: string };
    expect((await fetch(`${base}/api/users`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    let listed: { id: number; lastUsedFrom: string | null }[] = [];
    for (let tries = 0; tries < 50 && !listed.find((k) => k.id === id)?.lastUsedFrom; tries++) {
      if (tries) await Bun.sleep(100);
      listed = (await (await fetch(`${base}/api/account/api-keys`, { headers: session })).json()) as typeof listed;
    }
    expect(listed.find((k) => k.id === id)?.lastUsedFrom).toBe("127.0.0.1");
  });

  test("SIGTERM: finishes the request in flight, then closes the database and exits 0", async () => {
    // A create whose body is only half sent when the signal arrives: it must still be answered.
    const bearer = (await run(["token", "--email", "root@example.com"])).stdout.trim();
    const body = JSON.stringify({ name: "In Flight", email: "inflight@example.com" });
    let answer = "";
    const answered = Promise.withResolvers<void>();
    const socket = await Bun.connect({
      hostname: "127.0.0.1",
      port: Number(new URL(base).port),
      socket: {
        data(_, chunk) {
          answer += chunk.toString();
          if (/\r\n\r\n\{.*\}$/s.test(answer)) answered.resolve();
        },
        close: () => answered.resolve(),
      },
    });
    socket.write(
      `POST /api/users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${bearer}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await Bun.sleep(200);
    server.kill("SIGTERM");
    await Bun.sleep(300);
    expect(server.exitCode).toBeNull(); // still draining
    socket.write(body.slice(10));
    await Promise.race([answered.promise, Bun.sleep(10_000)]);
    socket.end();
    expect(answer).toStartWith("HTTP/1.1 201");
    const code = await Promise.race([server.exited, Bun.sleep(25_000).then(() => "timeout" as const)]);
    running.delete(server);
    expect(code).toBe(0);
    const logs = await new Response(server.stdout).text();
    // Nothing unexpected was logged at warn or above during the run (the generated-secret warning aside).
    const problems = logs.split("\n").filter((line) => /"level":"(error|fatal)"/.test(line));
    expect(problems).toEqual([]);
  }, 30_000);

  test("a restart keeps the data and the generated secret: the same token still works", async () => {
    const port = await freePort();
    const again = Bun.spawn([binary], { cwd: dir, env: bareEnv({ PORT: String(port), HOST: "127.0.0.1" }), stdout: "ignore", stderr: "pipe" });
    running.add(again);
    try {
      await waitForHttp(`http://127.0.0.1:${port}/actuator/health`, 15_000);
      const token = (await run(["token", "--email", "root@example.com"])).stdout.trim();
      const list = await fetch(`http://127.0.0.1:${port}/api/users`, { headers: { authorization: `Bearer ${token}` } });
      expect(list.status).toBe(200);
      // root, the one created over HTTP, and the one answered while draining
      expect(list.headers.get("x-total-count")).toBe("3");
    } finally {
      again.kill("SIGTERM");
      expect(await Promise.race([again.exited, Bun.sleep(25_000).then(() => "timeout" as const)])).toBe(0);
      running.delete(again);
    }
  }, 45_000);

  test.each([
    ["PORT=abc", { PORT: "abc" }, [], "PORT"],
    ["JWT_SECRET=short", { JWT_SECRET: "short" }, ["serve"], "JWT_SECRET"],
    ["DATABASE_URL=mysql://db", { DATABASE_URL: "mysql://db" }, ["migrate"], "DATABASE_URL"],
    ["an unknown flag", {}, ["--no-such-flag"], "--no-such-flag"],
  ])("%s: exit 2 naming it", async (_, env, args, named) => {
    const { code, stderr } = await run(args as string[], env as Record<string, string>);
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")[0]).toContain(named as string);
  });

  test("croner, loaded only where BACKUP_SCHEDULE is read, is embedded: a bad expression is refused in its words", async () => {
    const refused = await run(["migrate"], { BACKUP_SCHEDULE: "not a cron" });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('BACKUP_SCHEDULE must be a cron expression such as "0 3 * * *" (got "not a cron": CronPattern:');
    expect((await run(["migrate"], { BACKUP_SCHEDULE: "0 3 * * *" })).code).toBe(0);
  });

  test("--version and --help exit 0", async () => {
    const version = await run(["--version"]);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^usersvc \d+\.\d+\.\d+ \(/);
    expect(version.stdout).not.toContain("unknown");
    expect((await run(["--help"])).code).toBe(0);
  });
});
