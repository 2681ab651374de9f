import { Server, type ServerCredentials } from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import { AggregatedDiscoveryServiceService } from "@sextant/proto/envoy";
import type { Runner } from "@sextant/runtime";
import type { DiscoveryServer, StreamAuthorizer } from "./discovery-server.js";

/** The xDS gRPC server runner; once started, `port` is the port it listens on. */
export interface XdsServerRunner extends Runner {
  readonly port: number;
}

/** Options of {@link xdsServerRunner}. */
export interface XdsServerRunnerOptions {
  /** The runner's name in logs ("xds-server", "xds-tls-server"). */
  name: string;
  discovery: DiscoveryServer;
  /** 0 picks one. */
  port: number;
  /** Called at start, after the runners before it have started (the mTLS port needs push's certificate first). */
  credentials: () => ServerCredentials;
  /** Checks each stream's peer against the node it names; none on the plaintext port. */
  authorize?: StreamAuthorizer;
  /** How the log line describes the port. */
  description: string;
  logger: Logger;
}

/** Serves ADS on one port. Push has two: plaintext 15010 and mTLS 15012, over one DiscoveryServer. */
export function xdsServerRunner(options: XdsServerRunnerOptions): XdsServerRunner {
  const { discovery, port, logger } = options;
  // xDS streams live as long as the proxy: keepalives find dead peers.
  const server = new Server({
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.max_receive_message_length": 16 * 1024 * 1024,
  });
  let bound = 0;
  return {
    name: options.name,
    get port() {
      return bound;
    },
    async start() {
      server.addService(AggregatedDiscoveryServiceService, discovery.implementation(options.authorize));
      bound = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`0.0.0.0:${port}`, options.credentials(), (error, actual) =>
          error
            ? reject(
                new Error(`cannot listen for xDS (${options.description}) on port ${port}: ${error.message}`),
              )
            : resolve(actual),
        ),
      );
      logger.info({ port: bound }, `serving ADS (${options.description})`);
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
