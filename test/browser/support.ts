/**
 * What the browser suites share: Debian's Chromium, how it is launched, and why a suite skips
 * (slow: only under `npm run test:browser`, CONSOLE_BROWSER=1; or no Chromium on the machine).
 */
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export const skippedBecause =
  process.env.CONSOLE_BROWSER !== "1"
    ? "slow; runs under npm run test:browser (CONSOLE_BROWSER=1)"
    : !existsSync(CHROMIUM)
      ? `no Chromium at ${CHROMIUM} (apt-get install chromium)`
      : undefined;

export const launchChromium = () => chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
