import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { NodeVersion } from "../inject/native.js";

/** Options of {@link NodeVersions}. */
export interface NodeVersionsOptions {
  kubeConfig: KubeConfig;
  /** How often the node list is read again (nodes join, and kubelets are upgraded). */
  intervalMs: number;
  logger: Logger;
}

/**
 * The cluster's nodes and their kubelet versions, for ENABLE_NATIVE_SIDECARS=auto
 * (Istio's webhook reads them from its node informer). Listed on start and
 * every interval; while no list has succeeded (no RBAC, API down) it knows
 * nothing, and `auto` injects classic sidecars, as Istio does without nodes.
 */
export class NodeVersions implements Runner {
  readonly name = "node-versions";
  readonly #api: CoreV1Api;
  #nodes: readonly NodeVersion[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> = Promise.resolve();

  constructor(private readonly options: NodeVersionsOptions) {
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** The nodes of the last successful list; undefined before the first. */
  current(): readonly NodeVersion[] | undefined {
    return this.#nodes;
  }

  async start(): Promise<void> {
    await this.refresh();
    this.#timer = setInterval(() => {
      this.#running = this.refresh();
    }, this.options.intervalMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** Lists the nodes; a failure keeps the previous list and is logged. */
  async refresh(): Promise<void> {
    try {
      const list = await this.#api.listNode();
      this.#nodes = list.items.map((node) => ({
        name: node.metadata?.name ?? "",
        kubeletVersion: node.status?.nodeInfo?.kubeletVersion ?? "",
      }));
    } catch (error) {
      this.options.logger.warn(
        { err: error },
        "cannot list nodes: native sidecars (ENABLE_NATIVE_SIDECARS=auto) stay off until a list succeeds",
      );
    }
  }
}
