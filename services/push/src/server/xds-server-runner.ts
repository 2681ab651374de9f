import { Server, ServerCredentials } from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import { AggregatedDiscoveryServiceService } from "@sextant/proto/envoy";
import type { Runner } from "@sextant/runtime";
import type { DiscoveryServer } from "./discovery-server.js";

/** The xDS gRPC server runner; once started, `port` is the port it listens on. */
export interface XdsServerRunner extends Runner {
  readonly port: number;
}

/** Serves ADS in plaintext on port (0 picks one). */
export function xdsServerRunner(discovery: DiscoveryServer, port: number, logger: Logger): XdsServerRunner {
  // xDS streams live as long as the proxy: keepalives find dead peers.
  const server = new Server({
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.max_receive_message_length": 16 * 1024 * 1024,
  });
  let bound = 0;
  return {
    name: "xds-server",
    get port() {
      return bound;
    },
    async start() {
      server.addService(AggregatedDiscoveryServiceService, discovery.implementation());
      bound = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`0.0.0.0:${port}`, ServerCredentials.createInsecure(), (error, actual) =>
          error
            ? reject(new Error(`cannot listen for xDS on port ${port}: ${error.message}`))
            : resolve(actual),
        ),
      );
      logger.info({ port: bound }, "serving ADS (plaintext)");
    },
    async close() {
      // Not tryShutdown: proxies hold their streams open for as long as they
      // live, so a graceful shutdown would wait for them forever. They
      // reconnect to another replica.
      discovery.closeAll();
      server.forceShutdown();
    },
  };
}
