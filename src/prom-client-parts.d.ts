/**
 * Types of the prom-client files src/metrics.ts, src/workers.ts and the backup metrics import one by one (see there
 * why): each file's module.exports is the same-named export of the package's own typings.
 */
declare module "prom-client/lib/registry" {
  import { Registry } from "prom-client";
  export = Registry;
}
declare module "prom-client/lib/counter" {
  import { Counter } from "prom-client";
  export = Counter;
}
declare module "prom-client/lib/gauge" {
  import { Gauge } from "prom-client";
  export = Gauge;
}
declare module "prom-client/lib/defaultMetrics" {
  import { collectDefaultMetrics } from "prom-client";
  export = collectDefaultMetrics;
}
declare module "prom-client/lib/cluster" {
  import { AggregatorRegistry } from "prom-client";
  export = AggregatorRegistry;
}
