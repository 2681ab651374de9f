/** Istio's stats that say Envoy has taken a CDS and an LDS answer, accepted or rejected. */
const UPDATE_STATS_FILTER =
  "^(cluster_manager\\.cds|listener_manager\\.lds)\\.(update_success|update_rejected)$";

/** How long one admin request may take (Istio's PROXY_READINESS_PROBE_TIMEOUT default). */
const ADMIN_TIMEOUT_MS = 3_000;

/** Envoy's admin API on the loopback address. */
export class EnvoyAdmin {
  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  #url(path: string): string {
    const host = this.host.includes(":") ? `[${this.host}]` : this.host;
    return `http://${host}:${this.port}${path}`;
  }

  async #request(path: string, method: "GET" | "POST"): Promise<{ status: number; body: string }> {
    const response = await fetch(this.#url(path), { method, signal: AbortSignal.timeout(ADMIN_TIMEOUT_MS) });
    return { status: response.status, body: await response.text() };
  }

  /**
   * Why Envoy is not ready, or undefined when it is: its `/ready` must say
   * LIVE, and it must have taken its first CDS and LDS answers (Istio's
   * readiness probe reads the same update_success / update_rejected stats).
   */
  async notReadyReason(): Promise<string | undefined> {
    let stats: { status: number; body: string };
    try {
      const state = await this.#request("/ready", "GET");
      if (state.status !== 200 || state.body.trim() !== "LIVE")
        return `Envoy is ${state.body.trim() || state.status}`;
      stats = await this.#request(`/stats?usedonly&filter=${encodeURIComponent(UPDATE_STATS_FILTER)}`, "GET");
    } catch (error) {
      return `Envoy's admin API does not answer: ${(error as Error).message}`;
    }
    const values = parseStats(stats.body);
    const updated = (prefix: string) =>
      (values.get(`${prefix}.update_success`) ?? 0) + (values.get(`${prefix}.update_rejected`) ?? 0) > 0;
    if (!updated("cluster_manager.cds") || !updated("listener_manager.lds"))
      return "config not received from push: no CDS and LDS update yet";
    return undefined;
  }

  /**
   * Starts the drain: a sidecar drains its inbound listeners only, so that
   * the app can still call out while it finishes its requests; a router drains
   * them all (Istio's DrainListeners). With skipExit, Envoy keeps running
   * after the drain time (a drain asked for before the stop, as the native
   * sidecar's preStop hook asks it).
   */
  async drainListeners(inboundOnly: boolean, skipExit = false): Promise<void> {
    const path = `/drain_listeners?${inboundOnly ? "inboundonly&" : ""}graceful${skipExit ? "&skip_exit" : ""}`;
    const answer = await this.#request(path, "POST");
    if (answer.status !== 200) throw new Error(`drain_listeners answered ${answer.status}: ${answer.body}`);
  }

  /** Envoy's Prometheus exposition, with the scrape's query string and headers passed on. */
  prometheusUrl(query: string): string {
    return this.#url(`/stats/prometheus${query}`);
  }
}

/** Envoy's `/stats` text (`name: value` lines), the numeric values by name. */
function parseStats(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const separator = line.indexOf(":");
    if (separator < 0) continue;
    const value = Number(line.slice(separator + 1).trim());
    if (Number.isFinite(value)) values.set(line.slice(0, separator).trim(), value);
  }
  return values;
}
