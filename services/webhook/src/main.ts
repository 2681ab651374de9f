// The webhook service's composition root: its settings and its runners, in start order.
import { pathToFileURL } from "node:url";
import { busRunner } from "@sextant/bus";
import { kubernetesAvailable, loadKubeConfig } from "@sextant/kube";
import { runService, type ServiceDefinition } from "@sextant/runtime";
import { WebhookMetrics } from "./admission/metrics.js";
import { CaBundlePatcher } from "./cabundle/ca-bundle-patcher.js";
import { webhookContract } from "./contract.js";
import { defaultInjectionConfig } from "./inject/inject.js";
import { loadTemplate } from "./inject/template.js";
import { NodeVersions } from "./nodes/node-versions.js";
import { ProxyConfigStore } from "./proxyconfigs/proxy-config-store.js";
import { createAdmissionApp } from "./server/app.js";
import { HttpsServerRunner } from "./server/https-runner.js";
import { webhookSettings } from "./settings.js";

/** The webhook service: Kubernetes admission, sidecar injection (/inject) and Istio config validation (/validate). */
export const webhookService: ServiceDefinition<typeof webhookSettings> = {
  service: "webhook",
  contract: webhookContract,
  settings: webhookSettings,
  runners: ({ settings, logger, readiness, metrics }) => {
    const nats = busRunner({
      url: settings.NATS_URL,
      name: `webhook-${settings.REPLICA_ID}`,
      logger,
      readiness,
      service: "webhook",
      contract: webhookContract,
    });
    const proxyConfigs = new ProxyConfigStore({ bus: () => nats.bus, logger, readiness });
    const injection = defaultInjectionConfig({
      // Read at start, so a broken template stops the service instead of failing every pod.
      template: loadTemplate(settings.INJECTION_TEMPLATE_FILE),
      proxyImage: settings.SIDECAR_PROXY_IMAGE,
      revision: settings.REVISION,
      domainSuffix: settings.DOMAIN_SUFFIX,
      trustDomain: settings.TRUST_DOMAIN,
      clusterId: settings.CLUSTER_ID,
      meshId: settings.MESH_ID ?? settings.TRUST_DOMAIN,
      caAddress: settings.CA_ADDR,
      discoveryAddress: settings.DISCOVERY_ADDRESS,
      nativeSidecars: settings.ENABLE_NATIVE_SIDECARS,
    });
    // ENABLE_NATIVE_SIDECARS=auto decides by the nodes' kubelet versions, as istiod; without a cluster it is off.
    const nodes =
      settings.ENABLE_NATIVE_SIDECARS === "auto" && kubernetesAvailable(settings.KUBECONFIG)
        ? new NodeVersions({
            kubeConfig: loadKubeConfig(settings.KUBECONFIG),
            intervalMs: settings.NODE_RESYNC_INTERVAL_MS,
            logger,
          })
        : undefined;
    const https =
      settings.TLS_CERT_FILE && settings.TLS_KEY_FILE
        ? new HttpsServerRunner({
            port: settings.HTTPS_PORT,
            certFile: settings.TLS_CERT_FILE,
            keyFile: settings.TLS_KEY_FILE,
            reloadIntervalMs: settings.TLS_RELOAD_INTERVAL_MS,
            handler: () =>
              createAdmissionApp({
                injection,
                metrics: new WebhookMetrics(metrics),
                logger,
                maxBodyBytes: settings.MAX_BODY_BYTES,
                ...(nodes ? { nodes: () => nodes.current() } : {}),
                proxyConfigs: () => proxyConfigs.current(),
              }),
            logger,
            readiness,
          })
        : undefined;
    if (!https)
      logger.warn("TLS_CERT_FILE and TLS_KEY_FILE are not set: /inject and /validate are not served");
    const patchesConfigs = settings.INJECTOR_WEBHOOK_CONFIG_NAME || settings.VALIDATION_WEBHOOK_CONFIG_NAME;
    const caBundle =
      https && settings.TLS_CERT_FILE && patchesConfigs
        ? new CaBundlePatcher({
            kubeConfig: loadKubeConfig(settings.KUBECONFIG),
            certFile: settings.TLS_CERT_FILE,
            mutatingName: settings.INJECTOR_WEBHOOK_CONFIG_NAME,
            validatingName: settings.VALIDATION_WEBHOOK_CONFIG_NAME,
            intervalMs: settings.TLS_RELOAD_INTERVAL_MS,
            logger,
          })
        : undefined;
    return [
      // Connects to NATS (sextant-config, read only), then follows the stored ProxyConfigs before /inject serves.
      nats,
      proxyConfigs,
      // The nodes' kubelet versions, listed before /inject serves (native-sidecar auto mode).
      ...(nodes ? [nodes] : []),
      // /inject and /validate over HTTPS on HTTPS_PORT, with the certificate reloaded when its files change.
      ...(https ? [https] : []),
      // Keeps the webhook configurations' caBundle equal to the serving certificate's CA (Kubernetes API).
      ...(caBundle ? [caBundle] : []),
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await runService(webhookService);
