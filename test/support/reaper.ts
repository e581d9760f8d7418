/**
 * What a test run starts must not outlive it, however the run ends: `bun test` runs no "exit"
 * handlers, and a run ended by a timeout or Ctrl-C, or one whose -t filter skips the tests of a
 * describe (and with them its afterAll), runs no hook. Daemons (Ceph's) and our own children
 * alike would be left behind, holding fixed ports (Ceph's 18085) for every later run.
 *
 * One watchdog per test process, in a session of its own (so a Ctrl-C to the run's process group
 * spares it), reads what to clean up from a pipe. When the pipe closes, i.e. this process is
 * gone whichever way, it sends SIGTERM to every pid still registered, SIGKILL to those alive
 * 15 s later, and removes the folders still registered. Release what a test stopped itself, so a
 * reused pid is never signalled.
 */
const WATCHDOG = `
declare -A pids dirs
while read -r verb what; do
  case $verb in
    pid) pids[$what]=1 ;;
    unpid) unset "pids[$what]" ;;
    dir) dirs[$what]=1 ;;
    undir) unset "dirs[$what]" ;;
  esac
done
left=("\${!pids[@]}")
if [ \${#left[@]} -gt 0 ]; then
  kill -TERM "\${left[@]}" 2>/dev/null
  # Alive: not gone and not a zombie (a child of the ended run, waiting for init to reap it).
  alive() { for p in "\${left[@]}"; do case $(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) in "" | Z*) ;; *) return 0 ;; esac; done; return 1; }
  for _ in $(seq 75); do alive || break; sleep 0.2; done
  kill -KILL "\${left[@]}" 2>/dev/null
fi
for dir in "\${!dirs[@]}"; do rm -rf -- "$dir"; done
`;

let watchdog: Bun.Subprocess<"pipe", "ignore", "ignore"> | undefined;

function tell(line: string) {
  if (!watchdog) {
    watchdog = Bun.spawn(["setsid", "bash", "-c", WATCHDOG], { stdin: "pipe", stdout: "ignore", stderr: "ignore" });
    // Neither it nor its pipe keeps the run alive: the run's end is what it waits for.
    watchdog.unref();
    watchdog.stdin.unref();
  }
  watchdog.stdin.write(`${line}\n`);
  watchdog.stdin.flush();
}

export const reaper = {
  /** Stopped when this process ends, unless released first. */
  add: (pid: number) => tell(`pid ${pid}`),
  release: (pid: number) => tell(`unpid ${pid}`),
  /** Removed when this process ends, unless released first. */
  addDir: (dir: string) => tell(`dir ${dir}`),
  releaseDir: (dir: string) => tell(`undir ${dir}`),
};
