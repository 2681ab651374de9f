// The discovery service's composition root: its settings and its runners, in start order.
import { pathToFileURL } from "node:url";
import { createApiAuth, debugRoute } from "@sextant/auth";
import { busRunner } from "@sextant/bus";
import { kubernetesAvailable, loadKubeConfig } from "@sextant/kube";
import { runService, type ServiceDefinition } from "@sextant/runtime";
import { discoveryContract } from "./contract.js";
import { CredentialPublisher } from "./credentials/credential-publisher.js";
import { registryz } from "./debug/registryz.js";
import { GatewayDeployer } from "./gateway-deployment/gateway-deployer.js";
import { gatewayDeploymentSettings } from "./gateway-deployment/render.js";
import { KubeSource } from "./kube/kube-source.js";
import { Publisher } from "./publish/publisher.js";
import { AutoRegistration } from "./registration/auto-registration.js";
import { Registry } from "./registry/registry.js";
import { ConfigSource } from "./serviceentry/config-source.js";
import { type DiscoverySettings, discoverySettings } from "./settings.js";

/** True if Kubernetes should be read: asked for, or (auto) a kubeconfig or in-cluster environment exists. */
function kubernetesEnabled(settings: DiscoverySettings): boolean {
  if (settings.KUBERNETES !== "auto") return settings.KUBERNETES === "on";
  return kubernetesAvailable(settings.KUBECONFIG);
}

/** The discovery service: the mesh's service registry, from Kubernetes and ServiceEntries. */
export const discoveryService: ServiceDefinition<typeof discoverySettings> = {
  service: "discovery",
  contract: discoveryContract,
  settings: discoverySettings,
  runners: (context) => {
    const { settings, logger, readiness, metrics, http } = context;
    const nats = busRunner({
      url: settings.NATS_URL,
      name: `discovery-${settings.REPLICA_ID}`,
      logger,
      readiness,
      service: "discovery",
      contract: discoveryContract,
    });
    const registry = new Registry({
      domainSuffix: settings.DOMAIN_SUFFIX,
      clusterId: settings.CLUSTER_ID,
      network: settings.NETWORK,
      systemNamespace: settings.SYSTEM_NAMESPACE,
    });
    let kube: KubeSource | undefined;
    const kubeConfig = kubernetesEnabled(settings) ? loadKubeConfig(settings.KUBECONFIG) : undefined;
    if (kubeConfig) {
      kube = new KubeSource({
        kubeConfig,
        registry,
        logger,
        readiness,
        metrics,
      });
    } else {
      logger.info("no Kubernetes configuration (KUBECONFIG, in-cluster); reading ServiceEntries only");
    }
    const credentials = new CredentialPublisher({
      bus: () => nats.bus,
      kubeConfig,
      isLeader: () => publisher.status().leader,
      logger,
      readiness,
      metrics,
    });
    const publisher = new Publisher({
      bus: () => nats.bus,
      registry,
      identity: settings.REPLICA_ID,
      leaseDurationMs: settings.LEASE_DURATION_MS,
      leaseRenewMs: settings.LEASE_RENEW_MS,
      concurrency: settings.WRITE_CONCURRENCY,
      logger,
      readiness,
      metrics,
      onLeaderChange: (leader) => {
        registration?.leaderChanged(leader);
        credentials.leaderChanged(leader);
        gatewayDeployer?.leaderChanged(leader);
      },
    });
    const gatewayDeployer =
      kubeConfig && settings.PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER
        ? new GatewayDeployer({
            kubeConfig,
            settings: gatewayDeploymentSettings(settings),
            isLeader: () => publisher.status().leader,
            logger,
            readiness,
            metrics,
          })
        : undefined;
    const registration = settings.INGEST_URL
      ? new AutoRegistration({
          bus: () => nats.bus,
          registry,
          ingestUrl: settings.INGEST_URL,
          ingestTokenFile: settings.INGEST_TOKEN_FILE,
          gracePeriodMs: settings.WORKLOAD_ENTRY_GRACE_PERIOD_MS,
          isLeader: () => publisher.status().leader,
          logger,
          metrics,
        })
      : undefined;
    // GET /debug/registryz: the registry this replica computed, with its leadership state;
    // bearer-authenticated (the `debug` verb), as it shows every service and endpoint.
    const debugAuth = createApiAuth(settings, logger);
    http.route(
      "/debug/registryz",
      debugRoute(debugAuth.chain, () =>
        registryz(registry, {
          leader: () => publisher.status(),
          registrations: registration ? () => registration.status() : undefined,
        }),
      ),
    );
    return [
      // Follows API_TOKENS_FILE, if set, for the debug route's authentication.
      debugAuth,
      // Connects to NATS and opens sextant-services and sextant-endpoints, which discovery alone writes.
      nats,
      // Follows ServiceEntry, WorkloadEntry and WorkloadGroup in sextant-config.
      new ConfigSource({ bus: () => nats.bus, registry, logger, readiness }),
      // Follows Namespaces, Nodes, Pods, Services and EndpointSlices.
      ...(kube ? [kube] : []),
      // Follows Secrets (with Kubernetes), and Gateways and DestinationRules in sextant-config;
      // the leader writes the Secrets they name by credentialName to sextant-credentials.
      credentials,
      // Follows Gateway API Gateways and GatewayClasses (when served); the leader applies a
      // ServiceAccount, Deployment and Service for each Gateway of the istio and sextant classes.
      ...(gatewayDeployer ? [gatewayDeployer] : []),
      // Subscribes to sextant.registration; creates and removes WorkloadEntries through ingest.
      ...(registration ? [registration] : []),
      // Competes for the lease in sextant-leases; the leader writes the registry.
      publisher,
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await runService(discoveryService);
