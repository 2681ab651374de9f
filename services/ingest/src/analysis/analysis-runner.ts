import { Buckets, type Bus, type Mirror } from "@sextant/bus";
import { configKey, parseConfigKey } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource, CredentialPresence, EndpointShard, ProxyStatus, Service } from "@sextant/proto";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { ConfigStore } from "../store/config-store.js";
import { analyze } from "./analyzers.js";
import type { AnalysisWorkload } from "./gateway-analyzers.js";

/** Options of {@link AnalysisRunner}. */
export interface AnalysisRunnerOptions {
  bus: () => Bus;
  store: ConfigStore;
  logger: Logger;
  readiness: ReadinessGate;
  domainSuffix: string;
  /** Quiet time before a burst of changes is analysed once. */
  debounceMs: number;
  /** Also run on each analysed snapshot (the Gateway API statuses), in the same serial task. */
  onSnapshot?: (snapshot: {
    resources: ConfigResource[];
    services: ReadonlyMap<string, Service>;
    credentials: ReadonlyMap<string, CredentialPresence>;
  }) => Promise<void>;
}

/**
 * AnalysisRunner keeps the analysis messages of every resource current: it
 * mirrors `sextant-config`, `sextant-services`, `sextant-endpoints` (the
 * workloads Gateway selectors pick) and `sextant-credential-index` (the
 * Secrets credentialNames find), and after each burst of
 * changes re-analyses the whole snapshot and writes what changed to
 * `sextant-config-status` (origin "analysis"). When a resource's generation
 * changes, the proxies' NACK messages about the old one are cleared.
 */
export class AnalysisRunner implements Runner {
  readonly name = "analysis";
  #config: Mirror<ConfigResource> | undefined;
  #services: Mirror<Service> | undefined;
  #endpoints: Mirror<EndpointShard> | undefined;
  #credentials: Mirror<CredentialPresence> | undefined;
  /** Connected proxies: which workloads are proxyless gRPC clients (Telemetry does not apply to them). */
  #proxies: Mirror<ProxyStatus> | undefined;
  #proxylessKey = "";
  /** What was last written per key, so an unchanged result costs no KV round trip. */
  readonly #written = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #tasks: SerialTasks;

  constructor(private readonly options: AnalysisRunnerOptions) {
    this.#tasks = new SerialTasks((error) => options.logger.error({ err: error }, "analysis failed"));
  }

  async start(): Promise<void> {
    this.options.readiness.require("analysis initial sync");
    const bus = this.options.bus();
    this.#config = await (await bus.bucket(Buckets.config)).mirror();
    this.#services = await (await bus.bucket(Buckets.services)).mirror();
    this.#endpoints = await (await bus.bucket(Buckets.endpoints)).mirror();
    this.#credentials = await (await bus.bucket(Buckets.credentialIndex)).mirror();
    this.#proxies = await (await bus.bucket(Buckets.proxyStatus)).mirror();
    // The first analysis below reads the states the initial deliveries carried, or newer.
    const mirrors = [this.#config, this.#services, this.#endpoints, this.#credentials];
    const subscriptions = mirrors.map((mirror) =>
      mirror.subscribe(({ initial }) => {
        if (!initial) this.schedule();
      }),
    );
    // Statuses are rewritten every heartbeat: re-analyse only when the set of proxyless proxies changes.
    const proxies = this.#proxies;
    this.#proxylessKey = proxylessAddresses(proxies.state.values()).join(",");
    subscriptions.push(
      proxies.subscribe(({ initial }) => {
        const key = proxylessAddresses(proxies.state.values()).join(",");
        if (initial || key === this.#proxylessKey) return;
        this.#proxylessKey = key;
        this.schedule();
      }),
    );
    await Promise.all(subscriptions.map((subscription) => subscription.synced));
    await this.analyseNow();
    this.options.readiness.done("analysis initial sync");
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await Promise.all([
      this.#config?.close(),
      this.#services?.close(),
      this.#endpoints?.close(),
      this.#credentials?.close(),
      this.#proxies?.close(),
    ]);
    await this.#tasks.idle();
  }

  /** Analyses the current snapshot and writes the messages that changed; resolves when written. */
  analyseNow(): Promise<void> {
    // Runs never overlap: each waits for the previous one.
    return this.#tasks.run(() => this.runOnce());
  }

  private schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.analyseNow(), this.options.debounceMs);
  }

  private async runOnce(): Promise<void> {
    if (!this.#config || !this.#services || !this.#endpoints || !this.#credentials) return;
    const resources = [...this.#config.state.values()];
    const result = analyze({
      resources,
      registryHosts: new Set(Array.from(this.#services.state.values(), (service) => service.hostname)),
      workloads: workloadsOf(
        this.#endpoints.state.values(),
        new Set(proxylessAddresses(this.#proxies?.state.values() ?? [])),
      ),
      credentials: this.#credentials.state,
      domainSuffix: this.options.domainSuffix,
    });
    for (const resource of resources) {
      const key = configKey(resource);
      const messages = result.get(key) ?? [];
      const fingerprint = JSON.stringify([resource.generation, messages]);
      if (this.#written.get(key) === fingerprint) continue;
      await this.options.store.setMessages(parseConfigKey(key), "analysis", messages, resource.generation);
      this.#written.set(key, fingerprint);
    }
    const current = this.#config.state;
    for (const key of this.#written.keys()) if (!current.has(key)) this.#written.delete(key);
    this.options.logger.debug({ resources: resources.length, withMessages: result.size }, "analysed");
    await this.options.onSnapshot?.({
      resources,
      services: this.#services.state,
      credentials: this.#credentials.state,
    });
  }
}

/**
 * The registry's workloads, once each (an endpoint of several services or
 * ports is one workload); those whose `<namespace>/<address>` is a connected
 * proxyless gRPC client's are marked proxyless.
 */
function workloadsOf(shards: Iterable<EndpointShard>, proxyless: ReadonlySet<string>): AnalysisWorkload[] {
  const seen = new Map<string, AnalysisWorkload>();
  for (const shard of shards)
    for (const endpoint of shard.endpoints) {
      const namespace = endpoint.namespace || shard.namespace;
      const key = JSON.stringify([namespace, endpoint.address, endpoint.labels]);
      if (seen.has(key)) continue;
      const isProxyless = proxyless.has(`${namespace}/${endpoint.address}`);
      seen.set(key, { namespace, labels: endpoint.labels, ...(isProxyless ? { proxyless: true } : {}) });
    }
  return [...seen.values()];
}

/** `<namespace>/<ip>` of each connected proxyless gRPC client, sorted, from its Istio node id `<type>~<ip>~<pod>.<namespace>~<domain>`. */
function proxylessAddresses(statuses: Iterable<ProxyStatus>): string[] {
  const addresses = new Set<string>();
  for (const status of statuses) {
    if (status.generator !== "grpc") continue;
    const [, ip, podAndNamespace] = status.proxyId.split("~");
    const namespace = podAndNamespace?.slice(podAndNamespace.indexOf(".") + 1);
    if (ip && namespace) addresses.add(`${namespace}/${ip}`);
  }
  return [...addresses].sort();
}
