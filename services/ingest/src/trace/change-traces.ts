import { randomBytes } from "node:crypto";
import { isSpanContextValid, trace } from "@opentelemetry/api";
import { Buckets, type Bus } from "@sextant/bus";
import {
  type ConfigRefLike,
  type ConfigTraceRecord,
  configKey,
  configTraceKey,
  type PushTraceRecord,
  pushTraceFilter,
} from "@sextant/model";
import { Struct } from "@sextant/proto";

// Asked for at each span, not once at load: this module's @opentelemetry/api
// is the ES module build, the SDK registers itself through the CommonJS one,
// and a tracer taken from the ES build before the SDK starts never reaches it.
const tracer = () => trace.getTracer("@sextant/ingest");

/** Where one proxy stands with a change. */
export type ProxyTraceState = "ACKED" | "NACKED" | "SENT" | "UNCHANGED" | "PENDING";

/** One proxy in a trace report. */
export interface ProxyTraceReport {
  readonly proxyId: string;
  readonly replica: string;
  readonly state: ProxyTraceState;
  /** When push decided what the proxy needed. */
  readonly pushedAt?: string;
  /** Per xDS type URL: sent, ACKed or NACKed (with the NACK's message). */
  readonly types: PushTraceRecord["proxies"][string]["types"];
}

/** GET /v1/trace's answer: the last change of a resource, from ingest to every proxy. */
export interface TraceReport {
  readonly stored: ConfigTraceRecord;
  /** Each push replica's build of the change. */
  readonly builds: ReadonlyArray<{ replica: string; builtAt: string }>;
  readonly proxies: readonly ProxyTraceReport[];
  /** True once a push replica built the change and every connected proxy ACKed it (or needed nothing from it). */
  readonly complete: boolean;
}

/**
 * ChangeTraces gives every stored change a trace id (the OpenTelemetry
 * span's when an SDK is running, a fresh W3C trace id otherwise) and
 * records it in `sextant-traces`, where push adds what it built and sent
 * and the proxies' answers; {@link report} joins the records with the
 * proxies connected now (`sextant-proxy-status`).
 */
export class ChangeTraces {
  /** bus is read on first use, as the ConfigStore's. */
  constructor(private readonly bus: () => Bus) {}

  /** Records a stored change (or deletion) of a resource under a new trace id. */
  async record(
    ref: ConfigRefLike,
    change: { generation: number; deleted: boolean; changedBy: string },
  ): Promise<string> {
    const span = tracer().startSpan("config.store", {
      attributes: {
        "sextant.config.key": configKey(ref),
        "sextant.config.generation": change.generation,
        "sextant.config.deleted": change.deleted,
      },
    });
    try {
      const spanContext = span.spanContext();
      // Without an SDK the span is a no-op with an invalid context: the change still gets ids of W3C's shape.
      const valid = isSpanContextValid(spanContext);
      const traceId = valid ? spanContext.traceId : randomBytes(16).toString("hex");
      const spanId = valid ? spanContext.spanId : randomBytes(8).toString("hex");
      const record: ConfigTraceRecord = {
        kind: ref.kind,
        namespace: ref.namespace,
        name: ref.name,
        traceId,
        spanId,
        ...change,
        storedAt: new Date().toISOString(),
      };
      const bucket = await this.bus().bucket(Buckets.traces);
      await bucket.put(configTraceKey(ref), Struct.wrap({ ...record }));
      return traceId;
    } finally {
      span.end();
    }
  }

  /** The trace of the resource's last change; undefined if none is recorded (none in the last hour). */
  async report(ref: ConfigRefLike): Promise<TraceReport | undefined> {
    const bucket = await this.bus().bucket(Buckets.traces);
    const storedEntry = await bucket.get(configTraceKey(ref));
    if (!storedEntry) return undefined;
    const stored = Struct.unwrap(storedEntry.value) as unknown as ConfigTraceRecord;
    // A replica's record of an earlier generation is about another change.
    const builds = (await bucket.list(pushTraceFilter(ref)))
      .map((entry) => Struct.unwrap(entry.value) as unknown as PushTraceRecord)
      .filter((build) =>
        stored.deleted ? build.deleted : !build.deleted && build.generation === stored.generation,
      );
    const statuses = await (await this.bus().bucket(Buckets.proxyStatus)).list();
    const proxies: ProxyTraceReport[] = statuses.map(({ value: status }) => {
      const build = builds.find((b) => b.replica === status.replica);
      const proxy = build?.proxies[status.proxyId];
      return {
        proxyId: status.proxyId,
        replica: status.replica,
        state: proxy ? stateOf(proxy) : "PENDING",
        ...(proxy?.pushedAt ? { pushedAt: proxy.pushedAt } : {}),
        types: proxy?.types ?? {},
      };
    });
    proxies.sort((a, b) => (a.proxyId < b.proxyId ? -1 : a.proxyId > b.proxyId ? 1 : 0));
    return {
      stored,
      builds: builds.map(({ replica, builtAt }) => ({ replica, builtAt })),
      proxies,
      complete:
        builds.length > 0 && proxies.every((proxy) => proxy.state === "ACKED" || proxy.state === "UNCHANGED"),
    };
  }
}

/** A proxy's state from its types: any NACK wins, then any unanswered send; nothing sent means it needed nothing. */
function stateOf(proxy: PushTraceRecord["proxies"][string]): ProxyTraceState {
  const types = Object.values(proxy.types);
  if (types.some((type) => type.nackedAt)) return "NACKED";
  if (types.some((type) => type.sentAt && !type.ackedAt)) return "SENT";
  if (types.length > 0) return "ACKED";
  return proxy.pushedAt ? "UNCHANGED" : "PENDING";
}
