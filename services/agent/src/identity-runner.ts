// The one file that uses @sextant/identity's implementation (WorkloadIdentity,
// the CA trust bundle source, the mTLS credentials); everything else codes
// against the IdentitySource interface, so tests run on certificates they make.
import type { ChannelCredentials } from "@grpc/grpc-js";
import {
  caTrustBundleSource,
  type IdentitySource,
  identityOptions,
  mtlsChannelCredentials,
  readCaRootFile,
  WorkloadIdentity,
} from "@sextant/identity";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { AgentSettings } from "./settings.js";
import { acceptXdsServer } from "./xds-proxy/server-identity.js";

/** The readiness condition held until the workload has its certificate. */
export const IDENTITY_READY = "identity";

/** The identity runner; `identity` and `xdsCredentials()` are usable once it has started. */
export interface IdentityRunner extends Runner {
  readonly identity: IdentitySource;
  /** mTLS towards push with the workload's certificate, accepting only XDS_SERVER_SPIFFE_ID. */
  xdsCredentials(): ChannelCredentials;
}

/**
 * The workload's identity: a key that never leaves the agent (except to the
 * local Envoy over SDS and to OUTPUT_CERTS), a certificate from ca obtained
 * with TOKEN_FILE's token and renewed before it expires, and the trust bundle
 * followed from ca (the agent has no NATS connection).
 */
export function identityRunner(
  settings: AgentSettings,
  logger: Logger,
  readiness?: ReadinessGate,
  shutdown?: AbortSignal,
): IdentityRunner {
  let identity: WorkloadIdentity | undefined;
  readiness?.require(IDENTITY_READY);
  const started = (): WorkloadIdentity => {
    if (!identity) throw new Error("the workload identity is not started");
    return identity;
  };
  return {
    name: "identity",
    get identity(): IdentitySource {
      return started();
    },
    xdsCredentials: () => mtlsChannelCredentials(started(), acceptXdsServer(settings.XDS_SERVER_SPIFFE_ID)),
    async start() {
      const caRootPem = await readCaRootFile(settings.CA_ROOT_CERT);
      identity = new WorkloadIdentity(
        identityOptions(settings, {
          caRootPem,
          trust: caTrustBundleSource({ caAddress: settings.CA_ADDR, caRootPem, logger }),
          logger,
        }),
      );
      // start() waits for ca as long as it takes (a pod may start before its
      // CA is reachable), and runService lets a SIGTERM that comes during
      // start-up wait for the start to finish: without this, an agent that
      // cannot reach ca would only die by SIGKILL. Closing the identity makes
      // start() reject, and the service exits saying why. The signal may have
      // come already, before this runner's turn to start.
      const giveUp = () => void identity?.close();
      shutdown?.addEventListener("abort", giveUp, { once: true });
      if (shutdown?.aborted) giveUp();
      try {
        await identity.start();
      } finally {
        shutdown?.removeEventListener("abort", giveUp);
      }
      readiness?.done(IDENTITY_READY);
      const { certificate } = identity.current();
      logger.info(
        { spiffeId: certificate.spiffeId, notAfter: certificate.notAfter },
        "workload certificate obtained",
      );
    },
    async close() {
      await identity?.close();
    },
  };
}
