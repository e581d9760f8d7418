/**
 * A real S3 endpoint for the file-storage suite: Ceph's radosgw on loopback, started from the
 * shared recipe (../shared/recipes/s3-ceph/start.sh, a single-node memstore cluster), or one
 * already running whose endpoint is in USERSVC_TEST_S3_ENDPOINT (.ci/run may start it once).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { s3Fetch } from "../src/storage/s3-multipart";

export const S3_TEST_KEYS = { accessKeyId: "test-key", secretAccessKey: "test-secret", region: "us-east-1" };

export interface S3Server {
  endpoint: string;
  stop(): Promise<void>;
}

const RECIPE_CANDIDATES = [
  resolve(import.meta.dir, "../../shared/recipes/s3-ceph/start.sh"),
  "/work/shared/recipes/s3-ceph/start.sh",
];

/** A running S3 server, or the reason there is none (for the skip message). */
export async function startS3Server(): Promise<S3Server | { reason: string }> {
  const given = process.env.USERSVC_TEST_S3_ENDPOINT;
  if (given) return { endpoint: given, stop: async () => {} };
  const recipe = RECIPE_CANDIDATES.find((path) => existsSync(path));
  if (!recipe) return { reason: `no s3-ceph recipe at ${RECIPE_CANDIDATES.join(" or ")}` };
  if (!Bun.which("radosgw") || !Bun.which("ceph-osd") || !Bun.which("ceph-mon")) {
    return { reason: "radosgw, ceph-osd or ceph-mon is not installed (apt-get install ceph-mon ceph-osd radosgw)" };
  }
  const dir = mkdtempSync(join(tmpdir(), "usersvc-ceph-"));
  const port = 18085;
  const started = Bun.spawn(["bash", recipe, join(dir, "cluster")], { env: { ...process.env, RGW_PORT: String(port) }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(started.stdout).text(), new Response(started.stderr).text(), started.exited]);
  const pids = out.split(/\s+/).filter((pid) => /^\d+$/.test(pid)).map(Number);
  const stop = async () => {
    // radosgw, osd, mon: each by its own pid; the OSD takes a few seconds to exit.
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
    for (let i = 0; i < 50 && pids.some(alive); i++) await Bun.sleep(200);
    for (const pid of pids.filter(alive)) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const endpoint = `http://127.0.0.1:${port}`;
  if (code !== 0 || pids.length < 3 || !(await reachable(endpoint))) {
    await stop();
    return { reason: `the Ceph recipe did not start (exit ${code}): ${err.trim().split("\n").slice(-2).join(" / ")}` };
  }
  return { endpoint, stop };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

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
