import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { writeFileAtomic } from "../files/atomic-write.js";
import type { AgentSettings } from "../settings.js";
import { bootstrapText, grpcBootstrapFromSettings } from "./from-settings.js";

/**
 * Writes the gRPC xDS bootstrap to GRPC_XDS_BOOTSTRAP at start, as
 * istio-agent does, so an app started with the same variable finds it. The
 * file stays at shutdown: the app may still be running.
 */
export function grpcBootstrapRunner(settings: AgentSettings, path: string, logger: Logger): Runner {
  return {
    name: "grpc-bootstrap",
    async start() {
      try {
        writeFileAtomic(path, bootstrapText(grpcBootstrapFromSettings(settings)));
      } catch (error) {
        throw new Error(
          `GRPC_XDS_BOOTSTRAP ${path}: cannot write the bootstrap: ${(error as Error).message}`,
        );
      }
      logger.info({ path }, "gRPC xDS bootstrap written");
    },
    async close() {},
  };
}
