import { setTimeout as sleep } from "node:timers/promises";
import { type ClientReadableStream, credentials, type StatusObject, status } from "@grpc/grpc-js";
import { Backoff } from "@sextant/kube/retry";
import type { Logger } from "@sextant/observability";
import { type TrustBundle, TrustBundleServiceClient } from "@sextant/proto";
import { mergeRoots, rootsOfBundle } from "./roots.js";
import { CA_RETRY } from "./timers.js";
import { RootsRelay, type TrustBundleSource } from "./trust-source.js";

/**
 * Keepalive pings on the watch: a CA that vanished without closing the
 * connection (a node lost, a partition) would otherwise leave the stream
 * waiting forever. grpc-js servers accept pings at any rate.
 */
const KEEPALIVE = { "grpc.keepalive_time_ms": 60_000, "grpc.keepalive_timeout_ms": 20_000 };

/** Options of {@link caTrustBundleSource}. */
export interface CaTrustBundleSourceOptions {
  /** host:port of the CA's gRPC-over-TLS port (8060). */
  caAddress: string;
  /** Verifies the CA's serving certificate. */
  caRootPem: string;
  logger: Logger;
}

/**
 * Follows ca's sextant.mesh.v1.TrustBundleService/WatchTrustBundle over TLS
 * (verifying the CA with caRootPem, and with the roots of the latest bundle,
 * so a CA serving under a rotated-in root is still recognised); reconnects
 * with backoff forever.
 */
export function caTrustBundleSource(options: CaTrustBundleSourceOptions): TrustBundleSource {
  const { caAddress, logger } = options;
  const lifetime = new AbortController();
  let current: { client: TrustBundleServiceClient; stream: ClientReadableStream<TrustBundle> } | undefined;
  let relay: RootsRelay | undefined;
  return {
    start(onBundle) {
      if (relay) return Promise.reject(new Error("caTrustBundleSource: start() was already called"));
      const roots = new RootsRelay(onBundle);
      relay = roots;
      const backoff = new Backoff(CA_RETRY);
      const connect = () => {
        if (lifetime.signal.aborted) return;
        const caRoots = mergeRoots([options.caRootPem], roots.latest ?? []).join("");
        const client = new TrustBundleServiceClient(
          caAddress,
          credentials.createSsl(Buffer.from(caRoots)),
          KEEPALIVE,
        );
        const stream = client.watchTrustBundle({});
        current = { client, stream };
        stream.on("data", (bundle: TrustBundle) => {
          backoff.reset();
          const rootsPem = rootsOfBundle(bundle);
          if (rootsPem.length === 0) {
            logger.warn({ caAddress }, "the CA sent a trust bundle without live roots; keeping the last one");
            return;
          }
          roots.offer(rootsPem);
        });
        // Every end of the call, failed or not, is reported once by "status"; without an
        // "error" listener a failed call would throw.
        stream.on("error", () => {});
        stream.on("status", (end: StatusObject) => {
          client.close();
          if (lifetime.signal.aborted) return;
          const delayMs = backoff.next();
          logger.warn(
            { caAddress, code: status[end.code], details: end.details, retryInMs: Math.round(delayMs) },
            "trust bundle watch ended; reconnecting",
          );
          // Until the first bundle, start() is awaited: the wait keeps the process alive.
          sleep(delayMs, undefined, { signal: lifetime.signal, ref: !roots.settled }).then(connect, () => {});
        });
      };
      connect();
      return roots.first;
    },
    close() {
      lifetime.abort();
      relay?.fail(new Error(`trust bundle source closed before the first bundle arrived from ${caAddress}`));
      current?.stream.cancel();
      current?.client.close();
    },
  };
}
