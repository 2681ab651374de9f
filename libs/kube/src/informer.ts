import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Watch,
} from "@kubernetes/client-node";
import type { Logger } from "@sextant/observability";
import { Backoff, type BackoffPolicy } from "./backoff.js";

/** Options of {@link Informer}. */
export interface InformerOptions<T extends KubernetesObject> {
  readonly kubeConfig: KubeConfig;
  /** The collection's path, as a watch asks for it: `/api/v1/pods`, `/apis/<group>/<version>/<plural>`. */
  readonly path: string;
  /** Lists the whole collection (the typed client's list call for it). */
  readonly list: () => Promise<KubernetesListObject<T>>;
  /** Limits the watch to matching objects (`metadata.name=x`); `list` must apply the same selector. */
  readonly fieldSelector?: string;
  /** Limits the watch to objects with matching labels (`app=x`, `key`); `list` must apply the same selector. */
  readonly labelSelector?: string;
  readonly logger: Logger;
  /** Fields that name this informer in its log lines, e.g. `{ kind: "Gateway" }`. */
  readonly logFields?: Record<string, unknown>;
  /** The restart delays after a failed list or watch. */
  readonly backoff: BackoffPolicy;
  /**
   * How long a run must have lasted for its next failure to start the
   * backoff over (a successful list starts it over too). Default 60 s.
   */
  readonly resetAfterMs?: number;
  /** Told of every failed list or watch, with whether the first list had completed (for metrics). */
  readonly onFailure?: (error: unknown, synced: boolean) => void;
}

type Handler<T> = (object: T) => void;

/**
 * An informer (client-node's ListWatch: a cache filled by a list and kept
 * current by a watch) that restarts itself. ListWatch stops on any error but
 * 410 Gone (a reset connection, an API server restart, a failed list) and
 * must be started again, as its documentation says; it then resumes from its
 * last resourceVersion, or relists after a 410, reporting what vanished
 * meanwhile as deletes. Restarts wait the backoff, so an unreachable API
 * server is not hammered.
 */
export class Informer<T extends KubernetesObject> {
  readonly #listWatch: ListWatch<T>;
  readonly #backoff: Backoff;
  readonly #resetAfterMs: number;
  readonly #firstSync: Promise<boolean>;
  #markFirstSync!: (synced: boolean) => void;
  #listed = false;
  #synced = false;
  #stopped = false;
  #startedAt = 0;
  #restartTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: InformerOptions<T>) {
    this.#backoff = new Backoff(options.backoff);
    this.#resetAfterMs = options.resetAfterMs ?? 60_000;
    this.#firstSync = new Promise((resolve) => {
      this.#markFirstSync = resolve;
    });
    // ListWatch lists, fills its cache, then watches from the list's
    // resourceVersion: the first watch after a successful list is the moment
    // the cache holds the whole collection.
    const watch = new GuardedWatch(options.kubeConfig, () => {
      if (!this.#listed || this.#synced) return;
      this.#synced = true;
      this.#markFirstSync(true);
    });
    this.#listWatch = new ListWatch<T>(
      options.path,
      watch,
      async () => {
        const list = await options.list();
        this.#listed = true;
        this.#backoff.reset();
        return list;
      },
      false,
      options.labelSelector,
      options.fieldSelector,
    );
    this.#listWatch.on("error", (error) => this.#onError(error));
  }

  /** Follows additions, updates and deletions (the first list's objects arrive as additions). */
  on(event: "add" | "update" | "delete", handler: Handler<T>): void {
    this.#listWatch.on(event, handler);
  }

  /** Starts listing and watching; failures restart it until {@link stop}. */
  start(): void {
    if (this.#stopped) return;
    this.#startedAt = Date.now();
    this.#listWatch.start().catch((error: unknown) => this.#onError(error));
  }

  /** Resolves true once the first list is in the cache, false if stopped before. */
  synced(): Promise<boolean> {
    return this.#firstSync;
  }

  /** True once the first list is in the cache: before that, an absent object means nothing. */
  get hasSynced(): boolean {
    return this.#synced;
  }

  /** The cached object, if any. */
  get(name: string, namespace?: string): T | undefined {
    return this.#listWatch.get(name, namespace);
  }

  /** Every cached object (of one namespace, if given). */
  list(namespace?: string): readonly T[] {
    return this.#listWatch.list(namespace);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    this.#markFirstSync(false);
    await this.#listWatch.stop();
  }

  #onError(error: unknown): void {
    if (this.#stopped) return;
    clearTimeout(this.#restartTimer);
    if (Date.now() - this.#startedAt > this.#resetAfterMs) this.#backoff.reset();
    const delay = this.#backoff.next();
    this.options.onFailure?.(error, this.#synced);
    this.options.logger.warn(
      { ...this.options.logFields, err: error, retryInMs: delay },
      this.#synced ? "kubernetes watch failed; restarting the informer" : "kubernetes list failed; retrying",
    );
    this.#restartTimer = setTimeout(() => this.start(), delay);
  }
}

/**
 * client-node's Watch, with two changes the informer needs: it reports each
 * (re)watch (the informer calls it right after a list has filled its cache),
 * and a failure before the request is sent (e.g. credentials that cannot be
 * loaded) reaches the informer's error handler instead of becoming an
 * unhandled rejection that would stop the process.
 */
class GuardedWatch extends Watch {
  constructor(
    config: KubeConfig,
    private readonly onWatch: () => void,
  ) {
    super(config);
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.onWatch();
    try {
      return await super.watch(path, queryParams, callback, done);
    } catch (error) {
      done(error);
      return new AbortController();
    }
  }
}
