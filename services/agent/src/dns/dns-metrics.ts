import { Counter, Histogram, type Registry } from "@sextant/observability";

/**
 * The DNS proxy's metrics, with the names istio-agent exports them under
 * (its pkg/dns/client monitoring, prefixed istio_agent_), so that existing
 * dashboards and alerts keep working.
 */
export class DnsMetrics {
  /** Every query received. */
  readonly requests: Counter;
  /** Queries forwarded to the nameservers (names the table does not answer). */
  readonly upstreamRequests: Counter;
  /** Forwarded queries no nameserver answered: the client got SERVFAIL. */
  readonly upstreamFailures: Counter;
  /** Time to an upstream reply or failure. */
  readonly upstreamDuration: Histogram;

  constructor(registry: Registry) {
    this.requests = new Counter({
      name: "istio_agent_dns_requests_total",
      help: "Total number of DNS requests.",
      registers: [registry],
    });
    this.upstreamRequests = new Counter({
      name: "istio_agent_dns_upstream_requests_total",
      help: "Total number of DNS requests forwarded to upstream.",
      registers: [registry],
    });
    this.upstreamFailures = new Counter({
      name: "istio_agent_dns_upstream_failures_total",
      help: "Total number of DNS requests forwarded to upstream that no upstream answered.",
      registers: [registry],
    });
    this.upstreamDuration = new Histogram({
      name: "istio_agent_dns_upstream_request_duration_seconds",
      help: "Time in seconds to get a DNS response from upstream.",
      // Istio's buckets, in order.
      buckets: [0.001, 0.005, 0.01, 0.1, 1, 5],
      registers: [registry],
    });
  }
}
