import { Buckets, type Bus, encodeKey, type Watch } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import { rootsOfBundle } from "./roots.js";
import { RootsRelay, type TrustBundleSource } from "./trust-source.js";

/** Options of {@link busTrustBundleSource}. */
export interface BusTrustBundleSourceOptions {
  /** The service's bus, once connected (busRunner's `bus`). */
  bus: () => Bus;
  trustDomain: string;
  logger: Logger;
}

/**
 * Follows the sextant-trust bucket (Buckets.trust, key encodeKey(trustDomain)),
 * for services that are on NATS already (push). The bus's watch replays the
 * current bundle, then follows changes, and resumes by itself after NATS
 * restarts. A deleted key or a bundle without live roots keeps the last roots:
 * trusting nothing would cut every connection.
 */
export function busTrustBundleSource(options: BusTrustBundleSourceOptions): TrustBundleSource {
  const { trustDomain, logger } = options;
  let relay: RootsRelay | undefined;
  let watch: Watch | undefined;
  let closed = false;
  const stopWatch = () =>
    watch?.stop().catch((error) => logger.warn({ err: error }, "stopping the trust bundle watch failed"));
  return {
    async start(onBundle) {
      if (relay) throw new Error("busTrustBundleSource: start() was already called");
      const roots = new RootsRelay(onBundle);
      relay = roots;
      const bucket = await options.bus().bucket(Buckets.trust);
      watch = await bucket.watch(
        (event) => {
          if (closed) return;
          if (event.type === "delete") {
            logger.warn(
              { trustDomain },
              "the trust bundle was deleted from sextant-trust; keeping the last roots",
            );
            return;
          }
          const rootsPem = rootsOfBundle(event.value);
          if (rootsPem.length === 0) {
            logger.warn({ trustDomain }, "a trust bundle without live roots; keeping the last roots");
            return;
          }
          roots.offer(rootsPem);
        },
        { filter: encodeKey(trustDomain) },
      );
      if (closed) void stopWatch();
      return roots.first;
    },
    close() {
      closed = true;
      relay?.fail(
        new Error(`trust bundle source closed before a bundle for ${trustDomain} arrived in sextant-trust`),
      );
      void stopWatch();
    },
  };
}
