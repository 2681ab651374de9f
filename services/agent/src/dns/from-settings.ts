import type { ChannelCredentials } from "@grpc/grpc-js";
import type { Logger, ReadinessGate, Registry } from "@sextant/observability";
import type { ServiceContext } from "@sextant/runtime";
import { nodeFromSettings } from "../bootstrap/from-settings.js";
import type { AgentSettings } from "../settings.js";
import { type DnsProxyRunner, dnsProxyRunner } from "./dns-runner.js";
import { NDSZ_PATH, ndszRoute } from "./ndsz.js";

/** What the DNS proxy takes from the agent besides its settings. */
export interface DnsProxyDependencies {
  /** mTLS towards push with the workload's certificate (the identity runner's). */
  credentials: () => ChannelCredentials;
  logger: Logger;
  metrics: Registry;
  readiness: ReadinessGate;
  http: ServiceContext<AgentSettings>["http"];
}

/**
 * The DNS proxy runner when ISTIO_META_DNS_CAPTURE is true, with its
 * `/debug/ndsz` route on the agent's HTTP port; undefined when it is off.
 */
export function dnsProxyFromSettings(
  settings: AgentSettings,
  dependencies: DnsProxyDependencies,
): DnsProxyRunner | undefined {
  if (!settings.DNS_CAPTURE) return undefined;
  const runner = dnsProxyRunner({
    address: settings.DNS_PROXY_ADDR,
    resolvConfPath: settings.DNS_RESOLV_CONF,
    namespace: settings.POD_NAMESPACE,
    domainSuffix: settings.DOMAIN_SUFFIX,
    node: nodeFromSettings(settings, "envoy"),
    xdsAddress: settings.XDS_ADDR,
    credentials: dependencies.credentials,
    forwardParallel: settings.DNS_FORWARD_PARALLEL,
    logger: dependencies.logger,
    metrics: dependencies.metrics,
    readiness: dependencies.readiness,
  });
  dependencies.http.route(
    NDSZ_PATH,
    ndszRoute(() => runner.started),
  );
  return runner;
}
