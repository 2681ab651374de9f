// The ingest service's composition root: its settings and its runners, in start order.
import { pathToFileURL } from "node:url";
import { createApiAuth } from "@sextant/auth";
import { busRunner, listMembers } from "@sextant/bus";
import { loadKubeConfig } from "@sextant/kube";
import { runService, type ServiceDefinition } from "@sextant/runtime";
import { AnalysisRunner } from "./analysis/analysis-runner.js";
import { analysisReport } from "./analysis/report.js";
import { ApiAudit } from "./api/api-auth.js";
import { createHttpApi } from "./api/http-api.js";
import { httpApiRunner } from "./api/http-api-runner.js";
import { Applier, ApplyMetrics } from "./apply/applier.js";
import { ingestContract } from "./contract.js";
import { GatewayStatusWriter } from "./gateway-status/gateway-status-writer.js";
import { NackRecorder } from "./nack/nack-recorder.js";
import { ingestSettings } from "./settings.js";
import { FileSource } from "./sources/file-source.js";
import { KubeSource } from "./sources/kube-source.js";
import { ConfigStore } from "./store/config-store.js";

/** The ingest service: the only writer of the mesh's config. */
export const ingestService: ServiceDefinition<typeof ingestSettings> = {
  service: "ingest",
  contract: ingestContract,
  settings: ingestSettings,
  runners: ({ settings, logger, readiness, metrics, http }) => {
    const nats = busRunner({
      url: settings.NATS_URL,
      name: `ingest-${settings.REPLICA_ID}`,
      logger,
      readiness,
      service: "ingest",
      contract: ingestContract,
    });
    // Reads API_TOKENS_FILE now: a bad file stops the start, naming the problem.
    const auth = createApiAuth(settings, logger);
    const store = new ConfigStore(() => nats.bus);
    const limits = { maxDocuments: settings.MAX_DOCUMENTS, maxBytes: settings.MAX_BODY_BYTES };
    const applier = new Applier(store, new ApplyMetrics(metrics), limits);
    const files = settings.CONFIG_DIR
      ? new FileSource({
          dir: settings.CONFIG_DIR,
          applier,
          store,
          logger,
          readiness,
          rescanMs: settings.CONFIG_DIR_RESCAN_MS,
        })
      : undefined;
    const kubernetes = settings.KUBERNETES_CONFIG
      ? new KubeSource({
          kubeConfig: loadKubeConfig(settings.KUBECONFIG),
          applier,
          store,
          bus: () => nats.bus,
          logger,
          readiness,
          metrics,
        })
      : undefined;
    const gatewayStatuses = new GatewayStatusWriter({ store, logger, domainSuffix: settings.DOMAIN_SUFFIX });
    const analysis = new AnalysisRunner({
      bus: () => nats.bus,
      store,
      logger,
      readiness,
      domainSuffix: settings.DOMAIN_SUFFIX,
      debounceMs: settings.ANALYSIS_DEBOUNCE_MS,
      onSnapshot: (snapshot) => gatewayStatuses.write(snapshot),
    });
    return [
      // Follows API_TOKENS_FILE, if set, for the config API's authentication.
      auth,
      // Connects to NATS and opens sextant-config and sextant-config-status, which ingest alone writes.
      nats,
      // Follows sextant-config and sextant-services; writes analysis messages and the Gateway API
      // resources' statuses to sextant-config-status.
      analysis,
      // Subscribes to sextant.nack; records proxies' rejections against the config that caused them.
      new NackRecorder(() => nats.bus, store, logger),
      // Applies CONFIG_DIR to sextant-config and follows its changes.
      ...(files ? [files] : []),
      // Applies the cluster's Istio custom resources and writes their status; follows their changes.
      ...(kubernetes ? [kubernetes] : []),
      // Serves the config API (/v1/*) on HTTP_PORT, authenticated by API_AUTH's authenticators.
      httpApiRunner(http, () =>
        createHttpApi({
          auth: auth.chain,
          audit: new ApiAudit(metrics, logger),
          applier,
          store,
          logger,
          maxBodyBytes: settings.MAX_BODY_BYTES,
          maxInFlight: settings.MAX_REQUESTS_IN_FLIGHT,
          metrics,
          members: () => listMembers(nats.bus),
          analysis: async () => ({
            messages: await analysisReport(store),
            sources: [...(files?.errors() ?? []), ...(kubernetes?.errors() ?? [])],
          }),
        }),
      ),
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await runService(ingestService);
