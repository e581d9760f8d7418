/**
 * What a Bun runtime holds resident before any of our code runs (docs/performance.md, "Which Bun serves usersvc"):
 * an idle process's RSS and the part of it that is the executable's code pages, one second after start.
 *
 *   node_modules/.bin/bun bench/runtime-rss.ts          the project's Bun (1.4.4)
 *   node_modules/bun-1.4.5/bin/bun bench/runtime-rss.ts  the newer one pinned beside it
 *
 * Both Buns' code sections are the same size (~78 MiB); what differs is how much of it start-up touches.
 */
import { readFileSync, realpathSync } from "node:fs";

const mib = (kib: number) => (kib / 1024).toFixed(1);

setTimeout(() => {
  const rss = Number(/\nVmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]);
  // The executable's code: its r-xp mapping (the section is one mapping); its Rss is what start-up faulted in.
  const executable = realpathSync(process.execPath);
  const mapping = readFileSync("/proc/self/smaps", "utf8")
    .split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)
    .find((block) => {
      const header = block.slice(0, block.indexOf("\n"));
      return header.includes(" r-xp ") && header.endsWith(executable);
    });
  const code = Number(/\nRss:\s+(\d+)/.exec(mapping ?? "")?.[1]);
  console.log(`bun ${Bun.version} (${Bun.revision.slice(0, 9)}): idle RSS ${mib(rss)} MiB, of it the executable's code ${mib(code)} MiB`);
}, 1000);
