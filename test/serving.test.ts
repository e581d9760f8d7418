/**
 * lifecycle.serving: the signal main.ts gives the binary's JIT its normal policy on. Health probes
 * (what an orchestrator sends an idle server) never give it; the first answer of any other route
 * does, checked once per route and never per request. lifecycle.probed: the first answer of each
 * health probe route (main.ts hands start-up's leftovers back after it).
 */
import { afterAll, beforeAll, expect, test } from "./legs";
import { makeTestApp, type TestApp } from "./helpers";

let t: TestApp;
let calls = 0;

beforeAll(async () => {
  t = await makeTestApp();
  t.lifecycle.serving = () => calls++;
});
afterAll(() => t.close());

/** The status of a GET, once its onAfterResponse hooks (queued with setImmediate after the answer) have run. */
async function answered(path: string, app: TestApp = t): Promise<number> {
  const { status } = await app.request("GET", path);
  await new Promise((resolve) => setImmediate(resolve));
  return status;
}

test("health probes never signal serving; the first answer of another route does, once per route", async () => {
  for (const path of ["/actuator/health", "/actuator/health/liveness", "/actuator/health/readiness", "/actuator/health"]) {
    expect(await answered(path)).toBe(200);
  }
  expect(calls).toBe(0);

  // Refused (401) is still an answer of the route: traffic has begun.
  expect(await answered("/api/users/1")).toBe(401);
  expect(calls).toBe(1);
  expect(await answered("/api/users/2")).toBe(401);
  expect(calls).toBe(1);

  expect(await answered("/api/version")).toBe(200);
  expect(calls).toBe(2);
  expect(await answered("/api/version")).toBe(200);
  expect(calls).toBe(2);
});

test("the first answer of each health probe route signals probed (main.ts hands start-up's leftovers back then); other routes never do", async () => {
  const app = await makeTestApp();
  let probes = 0;
  app.lifecycle.probed = () => probes++;
  try {
    const steps: [path: string, status: number, probesSoFar: number][] = [
      ["/api/users/1", 401, 0],
      ["/actuator/health", 200, 1],
      ["/actuator/health", 200, 1],
      ["/actuator/health/readiness", 200, 2],
    ];
    for (const [path, status, probesSoFar] of steps) {
      expect(await answered(path, app)).toBe(status);
      expect(probes).toBe(probesSoFar);
    }
  } finally {
    await app.close();
  }
});
