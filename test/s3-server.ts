/**
 * A real S3 endpoint for the file-storage suite: Ceph's radosgw on loopback, started from the
 * shared recipe (../shared/recipes/s3-ceph/start.sh, a single-node memstore cluster), or one
 * already running whose endpoint is in USERSVC_TEST_S3_ENDPOINT (.ci/run may start it once).
 */
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { s3Fetch } from "../src/storage/s3-multipart";
import { reaper } from "./support/reaper";

export const S3_TEST_KEYS = { accessKeyId: "test-key", secretAccessKey: "test-secret", region: "us-east-1" };

export interface S3Server {
  endpoint: string;
  stop(): Promise<void>;
}

/** shared/ sits beside the repository (in CI too: a fresh clone with shared/ next to it). */
const RECIPE = resolve(import.meta.dir, "../../shared/recipes/s3-ceph/start.sh");

/** A running S3 server, or the reason there is none (for the skip message). */
export async function startS3Server(): Promise<S3Server | { reason: string }> {
  const given = process.env.USERSVC_TEST_S3_ENDPOINT;
  if (given) return { endpoint: given, stop: async () => {} };
  if (!existsSync(RECIPE)) return { reason: "no shared/recipes/s3-ceph beside the repository" };
  if (!Bun.which("radosgw") || !Bun.which("ceph-osd") || !Bun.which("ceph-mon")) {
    return { reason: "radosgw, ceph-osd or ceph-mon is not installed (apt-get install ceph-mon ceph-osd radosgw)" };
  }
  const port = 18085;
  // The recipe's ports are fixed: a cluster someone else started (another test run) is not ours to use or stop.
  for (const taken of [port, 16789]) {
    if (await listening(taken)) return { reason: `127.0.0.1:${taken} is already in use (another Ceph test cluster running?)` };
  }
  // The OSD's first start is flaky (the recipe retries once); one more whole attempt covers the rest.
  let reason = "";
  for (let attempt = 1; attempt <= 2; attempt++) {
    const started = await startCluster(RECIPE, port);
    if ("endpoint" in started) return started;
    reason = started.reason;
  }
  return { reason };
}

async function startCluster(recipe: string, port: number): Promise<S3Server | { reason: string }> {
  const dir = mkdtempSync(join(tmpdir(), "usersvc-ceph-"));
  const cluster = join(dir, "cluster");
  const started = Bun.spawn(["bash", recipe, cluster], { env: { ...process.env, RGW_PORT: String(port) }, stdout: "ignore", stderr: "pipe" });
  const [err, code] = await Promise.all([new Response(started.stderr).text(), started.exited]);
  const stop = async () => {
    // Every daemon whose working folder is this cluster (radosgw, osd, mon), each by its own pid,
    // also when the recipe failed halfway and printed none; the OSD takes a few seconds to exit.
    const pids = daemonsIn(cluster);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
    for (let i = 0; i < 75 && pids.some(alive); i++) await Bun.sleep(200);
    for (const pid of pids.filter(alive)) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const endpoint = `http://127.0.0.1:${port}`;
  if (code !== 0 || !(await reachable(endpoint))) {
    await stop();
    return { reason: `the Ceph recipe did not start (exit ${code}): ${err.trim().split("\n").slice(-1)[0]}` };
  }
  // The daemons are no children of ours: without the reaper, a run that never reaches its afterAll leaves them holding the fixed ports.
  const pids = daemonsIn(cluster);
  for (const pid of pids) reaper.add(pid);
  reaper.addDir(dir);
  return {
    endpoint,
    async stop() {
      await stop();
      for (const pid of pids) reaper.release(pid);
      reaper.releaseDir(dir);
    },
  };
}

function daemonsIn(folder: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) === folder) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function reachable(endpoint: string) {
  try {
    await fetch(endpoint);
    return true;
  } catch {
    return false;
  }
}

/** PUT /bucket: Bun's S3 client has no CreateBucket, and a test needs a fresh bucket of its own. */
export async function createBucket(endpoint: string, bucket: string, keys = S3_TEST_KEYS) {
  await s3Fetch({ endpoint, bucket, ...keys }, "PUT", "");
}
