import { Buckets, type Bus, type Mirror } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import type { TrustBundle } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { trustBundleKey } from "./trust-bundle.js";

/** Someone following the bundle: a WatchTrustBundle call. */
export interface TrustBundleFollower {
  /** Called with the current bundle at once (if there is one), then with each change. */
  send(bundle: TrustBundle): void;
  /** Called when the feed closes: the CA is shutting down. */
  end(): void;
}

/** The CA's trust bundle as it is in `sextant-trust`, for every WatchTrustBundle call. */
export interface TrustBundleFeed extends Runner {
  /** Adds a follower; returns the function that removes it. */
  follow(follower: TrustBundleFollower): () => void;
}

/** Options of {@link trustBundleFeed}. */
export interface TrustBundleFeedOptions {
  bus: () => Bus;
  trustDomain: string;
  logger: Logger;
}

/**
 * One mirror of the trust domain's key in `sextant-trust`, shared by every
 * WatchTrustBundle call: a thousand agents cost one NATS consumer, not a
 * thousand. It keeps the latest bundle for new followers. It starts after
 * the trust-bundle runner, so the first value has the root this CA signs
 * under; closing ends every watch, so the gRPC server can stop at once.
 */
export function trustBundleFeed(options: TrustBundleFeedOptions): TrustBundleFeed {
  const followers = new Set<TrustBundleFollower>();
  let latest: TrustBundle | undefined;
  let mirror: Mirror<TrustBundle> | undefined;
  let closed = false;
  return {
    name: "trust-bundle-feed",
    async start() {
      const bucket = await options.bus().bucket(Buckets.trust);
      mirror = await bucket.mirror({ filter: trustBundleKey(options.trustDomain) });
      const subscription = mirror.subscribe(({ changes }) => {
        for (const { value } of changes) {
          // Followers keep the roots they have rather than be told to trust nothing.
          if (!value) {
            options.logger.warn({ trustDomain: options.trustDomain }, "trust bundle deleted; not forwarded");
            continue;
          }
          latest = value;
          for (const follower of followers) follower.send(value);
        }
      });
      await subscription.synced;
    },
    async close() {
      closed = true;
      for (const follower of followers) follower.end();
      followers.clear();
      await mirror?.close();
    },
    follow(follower) {
      // A call that arrives while the CA stops ends at once, rather than hold up the server's stop.
      if (closed) {
        follower.end();
        return () => {};
      }
      followers.add(follower);
      if (latest) follower.send(latest);
      return () => followers.delete(follower);
    },
  };
}
