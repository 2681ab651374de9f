import { resolve } from "node:path";
import { type ChannelCredentials, Server } from "@grpc/grpc-js";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { listenOnTcp, listenOnUnixSocket, removeSocket } from "../grpc/listen.js";
import { PASSTHROUGH_ADS_SERVICE, XdsProxy } from "./xds-proxy.js";

/** The readiness condition held until the xDS proxy listens. */
export const XDS_PROXY_READY = "xds-proxy";

/** Options of {@link xdsProxyRunner}. */
export interface XdsProxyRunnerOptions {
  /** XDS_SOCKET, for Envoy (and proxyless apps when the TCP port is off). */
  socketPath: string;
  /** XDS_PROXY_PORT on 127.0.0.1, for proxyless apps; 0: none. */
  tcpPort: number;
  /** XDS_ADDR. */
  upstreamAddress: string;
  /** The channel credentials towards push; called when the first stream opens. */
  credentials: () => ChannelCredentials;
  logger: Logger;
  readiness?: ReadinessGate;
}

/** The xDS proxy runner; once started, `tcpPort` is the bound port (or 0) and `proxy` counts streams. */
export interface XdsProxyRunner extends Runner {
  readonly tcpPort: number;
  readonly proxy: XdsProxy;
}

/**
 * Serves the xDS proxy on XDS_SOCKET and, for proxyless apps, on
 * 127.0.0.1:XDS_PROXY_PORT: plaintext, local only; towards push it is mTLS.
 */
export function xdsProxyRunner(options: XdsProxyRunnerOptions): XdsProxyRunner {
  const { logger } = options;
  const proxy = new XdsProxy({
    upstreamAddress: options.upstreamAddress,
    credentials: options.credentials,
    logger,
  });
  // Envoy's and grpc's requests are small, but one may carry many resource names.
  const server = new Server({ "grpc.max_receive_message_length": 16 * 1024 * 1024 });
  let tcpPort = 0;
  options.readiness?.require(XDS_PROXY_READY);
  return {
    name: "xds-proxy",
    proxy,
    get tcpPort() {
      return tcpPort;
    },
    async start() {
      server.addService(PASSTHROUGH_ADS_SERVICE, proxy.implementation());
      await listenOnUnixSocket(server, options.socketPath, "XDS_SOCKET");
      if (options.tcpPort > 0)
        tcpPort = await listenOnTcp(server, "127.0.0.1", options.tcpPort, "XDS_PROXY_PORT");
      options.readiness?.done(XDS_PROXY_READY);
      logger.info(
        {
          socket: resolve(options.socketPath),
          port: tcpPort || undefined,
          upstream: options.upstreamAddress,
        },
        "serving the xDS proxy",
      );
    },
    async close() {
      proxy.close();
      server.forceShutdown();
      removeSocket(options.socketPath);
    },
  };
}
