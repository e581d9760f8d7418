/**
 * What the browser suites share: Debian's Chromium, how it is launched, and why a suite skips
 * (slow: only under `npm run test:browser`, CONSOLE_BROWSER=1; or no Chromium on the machine).
 */
import { existsSync } from "node:fs";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

export const skippedBecause =
  process.env.CONSOLE_BROWSER !== "1"
    ? "slow; runs under npm run test:browser (CONSOLE_BROWSER=1)"
    : !existsSync(CHROMIUM)
      ? `no Chromium at ${CHROMIUM} (apt-get install chromium)`
      : undefined;

export const launchChromium = () => chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });

/** A new context (a 1100×900 window in `locale`) and page, whose CSP reports and uncaught errors go to `problems` (a suite expects it empty at the end). */
export async function newWatchedPage(browser: Browser, locale: string, problems: string[]): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ locale, viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  page.on("console", (message) => {
    if (/Content Security Policy/i.test(message.text())) problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  return { context, page };
}
