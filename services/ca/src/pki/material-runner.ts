import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { CaSettings } from "../settings.js";
import { loadOrCreateCaMaterial } from "./ca-material.js";
import { CertificateIssuer } from "./issuer.js";
import { makeServingCertificate, type ServingCertificate } from "./serving.js";

/** The runner that loads the CA's key material; once started, `issuer` and `serving` are set. */
export interface CaMaterialRunner extends Runner {
  readonly issuer: CertificateIssuer;
  readonly serving: ServingCertificate;
}

/** Loads (or, the first time, creates) the cacerts material and makes the serving certificate. */
export function caMaterialRunner(settings: CaSettings, logger: Logger): CaMaterialRunner {
  let issuer: CertificateIssuer | undefined;
  let serving: ServingCertificate | undefined;
  return {
    name: "ca-material",
    get issuer() {
      if (!issuer) throw new Error("the CA material has not been loaded");
      return issuer;
    },
    get serving() {
      if (!serving) throw new Error("the CA material has not been loaded");
      return serving;
    },
    async start() {
      const material = loadOrCreateCaMaterial({
        dir: settings.CA_CERTS_DIR,
        trustDomain: settings.TRUST_DOMAIN,
        rootTtlSeconds: settings.CITADEL_SELF_SIGNED_CA_CERT_TTL,
      });
      issuer = new CertificateIssuer(material, {
        defaultSeconds: settings.DEFAULT_WORKLOAD_CERT_TTL,
        maxSeconds: settings.MAX_WORKLOAD_CERT_TTL,
      });
      serving = makeServingCertificate(material, settings.POD_NAMESPACE, settings.CA_SERVER_SANS);
      logger.info(
        {
          dir: settings.CA_CERTS_DIR,
          generated: material.generated,
          signer: material.signingCert.subject,
          root: material.root.fingerprint256,
          rootNotAfter: material.root.validTo,
          servingNames: serving.names,
        },
        material.generated ? "generated a self-signed root CA" : "loaded CA material",
      );
    },
    async close() {},
  };
}
