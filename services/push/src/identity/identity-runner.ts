import type { Bus } from "@sextant/bus";
import {
  busTrustBundleSource,
  type IdentitySource,
  identityOptions,
  readCaRootFile,
  WorkloadIdentity,
} from "@sextant/identity";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { PushSettings } from "../settings.js";

/** The identity runner; `identity` is usable once it has started. */
export interface IdentityRunner extends Runner {
  readonly identity: IdentitySource;
}

/**
 * Push's own mesh certificate, for the mTLS port: obtained from ca like any
 * workload's (push is a client of ca, never its own CA), rotated before it
 * expires, with the trust bundle followed on sextant-trust.
 */
export function identityRunner(settings: PushSettings, bus: () => Bus, logger: Logger): IdentityRunner {
  let identity: WorkloadIdentity | undefined;
  return {
    name: "identity",
    get identity(): IdentitySource {
      if (!identity) throw new Error("push's identity is not started");
      return identity;
    },
    async start() {
      const caRootPem = await readCaRootFile(
        settings.CA_ROOT_CERT,
        "the mTLS xDS port needs it (XDS_TLS_ENABLED=false turns the port off)",
      );
      identity = new WorkloadIdentity(
        identityOptions(settings, {
          caRootPem,
          trust: busTrustBundleSource({ bus, trustDomain: settings.TRUST_DOMAIN, logger }),
          logger,
        }),
      );
      await identity.start();
      logger.info({ spiffeId: identity.current().certificate.spiffeId }, "push's certificate obtained");
    },
    async close() {
      await identity?.close();
    },
  };
}
