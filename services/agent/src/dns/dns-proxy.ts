import type { Logger } from "@sextant/observability";
import type { DnsMetrics } from "./dns-metrics.js";
import type { LookupTable } from "./lookup-table.js";
import type { Nameserver } from "./resolv-conf.js";
import { forwardQuery } from "./upstream.js";
import { decodeQuery, encodeWithin, packet, replySizeLimit, replyTo, type Transport } from "./wire.js";

/** Options of {@link DnsProxy}. */
export interface DnsProxyOptions {
  /** Where names the table does not know go: the pod's resolv.conf nameservers. */
  nameservers: readonly Nameserver[];
  /** How long each upstream attempt may take (Istio: 5 s). */
  upstreamTimeoutMs?: number;
  /** Ask every nameserver at once and take the first reply (DNS_FORWARD_PARALLEL), instead of one after the other. */
  parallel?: boolean;
  /** Forward every query until the first table arrives, instead of SERVFAIL (Istio's mode on port 53, without iptables). */
  forwardBeforeTable?: boolean;
  metrics?: DnsMetrics;
  logger: Logger;
}

/**
 * Istio's DNS proxy logic, one query at a time: A and AAAA for the names of
 * the NameTable from push, answered locally and authoritatively (TTL 30 s);
 * everything else forwarded to the pod's nameservers as received. Until the
 * first table arrives every query gets SERVFAIL, as in Istio: an answer
 * from upstream could contradict the table a moment later (an
 * auto-allocated ServiceEntry address is not in any upstream DNS). Only
 * when the proxy is the host's resolver itself (port 53) does it forward
 * meanwhile, since the host has no other.
 */
export class DnsProxy {
  readonly #options: DnsProxyOptions;
  #table: LookupTable | undefined;

  constructor(options: DnsProxyOptions) {
    this.#options = options;
  }

  /** True once a table has been received. */
  get hasTable(): boolean {
    return this.#table !== undefined;
  }

  /** The table in use, for `/debug/ndsz`. */
  get table(): LookupTable | undefined {
    return this.#table;
  }

  /** Replaces the table; queries in flight finish with the one they started with. */
  setTable(table: LookupTable): void {
    this.#table = table;
  }

  /** The reply's bytes for a query's bytes; undefined for bytes that are not a query (no reply). */
  async answer(bytes: Buffer, transport: Transport): Promise<Buffer | undefined> {
    const query = decodeQuery(bytes);
    if (!query) return undefined;
    const { metrics } = this.#options;
    metrics?.requests.inc();
    const limit = replySizeLimit(query, transport);
    const question = query.questions?.[0];
    const table = this.#table;
    if (!question || (!table && !this.#options.forwardBeforeTable))
      return encodeWithin(replyTo(query, "SERVFAIL"), limit);
    const local = table?.lookup(question.type, question.name);
    if (local) return encodeWithin(replyTo(query, "NOERROR", { authoritative: true, ...local }), limit);
    metrics?.upstreamRequests.inc();
    const stopTimer = metrics?.upstreamDuration.startTimer();
    const upstream = await forwardQuery(bytes, transport, {
      nameservers: this.#options.nameservers,
      timeoutMs: this.#options.upstreamTimeoutMs,
      parallel: this.#options.parallel,
      logger: this.#options.logger,
    });
    stopTimer?.();
    if (!upstream) {
      metrics?.upstreamFailures.inc();
      return encodeWithin(replyTo(query, "SERVFAIL"), limit);
    }
    // Upstream sized its reply for the same client (the query carries its EDNS size), so it
    // normally fits as it is; only a reply over the limit is decoded and cut down.
    if (upstream.length <= limit) return upstream;
    try {
      return encodeWithin(packet.decode(upstream), limit);
    } catch {
      return encodeWithin(replyTo(query, "SERVFAIL"), limit);
    }
  }
}
