import { Buckets, type Bus, type Mirror, type MirrorSubscription } from "@sextant/bus";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource, Credential, EndpointShard, Service } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { configChanges } from "../cache/dependencies.js";
import type { MeshConfig } from "../model/mesh-config.js";
import { PushContext } from "../model/push-context.js";
import type { PushChange } from "../model/types.js";

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
  /** Called with each new snapshot and what changed; startedAt is when the first change of the burst arrived. */
  onPush(change: PushChange, startedAt: number): void;
  /** Called before onPush with the config resources that changed in the new snapshot (for their traces), and when the burst began. */
  onConfigBuilt?(changes: readonly ConfigChangeRef[], startedAt: number): void;
}

/**
 * PushInputs mirrors `sextant-config`, `sextant-services` and
 * `sextant-endpoints` (each replays, then follows) and turns bursts of
 * changes into snapshots: after PUSH_DEBOUNCE_AFTER of quiet, or at most
 * PUSH_DEBOUNCE_MAX after the first change. A config or service change
 * rebuilds the PushContext; an endpoint-only change keeps the config and
 * names the hosts whose endpoints changed. It mirrors `sextant-credentials`
 * too: a credential-only change (a rotated Secret) keeps config and
 * endpoints and names the Secrets that changed, for SDS. If NATS goes away the last
 * snapshot keeps serving, and the watches resume where they stopped.
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
  #quietTimer: NodeJS.Timeout | undefined;
  #maxTimer: NodeJS.Timeout | undefined;
  #initialized = false;
  #meshConfig: MeshConfig | undefined;

  constructor(private readonly options: PushInputsOptions) {
    this.#meshConfig = options.meshConfig;
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
        this.changed(true);
        for (const { key, value, previous } of changes) {
          const generation = (value ?? previous)?.generation ?? 0;
          this.#pending?.configChanges.set(key, { key, generation, deleted: value === undefined });
        }
      }),
      services.subscribe(({ state }) => {
        this.#services = state;
        this.changed(true);
      }),
      endpoints.subscribe(({ state, changes }) => {
        this.#shards = state;
        for (const change of changes) this.changed(false, (change.value ?? change.previous)?.hostname);
      }),
      credentials.subscribe(({ state, changes }) => {
        this.#credentials = state;
        for (const change of changes) {
          const secret = change.value ?? change.previous;
          if (secret) this.changed(false, undefined, `${secret.namespace}/${secret.name}`);
        }
      }),
    );
    await Promise.all(this.#subscriptions.map((subscription) => subscription.synced));
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
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
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
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

  private changed(full: boolean, endpointHost?: string, secret?: string): void {
    if (!this.#initialized) return; // the replay is folded into the first snapshot
    const now = Date.now();
    this.#pending ??= {
      full: false,
      endpointHosts: new Set(),
      secrets: new Set(),
      configChanges: new Map(),
      firstAt: now,
    };
    this.#pending.full ||= full;
    if (endpointHost) this.#pending.endpointHosts.add(endpointHost);
    if (secret) this.#pending.secrets.add(secret);
    clearTimeout(this.#quietTimer);
    this.#quietTimer = setTimeout(() => this.flush(), this.options.debounceAfterMs);
    this.#maxTimer ??= setTimeout(() => this.flush(), this.options.debounceMaxMs);
  }

  private flush(): void {
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
    this.#maxTimer = undefined;
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
