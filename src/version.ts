/** Build facts, baked in by scripts/build.ts (--define); "dev" when running from source. */
import pkg from "../package.json" with { type: "json" };

declare const BUILD_COMMIT: string | undefined;
declare const BUILD_TIME: string | undefined;

export const VERSION = {
  name: pkg.name,
  version: pkg.version,
  commit: typeof BUILD_COMMIT === "string" ? BUILD_COMMIT : "dev",
  buildTime: typeof BUILD_TIME === "string" ? BUILD_TIME : null,
  runtime: `bun ${Bun.version}`,
};
