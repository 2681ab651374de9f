import type { Subscription } from "@nats-io/nats-core";
import { type Bus, Subjects } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import { type ConfigMessage, type NackEvent, Severity } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { type ConfigStore, PROXY_ORIGIN } from "../store/config-store.js";

/** The code of a message recording that a proxy rejected config. */
export const PROXY_REJECTED_CODE = "SXT0001";

/** How many distinct NACK messages are kept per resource. */
const MAX_PROXY_MESSAGES = 10;

/**
 * NackRecorder turns push's NACK events into messages on the resources that
 * produced the rejected config (origin "proxy"), so `GET /v1/analyze` shows a
 * proxy's rejection against the right VirtualService or DestinationRule.
 * Replicas share the subject in one queue group: each event is recorded once.
 */
export class NackRecorder implements Runner {
  readonly name = "nack-recorder";
  #subscription: Subscription | undefined;

  constructor(
    private readonly bus: () => Bus,
    private readonly store: ConfigStore,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    this.#subscription = this.bus()
      .subject(Subjects.nack)
      .subscribe((event) => this.record(event.value), { queue: "ingest" });
  }

  async close(): Promise<void> {
    this.#subscription?.unsubscribe();
  }

  /** Records one NACK against each config resource it is traced to. */
  async record(event: NackEvent): Promise<void> {
    const message: ConfigMessage = {
      code: PROXY_REJECTED_CODE,
      severity: Severity.SEVERITY_ERROR,
      field: "",
      origin: PROXY_ORIGIN,
      message: `proxy ${event.proxyId} rejected ${shortType(event.typeUrl)} ${event.resourceNames.join(", ")}: ${event.message}`,
    };
    for (const ref of event.configs) {
      // Read-modify-write inside one compare-and-set, so concurrent NACKs all land.
      await this.store.setMessages(ref, PROXY_ORIGIN, (existing) =>
        [...existing.filter((m) => m.message !== message.message), message].slice(-MAX_PROXY_MESSAGES),
      );
    }
    this.logger.warn(
      { proxy: event.proxyId, typeUrl: event.typeUrl, configs: event.configs.length, nack: event.message },
      "proxy rejected config",
    );
  }
}

function shortType(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf(".") + 1) || typeUrl;
}
