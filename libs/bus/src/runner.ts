import type { Logger, ReadinessGate } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { BucketSpec } from "./bucket.js";
import { Bus } from "./connection.js";

/** Options of {@link busRunner}. */
export interface BusRunnerOptions {
  url: string;
  /** The connection name, e.g. "push-<replica>". */
  name: string;
  logger: Logger;
  readiness: ReadinessGate;
  /** Buckets this service writes: created (file storage) at start if missing. */
  buckets?: ReadonlyArray<BucketSpec<unknown>>;
  replicas?: number;
}

/** The bus runner: once started, its `bus` is connected. */
export interface BusRunner extends Runner {
  readonly bus: Bus;
}

/**
 * A runner that connects to NATS (retrying until the server answers) and
 * opens the service's buckets. The service is not ready until it has.
 */
export function busRunner(options: BusRunnerOptions): BusRunner {
  let bus: Bus | undefined;
  return {
    name: "nats",
    get bus() {
      if (!bus) throw new Error("the bus runner has not started");
      return bus;
    },
    async start() {
      options.readiness.require("nats");
      bus = await Bus.connect({
        url: options.url,
        name: options.name,
        logger: options.logger,
        replicas: options.replicas,
        waitOnFirstConnect: true,
      });
      for (const spec of options.buckets ?? []) await bus.bucket(spec);
      options.readiness.done("nats");
      options.logger.info(
        { url: options.url, buckets: options.buckets?.map((spec) => spec.name) },
        "connected to NATS",
      );
    },
    async close() {
      await bus?.close();
    },
  };
}
