import { readFile } from "node:fs/promises";
import type { Bus } from "@sextant/bus";
import { busTrustBundleSource, type IdentitySource, WorkloadIdentity } from "@sextant/identity";
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
      const caRootPem = await readFile(settings.CA_ROOT_CERT, "utf8").catch((error: Error) => {
        throw new Error(
          `CA_ROOT_CERT ${settings.CA_ROOT_CERT}: cannot read the root that verifies ca (${error.message}); the mTLS xDS port needs it (XDS_TLS_ENABLED=false turns the port off)`,
        );
      });
      identity = new WorkloadIdentity({
        caAddress: settings.CA_ADDR,
        caRootPem,
        trustDomain: settings.TRUST_DOMAIN,
        namespace: settings.POD_NAMESPACE,
        serviceAccount: settings.SERVICE_ACCOUNT,
        token: () => readOptionalFile(settings.TOKEN_FILE),
        ttlSeconds: settings.SECRET_TTL,
        trust: busTrustBundleSource({ bus, trustDomain: settings.TRUST_DOMAIN, logger }),
        logger,
      });
      await identity.start();
      logger.info({ spiffeId: identity.current().certificate.spiffeId }, "push's certificate obtained");
    },
    async close() {
      await identity?.close();
    },
  };
}

/** A token file's trimmed content, read fresh each time (projected tokens rotate); undefined when absent. */
async function readOptionalFile(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, "utf8")).trim() || undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}
