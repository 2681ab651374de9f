// The push service's composition root: its settings and its runners, in start order.
import { pathToFileURL } from "node:url";
import { ServerCredentials } from "@grpc/grpc-js";
import { createApiAuth, debugRoute } from "@sextant/auth";
import { Buckets, busRunner } from "@sextant/bus";
import { mtlsServerCredentials } from "@sextant/identity";
import { type Runner, runService, type ServiceDefinition } from "@sextant/runtime";
import { XdsCache } from "./cache/xds-cache.js";
import { pushContract } from "./contract.js";
import { identityRunner } from "./identity/identity-runner.js";
import { MeshConfigFile } from "./inputs/mesh-config-file.js";
import { PushInputs } from "./inputs/push-inputs.js";
import { debugRoutes } from "./server/debug.js";
import { DiscoveryServer } from "./server/discovery-server.js";
import { XdsMetrics } from "./server/metrics.js";
import { checkConnectionIdentity } from "./server/xds-auth.js";
import { xdsServerRunner } from "./server/xds-server-runner.js";
import { pushSettings } from "./settings.js";
import { ChangeTracer } from "./status/change-tracer.js";
import { ProxyStatusReporter } from "./status/proxy-status.js";
import { EnvoyFilterFailures } from "./translate/envoyfilter/failures.js";
import { sdsCertificateErrors } from "./translate/sds/secrets.js";
import { XDS_TYPES } from "./xds-types.js";

/** The push service: the xDS server. Any number of replicas can run. */
export const pushService: ServiceDefinition<typeof pushSettings> = {
  service: "push",
  contract: pushContract,
  settings: pushSettings,
  runners: ({ settings, logger, readiness, metrics, http }) => {
    const nats = busRunner({
      url: settings.NATS_URL,
      name: `push-${settings.REPLICA_ID}`,
      logger,
      readiness,
      service: "push",
      contract: pushContract,
    });
    const status = new ProxyStatusReporter({
      bus: () => nats.bus,
      logger,
      replica: settings.REPLICA_ID,
      debugAddress: settings.DEBUG_ADDRESS ?? `http://127.0.0.1:${settings.HTTP_PORT}`,
      flushMs: settings.STATUS_FLUSH_MS,
      heartbeatMs: settings.STATUS_HEARTBEAT_MS,
      context: () => inputs.context,
      metrics,
    });
    const tracer = new ChangeTracer({
      bus: () => nats.bus,
      logger,
      replica: settings.REPLICA_ID,
      flushMs: settings.STATUS_FLUSH_MS,
    });
    // Istio's MeshConfig as istiod reads it: a file (mounted from ConfigMap `istio`), followed.
    const meshConfig = settings.MESH_CONFIG_FILE
      ? new MeshConfigFile(settings.MESH_CONFIG_FILE, logger)
      : undefined;
    const inputs = new PushInputs({
      bus: () => nats.bus,
      logger,
      readiness,
      domainSuffix: settings.DOMAIN_SUFFIX,
      trustDomain: settings.TRUST_DOMAIN,
      ...(meshConfig ? { meshConfig: meshConfig.current } : {}),
      debounceAfterMs: settings.PUSH_DEBOUNCE_AFTER,
      debounceMaxMs: settings.PUSH_DEBOUNCE_MAX,
      debounceLeadingEdge: settings.PUSH_DEBOUNCE_LEADING_EDGE,
      edsDebounce: settings.PUSH_ENABLE_EDS_DEBOUNCE,
      onPush: (change, startedAt) => discovery.push(change, startedAt),
      onConfigBuilt: (changes, startedAt) => tracer.built(changes, startedAt),
    });
    meshConfig?.onChange((mesh) => inputs.setMeshConfig(mesh));
    // The SDS generator's refusals, counted under istiod's name.
    metrics.registerMetric(sdsCertificateErrors);
    // EnvoyFilter patches push refused (the unpatched resource was sent): logged, counted, /debug/envoyfilterz.
    const envoyFilterFailures = new EnvoyFilterFailures(metrics, logger);
    const discovery = new DiscoveryServer({
      logger,
      metrics: new XdsMetrics(metrics),
      types: XDS_TYPES,
      cache: new XdsCache(),
      context: () => inputs.context,
      events: status,
      tracer,
      concurrency: settings.PUSH_THROTTLE,
      sendTimeoutMs: settings.PUSH_SEND_TIMEOUT,
      maxStreams: settings.PUSH_MAX_STREAMS,
      envoyFilterFailures,
    });
    // The debug routes show every proxy's config: bearer-authenticated, the `debug` verb.
    const debugAuth = createApiAuth(settings, logger);
    for (const [path, route] of Object.entries(
      debugRoutes(
        () => discovery,
        status,
        async () => (await (await nats.bus.bucket(Buckets.proxyStatus)).list()).map((entry) => entry.value),
      ),
    ))
      http.route(path, debugRoute(debugAuth.chain, route));
    http.route(
      "/debug/envoyfilterz",
      debugRoute(debugAuth.chain, () => envoyFilterFailures.recent()),
    );
    const identity = identityRunner(settings, () => nats.bus, logger);
    const mtls: Runner[] = settings.XDS_TLS_ENABLED
      ? [
          // Push's own certificate from ca, and the trust bundle from sextant-trust.
          identity,
          // Serves ADS over mTLS on XDS_TLS_PORT; each stream's certificate must match its node (XDS_AUTH).
          xdsServerRunner({
            name: "xds-tls-server",
            discovery,
            port: settings.XDS_TLS_PORT,
            credentials: () => mtlsServerCredentials(identity.identity, { requireClientCertificate: true }),
            authorize: checkConnectionIdentity,
            description: "mTLS",
            logger,
          }),
        ]
      : [];
    const plaintext: Runner[] = settings.XDS_PLAINTEXT_ENABLED
      ? [
          // Serves ADS on XDS_PORT once the initial sync is done, so no proxy is sent an empty config.
          // Opt-in: nothing is proven here, so its proxies are served but never auto-registered.
          xdsServerRunner({
            name: "xds-server",
            discovery,
            port: settings.XDS_PORT,
            credentials: () => ServerCredentials.createInsecure(),
            description: "plaintext",
            logger,
          }),
        ]
      : [];
    return [
      // Follows API_TOKENS_FILE, if set, for the debug routes' authentication.
      debugAuth,
      // Connects to NATS and opens sextant-proxy-status, which push writes.
      nats,
      // Writes sextant-proxy-status; publishes sextant.registration and sextant.nack.
      status,
      // Writes sextant-traces: what each config change built and sent, and the proxies' answers.
      tracer,
      // Follows sextant-config, sextant-services and sextant-endpoints; debounces changes into PushContexts.
      inputs,
      // Follows MESH_CONFIG_FILE, if set: a change of its extension providers is a full push.
      ...(meshConfig ? [meshConfig] : []),
      ...plaintext,
      ...mtls,
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await runService(pushService);
