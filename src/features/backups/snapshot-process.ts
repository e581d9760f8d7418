/**
 * A backup's snapshot runs in a child process of this same program (`usersvc __snapshot`, not
 * listed in --help): bun:sqlite is synchronous, so a VACUUM INTO of a large database must not
 * run on the server's event loop; and a process of its own keeps SQLite's POSIX locks apart from
 * the server's connections, whichever driver those use (two SQLite libraries in one process would
 * drop each other's locks when either closes the file). The job goes in on stdin as JSON; the
 * result comes back as the last line of stdout.
 */
import { setPriority } from "node:os";
import { resolve } from "node:path";
import { isCompiled } from "../../workers";
import { takeSnapshot, type SnapshotJob, type SnapshotResult } from "./snapshot";

export const SNAPSHOT_COMMAND = "__snapshot";

/** `bun src/main.ts` from source and in tests; the compiled executable itself otherwise. */
function snapshotCommand(): string[] {
  // (import.meta.dir is fixed at build time: from source only.)
  return isCompiled() ? [process.execPath, SNAPSHOT_COMMAND] : [process.execPath, resolve(import.meta.dir, "../../main.ts"), SNAPSHOT_COMMAND];
}

export async function snapshotInChild(job: SnapshotJob): Promise<SnapshotResult> {
  const child = Bun.spawn(snapshotCommand(), { stdin: "pipe", stdout: "pipe", stderr: "pipe", env: process.env });
  child.stdin.write(JSON.stringify(job));
  await child.stdin.end();
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(err.trim().split("\n").pop() || `the snapshot process exited with ${code ?? child.signalCode}`);
  return JSON.parse(out.trim().split("\n").pop()!) as SnapshotResult;
}

/** The child's side: one job, then exit. It stops, publishing nothing, if its parent is gone. */
export async function runSnapshotChild(): Promise<number> {
  const job = JSON.parse(await Bun.stdin.text()) as SnapshotJob;
  // A backup is background work: on a busy machine the server's requests get the CPU first.
  setPriority(10);
  const parent = process.ppid;
  try {
    const result = await takeSnapshot(job, () => process.ppid === parent);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`${(error as Error)?.message ?? error}\n`);
    return 1;
  }
}
