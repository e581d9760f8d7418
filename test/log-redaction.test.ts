/**
 * URLs in logs (issue 40 item 7): the start-up line's database URL and the error log's request URL
 * carry no secret: userinfo and the values of authToken, token, key, secret and password (any case)
 * are masked, the rest of the URL kept. Through the program's own log and the app's error log.
 */
import { afterAll, beforeAll, describe, expect, test } from "./legs";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp } from "./helpers";
import { linesOf, serveProgram } from "./support/program";
import { type Sqld, startSqld } from "./support/sqld";

describe("the start-up line", () => {
  let sqld: Sqld;
  let dir: string;
  beforeAll(async () => {
    sqld = await startSqld();
    dir = mkdtempSync(join(tmpdir(), "usersvc-redaction-"));
  });
  afterAll(async () => {
    await sqld.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a remote primary's authToken and userinfo in DATABASE_URL are masked in `usersvc listening`", async () => {
    const withUser = sqld.url.replace("http://", "http://operator:SECRET-PASSWORD@");
    const server = await serveProgram(dir, { DATABASE_URL: `${withUser}/?authToken=${sqld.authToken}` });
    // The line follows the first answers by a moment (written once the setup link is out).
    for (let i = 0; i < 200 && !server.out.stdout.includes('"usersvc listening"'); i++) await Bun.sleep(25);
    await server.stop();
    const listening = linesOf(server.out.stdout)
      .map((line) => JSON.parse(line))
      .find((line) => line.msg === "usersvc listening");
    expect(listening.database).toBe(`${sqld.url.replace("http://", "http://***@")}/?authToken=***`);
    expect(server.out.stdout + server.out.stderr).not.toContain(sqld.authToken);
    expect(server.out.stdout + server.out.stderr).not.toContain("SECRET-PASSWORD");
  }, 30_000);
});

describe("the error log", () => {
  test("an unhandled error logs its request's URL with secret-bearing parameters masked (a setup link's token among them)", async () => {
    const lines: string[] = [];
    const broken = await makeTestApp({ LOG_LEVEL: "error" }, { logs: { write: (line) => void lines.push(line) } });
    const { token } = await broken.admin();
    broken.database.close();
    try {
      const query = "page=0&token=SETUP-SECRET&AuthToken=A-SECRET&KEY=K-SECRET&secret=S-SECRET&Password=P-SECRET&size=5";
      expect((await broken.app.handle(new Request(`http://localhost/api/users?${query}`, { headers: { authorization: `Bearer ${token}` } }))).status).toBe(500);
      const logged = lines.map((line) => JSON.parse(line)).find((line) => line.msg === "unhandled error");
      expect(logged.url).toBe("http://localhost/api/users?page=0&token=***&AuthToken=***&KEY=***&secret=***&Password=***&size=5");
      expect(lines.join("")).not.toMatch(/SETUP-SECRET|A-SECRET|K-SECRET|S-SECRET|P-SECRET/);
    } finally {
      await broken.close();
    }
  });
});
