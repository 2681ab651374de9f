import { resolve } from "node:path";
import { Server } from "@grpc/grpc-js";
import type { IdentitySource } from "@sextant/identity";
import type { Logger, ReadinessGate } from "@sextant/observability";
import { SecretDiscoveryServiceService } from "@sextant/proto/envoy";
import type { Runner } from "@sextant/runtime";
import { listenOnUnixSocket, removeSocket } from "../grpc/listen.js";
import { SdsService } from "./sds-service.js";

/** The readiness condition held until SDS listens. */
export const SDS_READY = "sds";

/** Options of {@link sdsServerRunner}. */
export interface SdsServerRunnerOptions {
  /** SDS_SOCKET. */
  socketPath: string;
  identity: () => IdentitySource;
  logger: Logger;
  readiness?: ReadinessGate;
}

/** The SDS runner; `service` is usable once it has started (tests count its streams). */
export interface SdsServerRunner extends Runner {
  readonly service: SdsService;
}

/** Serves SDS to the local Envoy on SDS_SOCKET. */
export function sdsServerRunner(options: SdsServerRunnerOptions): SdsServerRunner {
  const { socketPath, logger } = options;
  const service = new SdsService({ identity: options.identity, logger });
  const server = new Server();
  options.readiness?.require(SDS_READY);
  return {
    name: "sds-server",
    service,
    async start() {
      service.start();
      server.addService(SecretDiscoveryServiceService, service.implementation());
      await listenOnUnixSocket(server, socketPath, "SDS_SOCKET");
      options.readiness?.done(SDS_READY);
      logger.info({ socket: resolve(socketPath) }, "serving SDS");
    },
    async close() {
      service.close();
      // Not a graceful shutdown: Envoy holds its SDS stream for as long as it lives.
      server.forceShutdown();
      removeSocket(socketPath);
    },
  };
}
