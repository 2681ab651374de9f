import type { ServerWritableStream } from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import type { TrustBundle, TrustBundleServiceServer, WatchTrustBundleRequest } from "@sextant/proto";
import type { TrustBundleFeed } from "./trust-bundle-feed.js";

/**
 * sextant.mesh.v1.TrustBundleService: WatchTrustBundle sends the current
 * bundle at once, then every change, until the caller cancels. The bundle is
 * public (roots only), so no credential is asked for: agents follow it
 * before they have a certificate.
 */
export function trustBundleService(feed: TrustBundleFeed, logger: Logger): TrustBundleServiceServer {
  return {
    watchTrustBundle(call: ServerWritableStream<WatchTrustBundleRequest, TrustBundle>) {
      const peer = call.getPeer();
      logger.debug({ peer }, "trust bundle watch started");
      const unfollow = feed.follow({
        send: (bundle) => call.write(bundle),
        end: () => call.end(),
      });
      call.once("cancelled", () => {
        unfollow();
        logger.debug({ peer }, "trust bundle watch ended");
      });
    },
  };
}
