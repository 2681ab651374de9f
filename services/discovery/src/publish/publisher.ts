import { Buckets, type Bus } from "@sextant/bus";
import { type BackoffPolicy, retry } from "@sextant/kube";
import type { Logger, Registry as MetricsRegistry, ReadinessGate } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { LeaseElector } from "../leader/lease.js";
import type { Registry } from "../registry/registry.js";
import { RegistryWriter, WriterMetrics } from "./writer.js";

/** Options of {@link Publisher}. */
export interface PublisherOptions {
  readonly bus: () => Bus;
  readonly registry: Registry;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly leaseRenewMs: number;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
  readonly metrics: MetricsRegistry;
  /** Told of every leadership change, after the writer (auto-registration re-applies on gaining it). */
  readonly onLeaderChange?: (leader: boolean) => void;
}

const ACTIVATION_RETRY: BackoffPolicy = { initialMs: 1_000, maxMs: 1_000 };

/**
 * Publisher is the runner that writes the registry: it competes for the
 * `discovery` lease and, while it holds it, keeps `sextant-services` and
 * `sextant-endpoints` equal to the registry. It starts after the sources
 * have synced, so a new leader never publishes a half-read world (which
 * would delete what it had not read yet). The replica is ready once it knows
 * whether it leads and, if it does, has published the initial state.
 */
export class Publisher implements Runner {
  readonly name = "publisher";
  #lease: LeaseElector | undefined;
  #writer: RegistryWriter | undefined;
  #activation: Promise<void> = Promise.resolve();

  constructor(private readonly options: PublisherOptions) {}

  /** The writer, once started (for tests and the benchmark). */
  get writer(): RegistryWriter | undefined {
    return this.#writer;
  }

  /** Leadership as last known (for /debug/registryz). */
  status(): { leader: boolean; identity: string; revision: number; writing: boolean } {
    const lease = this.#lease?.status() ?? { leader: false, identity: this.options.identity, revision: 0 };
    return { ...lease, writing: this.#writer?.active ?? false };
  }

  async start(): Promise<void> {
    this.options.readiness.require("registry published");
    const bus = this.options.bus();
    const [services, endpoints, leases] = await Promise.all([
      bus.bucket(Buckets.services),
      bus.bucket(Buckets.endpoints),
      bus.bucket(Buckets.leases),
    ]);
    // Translate what the sources delivered before competing for the lease.
    this.options.registry.recompute();
    const writer = new RegistryWriter({
      services: () => services,
      endpoints: () => endpoints,
      registry: this.options.registry,
      isLeader: () => this.#lease?.isLeader() ?? false,
      concurrency: this.options.concurrency,
      logger: this.options.logger,
      metrics: new WriterMetrics(this.options.metrics),
    });
    this.#writer = writer;
    this.#lease = new LeaseElector({
      bucket: leases,
      key: "discovery",
      identity: this.options.identity,
      durationMs: this.options.leaseDurationMs,
      renewMs: this.options.leaseRenewMs,
      logger: this.options.logger,
      onChange: (leader) => {
        if (leader) this.#activation = this.#activate(writer);
        else writer.deactivate();
        this.options.onLeaderChange?.(leader);
      },
    });
    await this.#lease.start();
    await this.#activation;
    await writer.idle();
    this.options.readiness.done("registry published");
  }

  /** Reconciles on becoming leader, retrying (NATS may be briefly away) for as long as the lease holds. */
  async #activate(writer: RegistryWriter): Promise<void> {
    await retry(() => writer.activate(), {
      backoff: ACTIVATION_RETRY,
      onFailure: (error) => {
        this.options.logger.error({ err: error }, "reconciling the registry failed; retrying");
        writer.deactivate();
      },
      continueWhile: () => this.#lease?.isLeader() ?? false,
    });
  }

  async close(): Promise<void> {
    await this.#lease?.close();
    this.#writer?.close();
  }
}
