/**
 * File throughput and memory, per storage back end, on a real port:
 *   bun bench/files.ts            (npm run bench calls it too)
 * For the local folder and for S3 (a Ceph radosgw started from the shared recipe, or the one
 * USERSVC_TEST_S3_ENDPOINT names): median upload and download MB/s of a 10 MiB file over
 * REPEATS runs, and the server's peak RSS while a 50 MiB upload streams in.
 * Runs the compiled binary (USERSVC_BINARY, default dist/usersvc) when it exists, else the source.
 * Writes bench/results/files.json.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Env } from "../src/config";
import { createBucket, S3_TEST_KEYS, startS3Server } from "../test/s3-server";
import { peakRss, rssOf, startServer, streamDownload, streamUpload } from "../test/server-process";

const ROOT = resolve(import.meta.dir, "..");
const MIB = 1024 * 1024;
const REPEATS = Number(process.env.BENCH_FILE_REPEATS ?? 5);
const binary = process.env.USERSVC_BINARY ?? join(ROOT, "dist/usersvc");
const command = existsSync(binary) ? binary : undefined;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (value: number) => Math.round(value * 10) / 10;

async function measure(label: string, env: Env) {
  const server = await startServer({ ...env, MAX_UPLOAD_BYTES: String(64 * MIB) }, command);
  try {
    const uploads: number[] = [];
    const downloads: number[] = [];
    let name = "";
    for (let i = 0; i < REPEATS; i++) {
      let t0 = performance.now();
      const up = await streamUpload(server, 10 * MIB, "ten.bin");
      if (up.status !== 201) throw new Error(`${label}: upload answered ${up.status} ${JSON.stringify(up.body)}`);
      uploads.push(10 / ((performance.now() - t0) / 1000));
      name = up.body.fileName;
      t0 = performance.now();
      const down = await streamDownload(server, name);
      if (down.sha256 !== up.sha256) throw new Error(`${label}: download differs from upload`);
      downloads.push(10 / ((performance.now() - t0) / 1000));
    }
    const before = rssOf(server.pid);
    const { peak, result } = await peakRss(server, () => streamUpload(server, 50 * MIB, "fifty.bin"));
    if (result.status !== 201) throw new Error(`${label}: 50 MiB upload answered ${result.status}`);
    return {
      backend: label,
      uploadMBps: round(median(uploads)),
      downloadMBps: round(median(downloads)),
      rssBeforeMiB: round(before / MIB),
      rssPeakDuring50MiBUploadMiB: round(peak / MIB),
    };
  } finally {
    await server.stop();
  }
}

const results: Record<string, unknown>[] = [];
results.push(await measure("local", {}));

const s3 = await startS3Server();
if ("reason" in s3) {
  console.log(`files bench on S3 skipped: ${s3.reason}`);
  results.push({ backend: "s3", skipped: s3.reason });
} else {
  try {
    const bucket = `usersvc-bench-${crypto.randomUUID().slice(0, 8)}`;
    await createBucket(s3.endpoint, bucket);
    results.push(
      await measure("s3 (Ceph RGW, loopback)", {
        FILE_STORAGE: `s3://${bucket}/bench`,
        S3_ENDPOINT: s3.endpoint,
        S3_ACCESS_KEY_ID: S3_TEST_KEYS.accessKeyId,
        S3_SECRET_ACCESS_KEY: S3_TEST_KEYS.secretAccessKey,
        S3_REGION: S3_TEST_KEYS.region,
      }),
    );
  } finally {
    await s3.stop();
  }
}

console.log(`\nfiles (${command ? "binary" : "source"}; 10 MiB file, median of ${REPEATS}; RSS of the server process)`);
console.table(results);
mkdirSync(join(import.meta.dir, "results"), { recursive: true });
writeFileSync(
  join(import.meta.dir, "results/files.json"),
  `${JSON.stringify({ at: new Date().toISOString(), runner: command ? "binary" : "source", repeats: REPEATS, results }, null, 2)}\n`,
);
