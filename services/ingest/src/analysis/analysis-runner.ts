import { Buckets, type Bus, type Watch } from "@sextant/bus";
import { configKey, parseConfigKey } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource } from "@sextant/proto";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { ConfigStore } from "../store/config-store.js";
import { analyze } from "./analyzers.js";

/** Options of {@link AnalysisRunner}. */
export interface AnalysisRunnerOptions {
  bus: () => Bus;
  store: ConfigStore;
  logger: Logger;
  readiness: ReadinessGate;
  domainSuffix: string;
  /** Quiet time before a burst of changes is analysed once. */
  debounceMs: number;
}

/**
 * AnalysisRunner keeps the analysis messages of every resource current: it
 * follows `sextant-config` and `sextant-services`, and after each burst of
 * changes re-analyses the whole snapshot and writes what changed to
 * `sextant-config-status` (origin "analysis"). When a resource's generation
 * changes, the proxies' NACK messages about the old one are cleared.
 */
export class AnalysisRunner implements Runner {
  readonly name = "analysis";
  readonly #resources = new Map<string, ConfigResource>();
  readonly #registryHosts = new Map<string, string>();
  readonly #watches: Watch[] = [];
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
    const config = await bus.bucket(Buckets.config);
    const services = await bus.bucket(Buckets.services);
    this.#watches.push(
      await config.watch((event) => {
        if (event.type === "put") this.#resources.set(event.key, event.value);
        else this.#resources.delete(event.key);
        this.schedule();
      }),
      await services.watch((event) => {
        if (event.type === "put") this.#registryHosts.set(event.key, event.value.hostname);
        else this.#registryHosts.delete(event.key);
        this.schedule();
      }),
    );
    await Promise.all(this.#watches.map((watch) => watch.ready));
    await this.analyseNow();
    this.options.readiness.done("analysis initial sync");
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await Promise.all(this.#watches.map((watch) => watch.stop()));
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
    const resources = [...this.#resources.values()];
    const result = analyze({
      resources,
      registryHosts: new Set(this.#registryHosts.values()),
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
    for (const key of this.#written.keys()) if (!this.#resources.has(key)) this.#written.delete(key);
    this.options.logger.debug({ resources: resources.length, withMessages: result.size }, "analysed");
  }
}
