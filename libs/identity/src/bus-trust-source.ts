import { Buckets, type Bus, encodeKey, type Mirror } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import type { TrustBundle } from "@sextant/proto";
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
 * for services that are on NATS already (push). The bucket's mirror replays the
 * current bundle, then follows changes, and resumes by itself after NATS
 * restarts. A deleted key or a bundle without live roots keeps the last roots:
 * trusting nothing would cut every connection.
 */
export function busTrustBundleSource(options: BusTrustBundleSourceOptions): TrustBundleSource {
  const { trustDomain, logger } = options;
  let relay: RootsRelay | undefined;
  let mirror: Mirror<TrustBundle> | undefined;
  let closed = false;
  const closeMirror = () =>
    mirror?.close().catch((error) => logger.warn({ err: error }, "closing the trust bundle mirror failed"));
  return {
    async start(onBundle) {
      if (relay) throw new Error("busTrustBundleSource: start() was already called");
      const roots = new RootsRelay(onBundle);
      relay = roots;
      const bucket = await options.bus().bucket(Buckets.trust);
      mirror = await bucket.mirror({ filter: encodeKey(trustDomain) });
      mirror.subscribe(({ changes }) => {
        for (const { value } of changes) {
          if (closed) return;
          if (!value) {
            logger.warn(
              { trustDomain },
              "the trust bundle was deleted from sextant-trust; keeping the last roots",
            );
            continue;
          }
          const rootsPem = rootsOfBundle(value);
          if (rootsPem.length === 0) {
            logger.warn({ trustDomain }, "a trust bundle without live roots; keeping the last roots");
            continue;
          }
          roots.offer(rootsPem);
        }
      });
      if (closed) void closeMirror();
      return roots.first;
    },
    close() {
      closed = true;
      relay?.fail(
        new Error(`trust bundle source closed before a bundle for ${trustDomain} arrived in sextant-trust`),
      );
      void closeMirror();
    },
  };
}
