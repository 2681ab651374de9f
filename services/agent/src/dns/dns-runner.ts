import { isIPv6 } from "node:net";
import type { ChannelCredentials } from "@grpc/grpc-js";
import type { Logger, ReadinessGate, Registry } from "@sextant/observability";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { Runner } from "@sextant/runtime";
import type { ProxyNode } from "../node/proxy-node.js";
import { DnsMetrics } from "./dns-metrics.js";
import { DnsProxy } from "./dns-proxy.js";
import { DnsServer } from "./dns-server.js";
import { LookupTable } from "./lookup-table.js";
import { NdsClient } from "./nds-client.js";
import { type Nameserver, readResolvConf } from "./resolv-conf.js";

/** The readiness condition held until the first name table arrives (Istio's agent readiness check does the same). */
export const DNS_READY = "dns";

/**
 * The addresses to listen on. `localhost` is Istio's default: 127.0.0.1 when
 * resolv.conf names an IPv4 nameserver, ::1 when it names an IPv6 one (both
 * in a dual-stack pod, whose resolver may use either), 127.0.0.1 when it
 * names none.
 */
export function listenAddresses(host: string, nameservers: readonly Nameserver[]): string[] {
  if (host !== "localhost") return [host];
  const families = new Set<string>(nameservers.map((ns) => (isIPv6(ns.host) ? "::1" : "127.0.0.1")));
  return families.size === 0
    ? ["127.0.0.1"]
    : ["127.0.0.1", "::1"].filter((address) => families.has(address));
}

/** `host:port` of each server, IPv6 hosts in brackets. */
function addressesOf(servers: readonly DnsServer[]): string[] {
  return servers.map((server) => `${isIPv6(server.host) ? `[${server.host}]` : server.host}:${server.port}`);
}

/** Options of {@link dnsProxyRunner}. */
export interface DnsProxyRunnerOptions {
  /** DNS_PROXY_ADDR: an IP address, or `localhost` (see {@link listenAddresses}); port 0 picks a free one. */
  address: { host: string; port: number };
  /** DNS_RESOLV_CONF: upstream nameservers and the search list. */
  resolvConfPath: string;
  /** The workload's namespace (POD_NAMESPACE): bare service names resolve in it. */
  namespace: string;
  /** DOMAIN_SUFFIX. */
  domainSuffix: string;
  /** The Envoy node of this workload; the stream announces it with DNS_CAPTURE=true. */
  node: ProxyNode;
  /** push's ADS address (XDS_ADDR). */
  xdsAddress: string;
  /** mTLS towards push, as the xDS proxy's; called once, when the stream first opens. */
  credentials: () => ChannelCredentials;
  /** DNS_FORWARD_PARALLEL. */
  forwardParallel?: boolean;
  /** Forward queries before the first table instead of SERVFAIL (the port-53 mode, see {@link dnsPlan}). */
  forwardBeforeTable?: boolean;
  logger: Logger;
  /** Where the istio_agent_dns_* metrics go. */
  metrics?: Registry;
  readiness?: ReadinessGate;
  /** Per upstream attempt (Istio: 5 s); tests shorten it. */
  upstreamTimeoutMs?: number;
}

/** The DNS proxy runner; once started, `addresses` are where it listens and `proxy` answers queries. */
export interface DnsProxyRunner extends Runner {
  /** The first address's bound port. */
  readonly port: number;
  /** Every address it listens on, `host:port`. */
  readonly addresses: string[];
  /** The proxy once started, else undefined (for routes registered before the start). */
  readonly started: DnsProxy | undefined;
  readonly proxy: DnsProxy;
}

/**
 * istio-agent's DNS proxy (ISTIO_META_DNS_CAPTURE=true): UDP and TCP on
 * DNS_PROXY_ADDR, answering from the NameTable that push sends on the
 * agent's own ADS stream, forwarding the rest to the nameservers of
 * DNS_RESOLV_CONF. The agent is not ready until the first table arrives,
 * as in Istio: before it, every query gets SERVFAIL.
 */
export function dnsProxyRunner(options: DnsProxyRunnerOptions): DnsProxyRunner {
  const { logger } = options;
  options.readiness?.require(DNS_READY);
  let proxy: DnsProxy | undefined;
  const servers: DnsServer[] = [];
  let nds: NdsClient | undefined;
  return {
    name: "dns-proxy",
    get port() {
      return servers[0]?.port ?? 0;
    },
    get addresses() {
      return addressesOf(servers);
    },
    get proxy() {
      if (!proxy) throw new Error("the DNS proxy is not started");
      return proxy;
    },
    get started() {
      return proxy;
    },
    async start() {
      const resolvConf = await readResolvConf(options.resolvConfPath);
      if (resolvConf.nameservers.length === 0)
        logger.warn(
          { path: options.resolvConfPath },
          "DNS proxy: resolv.conf names no nameserver; names outside the mesh get SERVFAIL",
        );
      const context = {
        namespace: options.namespace,
        domainSuffix: options.domainSuffix,
        search: resolvConf.search,
      };
      const dnsProxy = new DnsProxy({
        nameservers: resolvConf.nameservers,
        upstreamTimeoutMs: options.upstreamTimeoutMs,
        parallel: options.forwardParallel,
        forwardBeforeTable: options.forwardBeforeTable,
        metrics: options.metrics ? new DnsMetrics(options.metrics) : undefined,
        logger,
      });
      proxy = dnsProxy;
      for (const host of listenAddresses(options.address.host, resolvConf.nameservers)) {
        const server = new DnsServer({
          host,
          port: options.address.port,
          handler: (query, transport) => dnsProxy.answer(query, transport),
          logger,
        });
        await server.listen();
        servers.push(server);
      }
      const { node } = options;
      nds = new NdsClient({
        address: options.xdsAddress,
        credentials: options.credentials,
        node: Node.fromPartial({
          id: node.id,
          cluster: node.cluster,
          // push serves the NameTable only to a node that says it captures DNS.
          metadata: { ...node.metadata, DNS_CAPTURE: "true" },
          locality: {
            region: node.locality.region ?? "",
            zone: node.locality.zone ?? "",
            subZone: node.locality.sub_zone ?? "",
          },
        }),
        onTable: (table) => {
          const lookup = new LookupTable(table, context);
          dnsProxy.setTable(lookup);
          options.readiness?.done(DNS_READY);
          logger.info({ names: lookup.size }, "DNS proxy: name table updated");
        },
        logger,
      });
      nds.start();
      logger.info(
        {
          addresses: addressesOf(servers),
          nameservers: resolvConf.nameservers.map((ns) => `${ns.host}:${ns.port}`),
          search: resolvConf.search,
        },
        "serving the DNS proxy",
      );
    },
    async close() {
      nds?.close();
      for (const server of servers) await server.close();
    },
  };
}
