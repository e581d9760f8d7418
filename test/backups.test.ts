/**
 * Backups and restore: the ADMIN API through app.handle, and real processes for the CLI (a round
 * trip from a seeded server to an empty folder and a server started on it, without JWT_SECRET on
 * either side), every refusal of restore leaving the data folder as it was, the schedule with
 * BACKUP_KEEP, and BACKUP_DIR on a real S3 server (Ceph RGW) when one can be started.
 * The kill -9, load and multi-worker cases are heavy: test/resilience/backups.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { S3Client } from "bun";
import { createApp } from "../src/app";
import { list as listTar } from "tar";
import { readManifest, type Manifest } from "../src/features/backups/archive";
import { backupKeyId, openArchive } from "../src/features/backups/encryption";
import { dataKeyId } from "../src/security/data-encryption";
import { totpAt } from "./support/totp";
import { localDestination } from "../src/features/backups/destination";
import type { CreatedBackup } from "../src/features/backups/service";
import type { TokenResponse } from "../src/features/auth/model";
import type { User } from "../src/models/user";
import type { Envelope } from "../src/envelope";
import { LATEST_MIGRATION } from "../src/features/backups/snapshot";
import { openDatabase } from "../src/db/open";
import { ORPHAN_AGE_MS, sweepOrphanedFiles } from "../src/features/files/service";
import { createMetrics } from "../src/metrics";
import { bytesUnder, cleanEnv, cli, descendants, digests, folderHashes, integrity, repack, sha256File, zerosArchive } from "./backup-support";
import { freePort } from "./resilience/support";
import { answerOf, jsonOf, makeTestApp, storeOrphan, validRegistration, type TestApp } from "./helpers";
import { DENIED, scenarios, UNAUTHORIZED } from "./scenario";
import { createBucket, S3_TEST_KEYS, startS3Server, type S3Server } from "./s3-server";
import { startServer, streamDownload, streamUpload, type ServerProcess } from "./server-process";
import { startSqld, type Sqld } from "./support/sqld";
import { createClient } from "@libsql/client";

const ARCHIVE = /^usersvc-\d{8}T\d{6}Z(-\d+)?\.tar\.gz$/;
const ENCRYPTED = /^usersvc-\d{8}T\d{6}Z(-\d+)?\.tar\.gz\.enc$/;
/** A BACKUP_ENCRYPTION_KEY, and another one. */
const BACKUP_KEY = Buffer.alloc(32, 0x42).toString("base64");
const OTHER_BACKUP_KEY = Buffer.alloc(32, 0x43).toString("base64");

/** The manifest of an archive, decrypted with `key` (base64) when it is encrypted. */
async function manifestOf(path: string, key?: string): Promise<Manifest> {
  const opened = await openArchive(Bun.file(path).stream() as unknown as AsyncIterable<Uint8Array>, key === undefined ? undefined : Buffer.from(key, "base64"));
  return readManifest(opened.bytes);
}

/** Each member's mode, as the tar headers give it. */
async function memberModes(path: string): Promise<Record<string, number>> {
  const modes: Record<string, number> = {};
  await listTar({ file: path, onReadEntry: (entry) => (modes[entry.path] = entry.mode ?? 0) });
  return modes;
}

describe("the ADMIN API", () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp["admin"]>>;
  let user: Awaited<ReturnType<TestApp["createUser"]>>;
  beforeAll(async () => {
    t = await makeTestApp({ BACKUP_SCHEDULE: "0 3 * * *" });
    admin = await t.admin();
    user = await t.createUser();
  }, 60_000);
  afterAll(() => t.close());

  test("create (201), list newest first, download the same bytes, delete (204), then 404", async () => {
    const created = await t.request("POST", "/api/admin/backups", { token: admin.token });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ name: expect.stringMatching(ARCHIVE), size: expect.any(Number), createdAt: expect.any(String) });
    const { name, size } = created.body;
    const file = join(t.dir, "backups", name);
    expect(statSync(file).size).toBe(size);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const manifest = await manifestOf(file);
    expect(manifest).toMatchObject({ format: 2, trigger: "manual", migration: LATEST_MIGRATION.tag, createdAt: created.body.createdAt });
    expect(manifest.tables.users).toBe(2);
    expect(manifest.tables.leases).toBe(0); // this backup's own lease is not in it
    // Without BACKUP_ENCRYPTION_KEY no key file is carried (DATA_ENCRYPTION_KEY is not set: encryption.key is in the data folder).
    expect(existsSync(join(t.dir, "encryption.key"))).toBe(true);
    expect(Object.keys(manifest.files)).toEqual(["usersvc.db"]);
    expect(manifest.sizes).toEqual({ "usersvc.db": expect.any(Number) });
    expect(await memberModes(file)).toEqual({ "manifest.json": 0o600, "usersvc.db": 0o600 });

    const list = await t.request("GET", "/api/admin/backups", { token: admin.token });
    expect(list.status).toBe(200);
    expect(list.body[0]).toEqual(created.body);

    const download = await t.app.handle(new Request(`http://localhost/api/admin/backups/${name}`, { headers: { authorization: `Bearer ${admin.token}` } }));
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("application/gzip");
    expect(download.headers.get("content-disposition")).toBe(`attachment; filename="${name}"`);
    expect(Buffer.from(await download.arrayBuffer()).equals(readFileSync(file))).toBe(true);

    expect((await t.request("DELETE", `/api/admin/backups/${name}`, { token: admin.token })).status).toBe(204);
    expect(existsSync(file)).toBe(false);
    for (const [method, path] of [
      ["GET", name],
      ["DELETE", name],
      ["GET", "usersvc-20260101T000000Z.tar.gz"],
      ["GET", "..%2Fusersvc.db"],
      ["DELETE", "jwt.secret"],
    ]) {
      const gone = await t.request(method, `/api/admin/backups/${path}`, { token: admin.token });
      expect({ path, status: gone.status, code: gone.body?.errorCode }).toEqual({ path, status: 404, code: "BACKUP_NOT_FOUND" });
    }
  }, 30_000);

  // A USER gets 403 and an anonymous caller 401, on every route.
  scenarios(
    [
      ["GET", ""],
      ["POST", ""],
      ["GET", "/usersvc-20260101T000000Z.tar.gz"],
      ["DELETE", "/usersvc-20260101T000000Z.tar.gz"],
    ].flatMap(([method, path]) => [
      { name: `${method} /api/admin/backups${path} as a USER`, send: () => t.request(method, `/api/admin/backups${path}`, { token: user.token }), status: 403, failure: DENIED },
      { name: `${method} /api/admin/backups${path} anonymous`, send: () => t.request(method, `/api/admin/backups${path}`), status: 401, failure: UNAUTHORIZED },
    ]),
  );

  test("two creates at once: one 201, the other 409 BACKUP_IN_PROGRESS", async () => {
    const [a, b] = await Promise.all([0, 1].map(() => t.request("POST", "/api/admin/backups", { token: admin.token })));
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    expect([a, b].find((r) => r.status === 409)!.body).toMatchObject({ success: false, errorCode: "BACKUP_IN_PROGRESS" });
    // The lease is released: the next one runs.
    expect((await t.request("POST", "/api/admin/backups", { token: admin.token })).status).toBe(201);
  }, 30_000);

  /** POST /api/admin/backups on an app like t's, with these settings changed. */
  const backUpWith = (config: Partial<TestApp["config"]>) => {
    const app = createApp({
      config: { ...t.config, ...config },
      db: t.database,
      metrics: createMetrics({ defaultMetrics: false }),
      logging: t.logging,
      tokens: t.tokens,
      cipher: t.cipher,
      lifecycle: t.lifecycle,
      files: t.files,
    });
    return app.handle(new Request("http://localhost/api/admin/backups", { method: "POST", headers: { authorization: `Bearer ${admin.token}` } }));
  };

  test("a remote database is backed up by its server: 400 BACKUP_UNSUPPORTED", async () => {
    const res = await backUpWith({ databaseUrl: "libsql://db.example.com" });
    expect(res.status).toBe(400);
    expect((await jsonOf<Envelope>(res)).errorCode).toBe("BACKUP_UNSUPPORTED");
  });

  test("health shows the backup component when scheduled; the three metrics report the last backup", async () => {
    const made = (await t.request("POST", "/api/admin/backups", { token: admin.token })).body;
    const health = await t.request("GET", "/actuator/health", { token: admin.token });
    expect(health.body.components.backup).toMatchObject({ status: "UP", details: { schedule: "0 3 * * *", lastBackup: made.name, lastSuccess: expect.any(String) } });
    expect((await t.request("GET", "/actuator/health")).body.components.backup).toEqual({ status: "UP" });
    const scrape = (await t.request("GET", "/actuator/prometheus", { token: admin.token })).text;
    expect(Number(/^usersvc_backup_size_bytes (\d+)$/m.exec(scrape)?.[1])).toBe(made.size);
    expect(Number(/^usersvc_backup_last_success_timestamp_seconds (\S+)$/m.exec(scrape)?.[1])).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(Number(/^usersvc_backup_duration_seconds (\S+)$/m.exec(scrape)?.[1])).toBeGreaterThan(0);
  }, 30_000);

  test("a failed backup turns the component DOWN, with its error", async () => {
    writeFileSync(join(t.dir, "not-a-folder"), "");
    const res = await backUpWith({ backupDir: join(t.dir, "not-a-folder", "backups") });
    expect(res.status).toBe(500);
    const health = await t.request("GET", "/actuator/health", { token: admin.token });
    expect(health.status).toBe(503);
    expect(health.body.components.backup).toMatchObject({ status: "DOWN", details: { lastError: expect.stringContaining("ENOTDIR") } });
    expect((await t.request("POST", "/api/admin/backups", { token: admin.token })).status).toBe(201);
    expect((await t.request("GET", "/actuator/health", { token: admin.token })).body.components.backup.status).toBe("UP");
  }, 30_000);
});

describe("on an embedded replica of sqld", () => {
  let sqld: Sqld;
  let edge: TestApp;
  let admin: Awaited<ReturnType<TestApp["admin"]>>;
  let copy: string;
  beforeAll(async () => {
    sqld = await startSqld();
    copy = mkdtempSync(join(tmpdir(), "usersvc-backup-replica-"));
    edge = await makeTestApp({ DATABASE_URL: `file:${copy}/usersvc.db`, DATABASE_SYNC_URL: sqld.url, DATABASE_AUTH_TOKEN: sqld.authToken });
    admin = await edge.admin();
    await edge.createUser();
  }, 60_000);
  afterAll(async () => {
    edge.close();
    await sqld.stop();
    rmSync(copy, { recursive: true, force: true });
  });

  test("a backup is taken from the local copy, pulled just before: the manifest names the replica, its primary and the pull", async () => {
    // A write at the primary by someone else, not pulled yet: the backup's own pull brings it.
    const primary = createClient({ url: sqld.url, authToken: sqld.authToken });
    await primary.execute("INSERT INTO departments (name) VALUES ('Pulled')");
    primary.close();
    const before = Date.now();
    const created = await edge.request("POST", "/api/admin/backups", { token: admin.token });
    expect(created.status).toBe(201);
    const file = join(edge.dir, "backups", created.body.name);
    const manifest = await manifestOf(file);
    expect(manifest).toMatchObject({ source: "replica", primary: sqld.url, frameNo: expect.any(Number), migration: LATEST_MIGRATION.tag });
    expect(JSON.stringify(manifest)).not.toContain(sqld.authToken);
    expect(Date.parse(manifest.syncedAt!)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(manifest.tables).toMatchObject({ users: 2, departments: 1, leases: 0 });
    const unpacked = mkdtempSync(join(tmpdir(), "usersvc-backup-replica-unpacked-"));
    try {
      Bun.spawnSync(["tar", "-xzf", file, "-C", unpacked]);
      const db = new Database(join(unpacked, "usersvc.db"), { readonly: true });
      expect(db.query("SELECT name FROM departments").all()).toEqual([{ name: "Pulled" }]);
      db.close();
    } finally {
      rmSync(unpacked, { recursive: true, force: true });
    }
  }, 30_000);

  test("restore onto the replica's folder is refused with one line, the copy left as it was", async () => {
    const archive = (await edge.request("POST", "/api/admin/backups", { token: admin.token })).body.name;
    const before = sha256File(join(copy, "usersvc.db"));
    const refused = cli(["restore", join(edge.dir, "backups", archive)], {
      DATA_DIR: edge.dir,
      DATABASE_URL: `file:${copy}/usersvc.db`,
      DATABASE_SYNC_URL: sqld.url,
      DATABASE_AUTH_TOKEN: sqld.authToken,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split("\n")).toEqual([expect.stringMatching(/embedded replica.*restore onto the primary/)]);
    expect(sha256File(join(copy, "usersvc.db"))).toBe(before);
  }, 30_000);
});

describe("with BACKUP_ENCRYPTION_KEY: the whole archive encrypted (….tar.gz.enc), carrying the kept keys", () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp["admin"]>>;
  beforeAll(async () => {
    t = await makeTestApp({ BACKUP_ENCRYPTION_KEY: BACKUP_KEY });
    admin = await t.admin();
  }, 60_000);
  afterAll(() => t.close());

  test("created, listed, downloaded as application/octet-stream, unreadable as gzip or without its key, readable with it; deleted", async () => {
    const created = await t.request("POST", "/api/admin/backups", { token: admin.token });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ name: expect.stringMatching(ENCRYPTED), size: expect.any(Number), createdAt: expect.any(String) });
    const { name } = created.body;
    const file = join(t.dir, "backups", name);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const bytes = readFileSync(file);
    // The clear header: magic, then the key's id.
    expect(bytes.subarray(0, 8).toString()).toBe("USVCENC1");
    expect(bytes.subarray(8, 16).toString("hex")).toBe(backupKeyId(Buffer.from(BACKUP_KEY, "base64")));
    const gunzipped = new Response(Bun.file(file).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
    await expect(gunzipped).rejects.toThrow();
    await expect(manifestOf(file)).rejects.toThrow(
      `it is encrypted under BACKUP_ENCRYPTION_KEY id ${backupKeyId(Buffer.from(BACKUP_KEY, "base64"))}, and BACKUP_ENCRYPTION_KEY is not set`,
    );
    await expect(manifestOf(file, OTHER_BACKUP_KEY)).rejects.toThrow(`not under the one set (id ${backupKeyId(Buffer.from(OTHER_BACKUP_KEY, "base64"))})`);

    // JWT_SECRET is set, DATA_ENCRYPTION_KEY is not: the kept encryption key is carried, inside the encryption.
    const manifest = await manifestOf(file, BACKUP_KEY);
    expect(Object.keys(manifest.files)).toEqual(["usersvc.db", "encryption.key"]);
    expect(manifest.sizes).toEqual({ "usersvc.db": expect.any(Number), "encryption.key": 45 });
    const plain = join(t.dir, "decrypted.tar.gz");
    const chunks: Uint8Array[] = [];
    for await (const chunk of (await openArchive(Bun.file(file).stream() as unknown as AsyncIterable<Uint8Array>, Buffer.from(BACKUP_KEY, "base64"))).bytes) chunks.push(chunk);
    writeFileSync(plain, Buffer.concat(chunks));
    expect(await memberModes(plain)).toEqual({ "manifest.json": 0o600, "usersvc.db": 0o600, "encryption.key": 0o600 });

    expect((await t.request("GET", "/api/admin/backups", { token: admin.token })).body).toEqual([created.body]);
    const download = await t.app.handle(new Request(`http://localhost/api/admin/backups/${name}`, { headers: { authorization: `Bearer ${admin.token}` } }));
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("application/octet-stream");
    expect(download.headers.get("content-disposition")).toBe(`attachment; filename="${name}"`);
    expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);

    expect((await t.request("DELETE", `/api/admin/backups/${name}`, { token: admin.token })).status).toBe(204);
    expect(existsSync(file)).toBe(false);
    for (const method of ["GET", "DELETE"]) expect((await t.request(method, `/api/admin/backups/${name}`, { token: admin.token })).body.errorCode).toBe("BACKUP_NOT_FOUND");
  }, 30_000);
});

test("a taken name gets a suffix and never replaces an archive", async () => {
  const folder = mkdtempSync(join(tmpdir(), "usersvc-publish-"));
  try {
    const destination = localDestination(folder);
    const names = [];
    for (const content of ["first", "second", "third"]) {
      writeFileSync(join(folder, ".temp"), content);
      names.push(await destination.publish(join(folder, ".temp"), "20260101T000000Z"));
    }
    expect(names).toEqual(["usersvc-20260101T000000Z.tar.gz", "usersvc-20260101T000000Z-2.tar.gz", "usersvc-20260101T000000Z-3.tar.gz"]);
    expect(readFileSync(join(folder, names[0]), "utf8")).toBe("first");
    expect((await destination.list()).map((a) => a.name)).toEqual([...names].reverse());
    expect(readdirSync(folder).sort()).toEqual([...names].sort());
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

describe("round trip without JWT_SECRET, with BACKUP_ENCRYPTION_KEY: seed, back up, restore into an empty folder, serve from it", () => {
  let source: ServerProcess;
  let restored: ServerProcess | undefined;
  const target = mkdtempSync(join(tmpdir(), "usersvc-restored-"));
  afterAll(async () => {
    await restored?.stop();
    await source?.stop();
    rmSync(target, { recursive: true, force: true });
  }, 30_000);

  test("every table's rows, every file byte, old passwords and tokens survive", async () => {
    source = await startServer({ JWT_SECRET: "", BACKUP_ENCRYPTION_KEY: BACKUP_KEY });
    const api = (base: string, token: string) => async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return answerOf(res);
    };
    const admin = api(source.url, source.token);
    expect((await admin("POST", "/api/departments", { name: "Research", description: "R&D" })).status).toBe(201);
    const people = ["mei@round.example.com", "li@round.example.com"];
    const ids: number[] = [];
    for (const email of people) {
      const registered = await fetch(`${source.url}/api/auth/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(validRegistration(email)),
      });
      expect(registered.status).toBe(201);
      ids.push((await jsonOf<{ data: User }>(registered)).data.id);
    }
    expect((await admin("POST", "/api/users", { name: "Dept Member", email: "member@round.example.com", department: "Research" })).status).toBe(201);
    const login = await fetch(`${source.url}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: people[0], password: "Passw0rd!" }),
    });
    const mei = await jsonOf<{ data: TokenResponse }>(login);
    const meiApi = api(source.url, mei.data.token);
    expect((await meiApi("PUT", `/api/users/${ids[0]}/profile`, { bio: "Backups matter" })).status).toBe(200);
    const product = (await admin("POST", "/api/products", { name: "Round", code: "RT-1", price: 12.5, stock: 10 })).body;
    const paid = (await meiApi("POST", "/api/orders", { items: [{ productId: product.id, quantity: 2 }] })).body;
    expect((await meiApi("POST", `/api/orders/${paid.id}/pay`, { method: "CARD", cardNumber: "4111111111111111" })).status).toBe(200);
    const failed = (await meiApi("POST", "/api/orders", { items: [{ productId: product.id, quantity: 1 }] })).body;
    expect((await meiApi("POST", `/api/orders/${failed.id}/pay`, { method: "CARD", cardNumber: "4000000000000002" })).status).toBe(400);
    const uploads = [await streamUpload(source, 300_000, "a.bin"), await streamUpload(source, 1_000, "b.txt")];
    for (const upload of uploads) expect(upload.status).toBe(201);

    // The outbox sender settles its rows first, so nothing but the backup's own audit entry changes after the snapshot.
    const live = join(source.dataDir, "usersvc.db");
    for (let i = 0; ; i++) {
      const db = new Database(live, { readonly: true });
      const pending = db.query<{ n: number }, []>("SELECT count(*) AS n FROM outbox WHERE delivered_at IS NULL").get()!.n;
      db.close();
      if (pending === 0) break;
      if (i > 100) throw new Error("the outbox did not settle");
      await Bun.sleep(100);
    }
    const created = await admin("POST", "/api/admin/backups");
    expect(created.status).toBe(201);
    const before = digests(live);
    const archive = join(target, "..", `${created.body.name}`);
    const download = await fetch(`${source.url}/api/admin/backups/${created.body.name}`, { headers: { authorization: `Bearer ${source.token}` } });
    expect(download.headers.get("content-type")).toBe("application/octet-stream");
    await Bun.write(archive, download);
    expect(created.body.name).toMatch(ENCRYPTED);
    const manifest = await manifestOf(archive, BACKUP_KEY);
    expect(Object.keys(manifest.files).sort()).toEqual(["encryption.key", "jwt.secret", ...uploads.map((u) => `uploads/${u.body.fileName}`), "usersvc.db"].sort());
    expect(manifest.tables).toMatchObject({ users: 4, departments: 1, orders: 2, files: 2 });

    try {
      // BACKUP_ENCRYPTION_KEY comes from the environment: missing, or another key, is one line naming it, and nothing changes.
      const keyId = backupKeyId(Buffer.from(BACKUP_KEY, "base64"));
      for (const [env, reason] of [
        [{}, `is encrypted under BACKUP_ENCRYPTION_KEY id ${keyId}, and BACKUP_ENCRYPTION_KEY is not set`],
        [
          { BACKUP_ENCRYPTION_KEY: OTHER_BACKUP_KEY },
          `is encrypted under BACKUP_ENCRYPTION_KEY id ${keyId}, not under the one set (id ${backupKeyId(Buffer.from(OTHER_BACKUP_KEY, "base64"))})`,
        ],
      ] as const) {
        const refused = cli(["restore", archive], { DATA_DIR: target, ...env });
        expect({ code: refused.code, stdout: refused.stdout, lines: refused.stderr.trim().split("\n").length }).toEqual({ code: 1, stdout: "", lines: 1 });
        expect(refused.stderr).toContain(reason);
        expect(readdirSync(target)).toEqual([]);
      }
      // One flipped byte: the tag does not verify, and nothing of it was unpacked.
      const bytes = readFileSync(archive);
      bytes[Math.floor(bytes.length / 2)] ^= 0xff;
      const altered = `${archive}.altered.enc`;
      writeFileSync(altered, bytes);
      const refused = cli(["restore", altered], { DATA_DIR: target, BACKUP_ENCRYPTION_KEY: BACKUP_KEY });
      rmSync(altered);
      expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: "" });
      expect(refused.stderr).toContain("its encryption does not verify (altered or damaged); nothing was changed");
      expect(readdirSync(target)).toEqual([]);
      const run = cli(["restore", archive], { DATA_DIR: target, BACKUP_ENCRYPTION_KEY: BACKUP_KEY });
      expect(run.stderr).not.toContain("error");
      expect(run.code).toBe(0);
      expect(run.stdout).toStartWith(`restored ${archive}`);
    } finally {
      rmSync(archive, { force: true });
    }
    const restoredDb = join(target, "usersvc.db");
    expect(digests(restoredDb)).toEqual(before);
    expect(integrity(restoredDb)).toEqual({ integrity: ["ok"], foreignKeys: [] });
    for (const kept of ["jwt.secret", "encryption.key"]) expect(readFileSync(join(target, kept), "utf8")).toBe(readFileSync(join(source.dataDir, kept), "utf8"));
    expect(folderHashes(join(target, "uploads"))).toEqual(folderHashes(join(source.dataDir, "uploads")));
    expect(existsSync(`${restoredDb}.before-restore`)).toBe(false); // the folder was empty

    restored = await startServer({ JWT_SECRET: "", DATA_DIR: target });
    // The admin's token from the old server, and a user's old password.
    expect((await api(restored.url, source.token)("GET", "/api/users?size=50")).body).toHaveLength(4);
    const again = await fetch(`${restored.url}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: people[1], password: "Passw0rd!" }),
    });
    expect(again.status).toBe(200);
    for (const upload of uploads) expect(await streamDownload(restored, upload.body.fileName)).toMatchObject({ status: 200, sha256: upload.sha256 });
  }, 120_000);
});

/**
 * Without BACKUP_ENCRYPTION_KEY the archive carries no key: a restore takes the data encryption key
 * from DATA_ENCRYPTION_KEY or the target folder, and refuses (before replacing anything) when it does
 * not open the archive's sealed values, a TOTP secret and an EdDSA private signing key here.
 */
describe("the sealed secrets of an archive without keys, against the keys at hand", () => {
  let source: ServerProcess;
  let archive = "";
  let sourceKey = "";
  const person = { email: "totp@sealed.example.com", password: "Passw0rd!" };
  const folders: string[] = [];
  /** A data folder, with a kept encryption key of its own (base64) if given. */
  const folder = (key?: string) => {
    const made = mkdtempSync(join(tmpdir(), "usersvc-sealed-"));
    if (key) writeFileSync(join(made, "encryption.key"), `${key}\n`, { mode: 0o600 });
    folders.push(made);
    return made;
  };
  const randomKey = () => Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
  const idOf = (key: string) => dataKeyId(Buffer.from(key, "base64"));
  beforeAll(async () => {
    source = await startServer({ TOKEN_SIGNING: "EdDSA" });
    const post = (path: string, body: unknown, token?: string) =>
      fetch(`${source.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
        body: JSON.stringify(body),
      }).then(answerOf);
    expect((await post("/api/auth/register", { ...validRegistration(person.email), password: person.password, confirmPassword: person.password })).status).toBe(201);
    const token = (await post("/api/auth/login", person)).body.data.token as string;
    const { secret } = (await post("/api/account/mfa/totp", {}, token)).body;
    expect((await post("/api/account/mfa/totp/confirm", { code: totpAt(secret, Date.now()) }, token)).status).toBe(200);
    const made = await post("/api/admin/backups", {}, source.token);
    expect(made.status).toBe(201);
    archive = join(source.dataDir, "backups", made.body.name);
    sourceKey = readFileSync(join(source.dataDir, "encryption.key"), "utf8").trim();
  }, 60_000);
  afterAll(async () => {
    await source?.stop();
    for (const made of folders) rmSync(made, { recursive: true, force: true });
  }, 30_000);

  const refusedWith = (target: string, reason: string) => {
    const before = readdirSync(target).sort();
    const run = cli(["restore", archive], { DATA_DIR: target });
    expect({ code: run.code, stdout: run.stdout, lines: run.stderr.trim().split("\n").length }).toEqual({ code: 1, stdout: "", lines: 1 });
    expect(run.stderr).toContain(reason);
    expect(readdirSync(target).sort()).toEqual(before);
  };
  const needs = () => `its sealed secrets (1 TOTP secret, 1 private signing key) need data encryption key id ${idOf(sourceKey)}`;

  test("the archive is a plain tar.gz holding neither jwt.secret nor encryption.key", async () => {
    expect(basename(archive)).toMatch(ARCHIVE);
    expect(Object.keys((await manifestOf(archive)).files)).toEqual(["usersvc.db"]);
  });

  test("into a folder whose encryption key differs: refused, naming the key needed and the key at hand; nothing changed", () => {
    const other = randomKey();
    const target = folder(other);
    refusedWith(target, `${needs()}, and the key at hand is ${join(target, "encryption.key")} (id ${idOf(other)}): set DATA_ENCRYPTION_KEY`);
    expect(readFileSync(join(target, "encryption.key"), "utf8")).toBe(`${other}\n`);
  }, 30_000);

  test("into an empty folder without DATA_ENCRYPTION_KEY: refused the same way", () => {
    const target = folder();
    refusedWith(target, `${needs()}, and the key at hand is no DATA_ENCRYPTION_KEY and no ${join(target, "encryption.key")}`);
  }, 30_000);

  test("with DATA_ENCRYPTION_KEY the archive's key, or in DATA_ENCRYPTION_KEY_PREVIOUS: restored, nothing dropped", () => {
    const settings: Record<string, string>[] = [{ DATA_ENCRYPTION_KEY: sourceKey }, { DATA_ENCRYPTION_KEY: randomKey(), DATA_ENCRYPTION_KEY_PREVIOUS: sourceKey }];
    for (const env of settings) {
      const target = folder(randomKey());
      const run = cli(["restore", archive], { DATA_DIR: target, ...env });
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
      expect(run.stdout).not.toContain("dropped");
    }
  }, 30_000);

  test("--discard-secrets drops the TOTP secret and the private signing key and says so; the server starts, signs in without TOTP, refuses the old tokens", async () => {
    const target = folder(randomKey());
    const run = cli(["restore", archive, "--discard-secrets"], { DATA_DIR: target });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`; dropped 1 TOTP secret, 1 private signing key (sealed under data encryption key id ${idOf(sourceKey)})`);
    const db = new Database(join(target, "usersvc.db"), { readonly: true });
    try {
      const count = (sql: string) => db.query<{ n: number }, []>(sql).get()!.n;
      expect({
        totp: count("SELECT count(*) AS n FROM mfa_totp"),
        recoveryCodes: count("SELECT count(*) AS n FROM mfa_recovery_codes"),
        privateKeys: count("SELECT count(*) AS n FROM signing_keys WHERE private_jwk IS NOT NULL"),
        users: count("SELECT count(*) AS n FROM users"),
      }).toEqual({ totp: 0, recoveryCodes: 0, privateKeys: 0, users: 2 });
    } finally {
      db.close();
    }
    const restored = await startServer({ DATA_DIR: target, TOKEN_SIGNING: "EdDSA" });
    try {
      const login = await fetch(`${restored.url}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(person) }).then(answerOf);
      expect({ status: login.status, token: typeof login.body.data.token, mfaRequired: login.body.data.mfaRequired }).toEqual({
        status: 200,
        token: "string",
        mfaRequired: undefined,
      });
      const old = await fetch(`${restored.url}/api/users`, { headers: { authorization: `Bearer ${source.token}` } });
      expect(old.status).toBe(401);
    } finally {
      await restored.stop();
    }
  }, 60_000);
});

describe("restore refuses, and nothing changes", () => {
  let server: ServerProcess;
  let archive = "";
  const target = mkdtempSync(join(tmpdir(), "usersvc-refusals-"));
  const state = () => ({ files: readdirSync(target).sort(), db: sha256File(join(target, "usersvc.db")), bytes: bytesUnder(target) });
  beforeAll(async () => {
    server = await startServer({});
    const made = await fetch(`${server.url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${server.token}` } });
    archive = join(server.dataDir, "backups", (await jsonOf<CreatedBackup>(made)).name);
    // A data folder with a database of its own, which every refused restore must leave as it is.
    expect(cli(["migrate"], { DATA_DIR: target }).code).toBe(0);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(target, { recursive: true, force: true });
  }, 60_000);

  const refused = (path: string, folder: string, reason: RegExp) => {
    const run = cli(["restore", path], { DATA_DIR: folder });
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: "" });
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(reason);
  };

  test("while a server holds the data folder", () => {
    refused(archive, server.dataDir, /a server holds this data folder .*stop it first/);
    expect(existsSync(join(server.dataDir, "usersvc.db.before-restore"))).toBe(false);
  }, 30_000);

  test("an archive with a flipped byte: gzip fails", () => {
    const bytes = readFileSync(archive);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    const damaged = join(target, "..", `flipped-${crypto.randomUUID()}.tar.gz`);
    writeFileSync(damaged, bytes);
    const before = state();
    try {
      refused(damaged, target, /damaged.*nothing was changed/);
    } finally {
      rmSync(damaged);
    }
    expect(state()).toEqual(before);
  }, 30_000);

  test("a well-formed archive with one member altered: sha256 fails", async () => {
    const altered = await repack(archive, (folder) => {
      const db = new Database(join(folder, "usersvc.db"));
      db.run("UPDATE users SET name = 'Mallory'");
      db.close();
    });
    const before = state();
    refused(altered, target, /usersvc\.db does not match its sha256/);
    expect(state()).toEqual(before);
  }, 30_000);

  test("an archive from a newer schema", async () => {
    const newer = await repack(archive, (folder, manifest) => {
      const db = new Database(join(folder, "usersvc.db"));
      db.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('future', ?)", [LATEST_MIGRATION.when + 86_400_000]);
      db.close();
      manifest.migration = "9999_from_the_future";
      manifest.files["usersvc.db"] = sha256File(join(folder, "usersvc.db"));
    });
    const before = state();
    refused(newer, target, /newer than this usersvc knows/);
    expect(state()).toEqual(before);
  }, 30_000);

  /**
   * 200 MiB of zeros packed into ~200 KB: restore must refuse it before the bytes reach the disk.
   * The restore runs as its own process while this one watches the data folder's size.
   */
  const MEMBER = 200 * 1024 * 1024;
  async function refusedWhileWatched(path: string, reason: RegExp) {
    const before = state();
    const run = Bun.spawn([process.execPath, join(import.meta.dir, "..", "src/main.ts"), "restore", path], {
      cwd: target,
      env: cleanEnv({ DATA_DIR: target }),
      stdout: "pipe",
      stderr: "pipe",
    });
    let peak = 0;
    while (run.exitCode === null) {
      peak = Math.max(peak, bytesUnder(target));
      await Bun.sleep(5);
    }
    const stderr = await new Response(run.stderr).text();
    expect({ code: run.exitCode, stderr }).toEqual({ code: 1, stderr: expect.stringMatching(reason) });
    // The folder held its own database (and its WAL) and nothing near the member's size.
    expect(peak).toBeLessThan(before.bytes + 1024 * 1024);
    expect(state()).toEqual(before);
  }
  const bombManifest = (format: 1 | 2) => ({
    format,
    version: "0.1.0",
    createdAt: "2026-01-01T00:00:00Z",
    trigger: "manual",
    migration: LATEST_MIGRATION.tag,
    tables: { users: 1 },
    files: { "usersvc.db": "0".repeat(64) },
    ...(format === 2 ? { sizes: { "usersvc.db": 4096 } } : {}),
  });

  test("a format-2 archive whose member is larger than its manifest says: refused before it is written", async () => {
    const bomb = join(target, "..", `lie-${crypto.randomUUID()}.tar.gz`);
    await zerosArchive(bomb, bombManifest(2), "usersvc.db", MEMBER);
    try {
      // The review's archive: ~215 KB of gzip for 200 MiB.
      expect(statSync(bomb).size).toBeWithin(200_000, 230_000);
      await refusedWhileWatched(bomb, /usersvc\.db is larger than the 4096 bytes its manifest records.*nothing was changed/);
    } finally {
      rmSync(bomb);
    }
  }, 60_000);

  test("a member whose pax header understates it (its zeros then trail the tar's end): refused, the trailing bytes never read", async () => {
    const bomb = join(target, "..", `pax-${crypto.randomUUID()}.tar.gz`);
    await zerosArchive(bomb, bombManifest(2), "usersvc.db", MEMBER, { paxSize: 4096 });
    try {
      // node-tar frames the member by the pax size: 4096 bytes whose sha256 is not the manifest's.
      // What follows the tar's end is not read (it held restore at full CPU with node-tar's gunzip).
      const started = performance.now();
      await refusedWhileWatched(bomb, /usersvc\.db does not match its sha256.*nothing was changed/);
      expect(performance.now() - started).toBeLessThan(15_000);
    } finally {
      rmSync(bomb);
    }
  }, 60_000);

  test("a format-1 archive (no sizes) whose members expand past 200 times its size: refused before they are written", async () => {
    const bomb = join(target, "..", `ratio-${crypto.randomUUID()}.tar.gz`);
    await zerosArchive(bomb, bombManifest(1), "usersvc.db", MEMBER);
    try {
      await refusedWhileWatched(bomb, /its members would expand past 200 times the archive's size.*nothing was changed/);
    } finally {
      rmSync(bomb);
    }
  }, 60_000);

  test("a format-1 archive (an older usersvc's, without sizes) still restores", async () => {
    const older = await repack(archive, (_folder, manifest) => {
      manifest.format = 1;
      delete manifest.sizes;
    });
    const fresh = mkdtempSync(join(tmpdir(), "usersvc-format-1-"));
    try {
      const run = cli(["restore", older], { DATA_DIR: fresh });
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
      expect(integrity(join(fresh, "usersvc.db"))).toEqual({ integrity: ["ok"], foreignKeys: [] });
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  }, 30_000);

  test("no such archive", () => {
    refused(join(target, "usersvc-20260101T000000Z.tar.gz"), target, /no archive at/);
  }, 30_000);
});

// Encrypted archives: pruning reads their manifests with the key set.
test("BACKUP_SCHEDULE runs in the server and BACKUP_KEEP prunes scheduled archives only (….tar.gz.enc)", async () => {
  const server = await startServer({ BACKUP_SCHEDULE: "* * * * * *", BACKUP_KEEP: "2", BACKUP_ENCRYPTION_KEY: BACKUP_KEY });
  try {
    // A scheduled run may hold the lease this very second (409): then again.
    let manualName = "";
    for (let i = 0; !manualName && i < 400; i++) {
      const manual = await fetch(`${server.url}/api/admin/backups`, { method: "POST", headers: { authorization: `Bearer ${server.token}` } });
      if (manual.status === 201) manualName = (await jsonOf<CreatedBackup>(manual)).name;
      else {
        expect(manual.status).toBe(409);
        await Bun.sleep(50);
      }
    }
    expect(manualName).toMatch(ENCRYPTED);
    const folder = join(server.dataDir, "backups");
    const scheduled = async () => {
      const names = readdirSync(folder).filter((n) => n !== manualName && !n.startsWith("."));
      return (await Promise.all(names.map((n) => manifestOf(join(folder, n), BACKUP_KEY).catch(() => undefined)))).filter((m) => m?.trigger === "scheduled");
    };
    const db = () => new Database(join(server.dataDir, "usersvc.db"), { readonly: true });
    for (let i = 0; ; i++) {
      const handle = db();
      const made = handle
        .query<{ n: number }, []>("SELECT count(*) AS n FROM audit_log WHERE action = 'BACKUP_CREATED' AND json_extract(details, '$.trigger') = 'scheduled'")
        .get()!.n;
      handle.close();
      if (made >= 3) break;
      if (i > 450) throw new Error(`only ${made} scheduled backups after 45 s`);
      await Bun.sleep(100);
    }
    await Bun.sleep(500); // the last run's pruning
    expect((await scheduled()).length).toBeLessThanOrEqual(2);
    expect(existsSync(join(folder, manualName))).toBe(true);
    const health = await jsonOf<{ components: Record<string, unknown> }>(await fetch(`${server.url}/actuator/health`, { headers: { authorization: `Bearer ${server.token}` } }));
    expect(health.components.backup).toMatchObject({ status: "UP", details: { schedule: "* * * * * *" } });
  } finally {
    await server.stop();
  }
}, 90_000);

test("after a restore the orphan sweep keeps the objects stored after the backup (no row now), and removes real orphans", async () => {
  // One storage shared by the live service and the restored copy, as an S3 bucket would be.
  const storage = mkdtempSync(join(tmpdir(), "usersvc-shared-storage-"));
  const t = await makeTestApp({ FILE_STORAGE: storage });
  const target = mkdtempSync(join(tmpdir(), "usersvc-sweep-"));
  try {
    const admin = await t.admin();
    const upload = async (text: string) => {
      const form = new FormData();
      form.append("file", new Blob([text]), `${text}.txt`);
      const res = await t.request<{ fileName: string }>("POST", "/api/files/upload", { token: admin.token, raw: form });
      expect(res.status).toBe(201);
      return res.body.fileName;
    };
    const before = await upload("before-the-backup");
    const made = (await t.request("POST", "/api/admin/backups", { token: admin.token })).body;
    const after = await upload("after-the-backup");
    const restored = cli(["restore", join(t.dir, "backups", made.name)], { DATA_DIR: target, FILE_STORAGE: storage, JWT_SECRET: "x".repeat(64) });
    expect(restored.code).toBe(0);
    await storeOrphan(t, "a crash's leftover, after the restore");

    const database = await openDatabase({ url: `file:${join(target, "usersvc.db")}` });
    try {
      const late = Date.now() + ORPHAN_AGE_MS + 60_000;
      expect(await sweepOrphanedFiles({ db: database, files: t.files }, late)).toEqual({ removed: 1, kept: 1 });
      expect(readdirSync(storage).sort()).toEqual([before, after].sort());
    } finally {
      database.close();
    }
  } finally {
    await t.close();
    rmSync(storage, { recursive: true, force: true });
    rmSync(target, { recursive: true, force: true });
  }
}, 30_000);

test("the recovery drill in docs/operations.md works verbatim", async () => {
  const operations = readFileSync(join(import.meta.dir, "../docs/operations.md"), "utf8");
  const drill = /### Recovery drill[\s\S]*?```sh\n([\s\S]*?)```/.exec(operations)?.[1];
  expect(drill).toBeDefined();
  const live = await startServer({ JWT_SECRET: "" });
  const scratch = mkdtempSync(join(tmpdir(), "usersvc-drill-"));
  // `usersvc` on the PATH: the program from source.
  mkdirSync(join(scratch, "bin"));
  writeFileSync(join(scratch, "bin/usersvc"), `#!/bin/sh\nexec "${process.execPath}" "${join(import.meta.dir, "../src/main.ts")}" "$@"\n`, { mode: 0o755 });
  const port = String(freePort());
  const shell = Bun.spawn(["bash", "-e", "-c", drill!], {
    cwd: scratch,
    // The service's settings: with BACKUP_ENCRYPTION_KEY the archive carries the keys (and restore reads the same setting).
    env: cleanEnv({
      PATH: `${join(scratch, "bin")}:${process.env.PATH}`,
      DATA_DIR: live.dataDir,
      TMPDIR: scratch,
      DRILL_PORT: port,
      HOST: "127.0.0.1",
      BACKUP_ENCRYPTION_KEY: BACKUP_KEY,
    }),
    stdout: "ignore",
    stderr: "pipe",
  });
  try {
    let answered = false;
    for (let i = 0; i < 300 && !answered && shell.exitCode === null; i++) {
      answered = await fetch(`http://127.0.0.1:${port}/actuator/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (!answered) await Bun.sleep(100);
    }
    if (!answered) throw new Error(`the drill's server did not answer: ${await new Response(shell.stderr).text()}`);
    // The live service's token works on the restored copy (its key came back with the data).
    const users = await fetch(`http://127.0.0.1:${port}/api/users`, { headers: { authorization: `Bearer ${live.token}` } });
    expect(users.status).toBe(200);
    const restored = readdirSync(scratch).filter((n) => n.startsWith("tmp."));
    expect(restored).toHaveLength(1);
    expect(existsSync(join(scratch, restored[0], "usersvc.db"))).toBe(true);
  } finally {
    for (const pid of descendants(shell.pid)) process.kill(pid, "SIGTERM");
    shell.kill("SIGTERM");
    await shell.exited;
    await live.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}, 60_000);

// BACKUP_DIR on S3: a real radosgw (or the one USERSVC_TEST_S3_ENDPOINT names).
const s3 = await startS3Server();
if ("reason" in s3) {
  console.warn(`backups on S3 (Ceph RGW) skipped: ${s3.reason}`);
  test.skip(`backups on S3 (Ceph RGW): ${s3.reason}`, () => {});
} else {
  describe("BACKUP_DIR on S3 (Ceph RGW)", () => {
    const server: S3Server = s3;
    const bucket = `backups-${crypto.randomUUID().slice(0, 8)}`;
    let t: TestApp;
    let admin: Awaited<ReturnType<TestApp["admin"]>>;
    const settings = {
      S3_ENDPOINT: server.endpoint,
      S3_ACCESS_KEY_ID: S3_TEST_KEYS.accessKeyId,
      S3_SECRET_ACCESS_KEY: S3_TEST_KEYS.secretAccessKey,
      S3_REGION: S3_TEST_KEYS.region,
    };
    beforeAll(async () => {
      await createBucket(server.endpoint, bucket);
      t = await makeTestApp({ ...settings, BACKUP_DIR: `s3://${bucket}/nightly` });
      admin = await t.admin();
    }, 60_000);
    afterAll(async () => {
      await t?.close();
      await server.stop();
    }, 30_000); // the OSD takes a few seconds to exit

    test("create, list, download, restore from s3://, delete", async () => {
      const created = await t.request("POST", "/api/admin/backups", { token: admin.token });
      expect(created.status).toBe(201);
      const client = new S3Client({ bucket, endpoint: server.endpoint, ...S3_TEST_KEYS });
      expect((await client.stat(`nightly/${created.body.name}`)).size).toBe(created.body.size);
      expect(readdirSync(t.dir).filter((n) => n.endsWith(".tmp"))).toEqual([]); // the local temp archive is gone
      expect((await t.request("GET", "/api/admin/backups", { token: admin.token })).body).toEqual([created.body]);
      const download = await t.app.handle(new Request(`http://localhost/api/admin/backups/${created.body.name}`, { headers: { authorization: `Bearer ${admin.token}` } }));
      expect(download.status).toBe(200);
      expect((await download.arrayBuffer()).byteLength).toBe(created.body.size);

      const target = mkdtempSync(join(tmpdir(), "usersvc-s3-restore-"));
      try {
        const run = cli(["restore", `s3://${bucket}/nightly/${created.body.name}`], { ...settings, DATA_DIR: target, JWT_SECRET: "x".repeat(64) });
        expect(run.code).toBe(0);
        expect(digests(join(target, "usersvc.db")).users).toBe(digests(join(t.dir, "usersvc.db")).users);
      } finally {
        rmSync(target, { recursive: true, force: true });
      }
      expect((await t.request("DELETE", `/api/admin/backups/${created.body.name}`, { token: admin.token })).status).toBe(204);
      expect((await t.request("GET", "/api/admin/backups", { token: admin.token })).body).toEqual([]);
    }, 60_000);
  });
}
