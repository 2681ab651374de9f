import { Buckets, type Bus, type Mirror, type MirrorSubscription } from "@sextant/bus";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource, Credential, EndpointShard, Service } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { configChanges } from "../cache/dependencies.js";
import type { MeshConfig } from "../model/mesh-config.js";
import { PushContext } from "../model/push-context.js";
import type { PushChange } from "../model/types.js";
import { type DebounceClock, Debouncer } from "../server/debounce.js";

/** A config resource changed in a snapshot: which, and to what generation (the last, if deleted). */
export interface ConfigChangeRef {
  readonly key: string;
  readonly generation: number;
  readonly deleted: boolean;
}

/** Options of {@link PushInputs}. */
export interface PushInputsOptions {
  bus: () => Bus;
  logger: Logger;
  readiness: ReadinessGate;
  domainSuffix: string;
  /** The SPIFFE trust domain (TRUST_DOMAIN) of the SANs and principals push writes; "cluster.local" if not given. */
  trustDomain?: string;
  /** Istio's MeshConfig (MESH_CONFIG_FILE) at start; none if not given. {@link PushInputs.setMeshConfig} changes it. */
  meshConfig?: MeshConfig;
  debounceAfterMs: number;
  debounceMaxMs: number;
  /** Push a change after a quiet period at once (PUSH_DEBOUNCE_LEADING_EDGE); off: istiod's trailing debounce. */
  debounceLeadingEdge?: boolean;
  /** Debounce endpoint-only changes too (istiod: PILOT_ENABLE_EDS_DEBOUNCE); off: each is pushed at once. */
  edsDebounce?: boolean;
  /** The debounce's timers (tests). */
  clock?: DebounceClock;
  /** Called with each new snapshot and what changed; startedAt is when the first change of the burst arrived. */
  onPush(change: PushChange, startedAt: number): void;
  /** Called before onPush with the config resources that changed in the new snapshot (for their traces), and when the burst began. */
  onConfigBuilt?(changes: readonly ConfigChangeRef[], startedAt: number): void;
}

/**
 * PushInputs mirrors `sextant-config`, `sextant-services` and
 * `sextant-endpoints` (each replays, then follows) and turns bursts of
 * changes into snapshots (server/debounce.ts): a change after a quiet period
 * at once, the changes that follow it after PUSH_DEBOUNCE_AFTER of quiet, or
 * at most PUSH_DEBOUNCE_MAX after the first change. A config or service
 * change rebuilds the PushContext; an endpoint-only change keeps the config
 * and names the hosts whose endpoints changed. It mirrors
 * `sextant-credentials` too: a credential-only change (a rotated Secret)
 * keeps config and endpoints and names the Secrets that changed, for SDS. If
 * NATS goes away the last snapshot keeps serving, and the watches resume
 * where they stopped.
 */
export class PushInputs implements Runner {
  readonly name = "push-inputs";
  // The states last delivered by the mirrors: a snapshot built from them
  // includes exactly the changes whose deliveries have been seen.
  #config: ReadonlyMap<string, ConfigResource> = new Map();
  #services: ReadonlyMap<string, Service> = new Map();
  #shards: ReadonlyMap<string, EndpointShard> = new Map();
  #credentials: ReadonlyMap<string, Credential> = new Map();
  readonly #mirrors: Array<Pick<Mirror<unknown>, "close">> = [];
  readonly #subscriptions: MirrorSubscription[] = [];
  #context: PushContext | undefined;
  #pending:
    | {
        full: boolean;
        endpointHosts: Set<string>;
        secrets: Set<string>;
        configChanges: Map<string, ConfigChangeRef>;
        firstAt: number;
      }
    | undefined;
  readonly #debouncer: Debouncer;
  #initialized = false;
  #meshConfig: MeshConfig | undefined;

  constructor(private readonly options: PushInputsOptions) {
    this.#meshConfig = options.meshConfig;
    this.#debouncer = new Debouncer({
      afterMs: options.debounceAfterMs,
      maxMs: options.debounceMaxMs,
      leadingEdge: options.debounceLeadingEdge ?? false,
      flush: () => this.flush(),
      ...(options.clock ? { clock: options.clock } : {}),
    });
  }

  /** The debounce's flushes so far, how many were leading-edge, and the config changes waiting (tests). */
  get debounceState(): { flushes: number; leading: number; pendingConfigChanges: number } {
    return { ...this.#debouncer.counts, pendingConfigChanges: this.#pending?.configChanges.size ?? 0 };
  }

  /** A new MeshConfig (its file changed): a full push, as for a config change. */
  setMeshConfig(meshConfig: MeshConfig): void {
    this.#meshConfig = meshConfig;
    this.changed(true);
  }

  /** The current snapshot; undefined before the initial sync. */
  get context(): PushContext | undefined {
    return this.#context;
  }

  async start(): Promise<void> {
    this.options.readiness.require("push initial sync");
    const bus = this.options.bus();
    const config = await (await bus.bucket(Buckets.config)).mirror();
    const services = await (await bus.bucket(Buckets.services)).mirror();
    const endpoints = await (await bus.bucket(Buckets.endpoints)).mirror();
    const credentials = await (await bus.bucket(Buckets.credentials)).mirror();
    this.#mirrors.push(config, services, endpoints, credentials);
    this.#subscriptions.push(
      config.subscribe(({ state, changes }) => {
        this.#config = state;
        this.changed(
          true,
          [],
          [],
          changes.map(({ key, value, previous }) => ({
            key,
            generation: (value ?? previous)?.generation ?? 0,
            deleted: value === undefined,
          })),
        );
      }),
      services.subscribe(({ state }) => {
        this.#services = state;
        this.changed(true);
      }),
      endpoints.subscribe(({ state, changes }) => {
        this.#shards = state;
        const hosts = changes.map((change) => (change.value ?? change.previous)?.hostname);
        this.changed(
          false,
          hosts.filter((host) => host !== undefined),
        );
      }),
      credentials.subscribe(({ state, changes }) => {
        this.#credentials = state;
        const secrets = changes
          .map((change) => change.value ?? change.previous)
          .filter((secret) => secret !== undefined)
          .map((secret) => `${secret.namespace}/${secret.name}`);
        if (secrets.length > 0) this.changed(false, [], secrets);
      }),
    );
    await Promise.all(this.#subscriptions.map((subscription) => subscription.synced));
    this.#debouncer.reset();
    this.#pending = undefined;
    this.#context = this.build();
    this.#initialized = true;
    this.options.readiness.done("push initial sync");
    this.options.logger.info(
      { config: this.#config.size, services: this.#services.size, endpointShards: this.#shards.size },
      "initial sync done",
    );
  }

  async close(): Promise<void> {
    this.#debouncer.reset();
    await Promise.all(this.#mirrors.map((mirror) => mirror.close()));
  }

  private build(): PushContext {
    return PushContext.build({
      config: this.#config,
      services: this.#services,
      endpointShards: this.#shards,
      credentials: this.#credentials,
      domainSuffix: this.options.domainSuffix,
      ...(this.options.trustDomain ? { trustDomain: this.options.trustDomain } : {}),
      ...(this.#meshConfig ? { meshConfig: this.#meshConfig } : {}),
    });
  }

  private changed(
    full: boolean,
    endpointHosts: readonly string[] = [],
    secrets: readonly string[] = [],
    configChanges: readonly ConfigChangeRef[] = [],
  ): void {
    if (!this.#initialized) return; // the replay is folded into the first snapshot
    if (!full && secrets.length === 0 && endpointHosts.length > 0 && this.options.edsDebounce === false) {
      // istiod without EDS debounce: endpoints go out at once, beside any pending full push.
      if (!this.#context) return;
      this.#context = this.#context.withEndpoints(this.#shards);
      this.options.onPush(
        { full: false, endpointHosts: new Set(endpointHosts), secrets: new Set() },
        Date.now(),
      );
      return;
    }
    this.#pending ??= {
      full: false,
      endpointHosts: new Set(),
      secrets: new Set(),
      configChanges: new Map(),
      firstAt: Date.now(),
    };
    this.#pending.full ||= full;
    for (const host of endpointHosts) this.#pending.endpointHosts.add(host);
    for (const secret of secrets) this.#pending.secrets.add(secret);
    for (const change of configChanges) this.#pending.configChanges.set(change.key, change);
    this.#debouncer.changed();
  }

  private flush(): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (!pending || !this.#context) return;
    const previous = this.#context;
    if (pending.full) this.#context = this.build();
    else {
      this.#context = this.#context.withEndpoints(this.#shards);
      if (pending.secrets.size > 0) this.#context = this.#context.withCredentials(this.#credentials);
    }
    if (pending.configChanges.size > 0)
      this.options.onConfigBuilt?.([...pending.configChanges.values()], pending.firstAt);
    this.options.onPush(
      {
        full: pending.full,
        endpointHosts: pending.endpointHosts,
        secrets: pending.secrets,
        ...(pending.full ? { configs: configChanges(previous, this.#context) } : {}),
      },
      pending.firstAt,
    );
  }
}
