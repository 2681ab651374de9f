// The ca service's composition root: its settings and its runners, in start order.
import { pathToFileURL } from "node:url";
import { busRunner } from "@sextant/bus";
import { loadKubeConfig } from "@sextant/kube";
import { runService, type ServiceDefinition } from "@sextant/runtime";
import type { Authenticator } from "./auth/authenticator.js";
import { BootstrapTokenAuthenticator } from "./auth/bootstrap-tokens.js";
import { KubernetesTokenAuthenticator } from "./auth/kubernetes.js";
import { MeshCertificateAuthenticator } from "./auth/mesh-certificate.js";
import { caContract } from "./contract.js";
import { namespaceController } from "./namespaces/namespace-controller.js";
import { caMaterialRunner } from "./pki/material-runner.js";
import { certificateService } from "./server/certificate-service.js";
import { caServerRunner } from "./server/grpc-server-runner.js";
import { CaMetrics } from "./server/metrics.js";
import { identityRateLimit } from "./server/rate-limit.js";
import { caSettings } from "./settings.js";
import { trustBundleRunner } from "./trust/trust-bundle.js";
import { trustBundleFeed } from "./trust/trust-bundle-feed.js";
import { trustBundleService } from "./trust/trust-bundle-service.js";

/** The ca service: signs SPIFFE workload certificates over Istio's CreateCertificate. Replicas share CA_CERTS_DIR. */
export const caService: ServiceDefinition<typeof caSettings> = {
  service: "ca",
  contract: caContract,
  settings: caSettings,
  runners: ({ settings, logger, readiness, metrics }) => {
    const nats = busRunner({
      url: settings.NATS_URL,
      name: `ca-${settings.REPLICA_ID}`,
      logger,
      readiness,
      service: "ca",
      contract: caContract,
    });
    const material = caMaterialRunner(settings, logger);
    const authenticators: Authenticator[] = settings.CA_AUTHENTICATORS.map((name): Authenticator => {
      switch (name) {
        case "kubernetes":
          return new KubernetesTokenAuthenticator(
            loadKubeConfig(settings.KUBECONFIG),
            settings.TOKEN_AUDIENCES,
          );
        case "mesh-certificate":
          return new MeshCertificateAuthenticator(settings.TRUST_DOMAIN, () => [
            material.issuer.material.signingCert,
          ]);
        case "bootstrap-token":
          // The settings schema requires the file with this authenticator.
          return BootstrapTokenAuthenticator.fromFile(settings.BOOTSTRAP_TOKENS_FILE ?? "");
        default:
          throw new Error(`unknown authenticator ${name satisfies never}`);
      }
    });
    const trustFeed = trustBundleFeed({ bus: () => nats.bus, trustDomain: settings.TRUST_DOMAIN, logger });
    return [
      // Connects to NATS and opens sextant-trust, which only ca writes.
      nats,
      // Loads the cacerts material (or creates a self-signed root) and the serving certificate.
      material,
      // Puts the root in sextant-trust before anything is signed with it.
      trustBundleRunner({
        bus: () => nats.bus,
        trustDomain: settings.TRUST_DOMAIN,
        rootPem: () => material.issuer.material.root.toString(),
        maxWorkloadTtlSeconds: settings.MAX_WORKLOAD_CERT_TTL,
        logger,
      }),
      // CreateCertificate and WatchTrustBundle over TLS on GRPC_PORT.
      caServerRunner({
        port: settings.GRPC_PORT,
        implementation: () =>
          certificateService({
            trustDomain: settings.TRUST_DOMAIN,
            authenticators,
            issuer: () => material.issuer,
            metrics: new CaMetrics(metrics),
            logger,
            rateLimit: identityRateLimit(settings.CA_RATE_LIMIT_PER_IDENTITY, settings.CA_RATE_LIMIT_BURST),
          }),
        trustBundle: () => trustBundleService(trustFeed, logger),
        tls: () => ({ ...material.serving, rootsPem: material.issuer.material.root.toString() }),
        logger,
        readiness,
      }),
      // Follows the bundle in sextant-trust for WatchTrustBundle calls. It comes after the
      // server so that it closes first: it ends the watches, which would otherwise hold
      // the server's graceful shutdown until its deadline. A watch that starts earlier
      // gets the bundle as soon as the feed has it.
      trustFeed,
      // istio-ca-root-cert in every namespace, from the bundle the feed follows.
      ...(settings.ENABLE_NAMESPACE_CONTROLLER
        ? [
            namespaceController({
              kubeConfig: loadKubeConfig(settings.KUBECONFIG),
              trustBundle: trustFeed,
              logger,
            }),
          ]
        : []),
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await runService(caService);
