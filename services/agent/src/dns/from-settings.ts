import { existsSync } from "node:fs";
import type { ChannelCredentials } from "@grpc/grpc-js";
import type { Logger, ReadinessGate, Registry } from "@sextant/observability";
import type { ServiceContext } from "@sextant/runtime";
import { nodeFromSettings } from "../bootstrap/from-settings.js";
import type { AgentSettings } from "../settings.js";
import { type DnsProxyRunner, dnsProxyRunner } from "./dns-runner.js";
import { NDSZ_PATH, ndszRoute } from "./ndsz.js";

/** Where Istio keeps the host's own resolv.conf when the proxy takes port 53 in its place (VMs, Docker). */
export const ISTIO_RESOLV_CONF = "/var/lib/istio/resolv.conf";
const DEFAULT_RESOLV_CONF = "/etc/resolv.conf";
const DEFAULT_DNS_PORT = 15053;

/** How the DNS proxy runs, from DNS_PROXY_ADDR and DNS_RESOLV_CONF. */
export interface DnsPlan {
  address: { host: string; port: number };
  resolvConfPath: string;
  forwardBeforeTable: boolean;
  /** Why the address was changed, to log. */
  warning?: string;
}

/**
 * Istio's port-53 mode, for a host without iptables DNS capture (a VM, a
 * Docker container): the proxy itself is the resolver that /etc/resolv.conf
 * names. Run as root it then forwards queries even before the first table
 * (the host has no other resolver), and reads the original resolv.conf from
 * /var/lib/istio/resolv.conf when that exists and DNS_RESOLV_CONF was left
 * at its default. Not run as root it cannot bind port 53, and falls back to
 * localhost:15053, as Istio does.
 */
export function dnsPlan(
  address: { host: string; port: number },
  resolvConfPath: string,
  environment: { uid: number; exists: (path: string) => boolean },
): DnsPlan {
  if (address.port !== 53) return { address, resolvConfPath, forwardBeforeTable: false };
  if (environment.uid !== 0)
    return {
      address: { host: "localhost", port: DEFAULT_DNS_PORT },
      resolvConfPath,
      forwardBeforeTable: false,
      warning: `DNS_PROXY_ADDR names port 53 but the agent does not run as root; using localhost:${DEFAULT_DNS_PORT}`,
    };
  const hostResolvConf =
    resolvConfPath === DEFAULT_RESOLV_CONF && environment.exists(ISTIO_RESOLV_CONF)
      ? ISTIO_RESOLV_CONF
      : resolvConfPath;
  return { address, resolvConfPath: hostResolvConf, forwardBeforeTable: true };
}

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
  const plan = dnsPlan(settings.DNS_PROXY_ADDR, settings.DNS_RESOLV_CONF, {
    uid: process.getuid?.() ?? -1,
    exists: existsSync,
  });
  if (plan.warning) dependencies.logger.error(plan.warning);
  const runner = dnsProxyRunner({
    address: plan.address,
    resolvConfPath: plan.resolvConfPath,
    forwardBeforeTable: plan.forwardBeforeTable,
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
