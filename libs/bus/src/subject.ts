import type { MsgHdrs, NatsConnection, Subscription } from "@nats-io/nats-core";
import { headers as createHeaders } from "@nats-io/nats-core";
import {
  type Context,
  context,
  propagation,
  type TextMapGetter,
  type TextMapSetter,
} from "@opentelemetry/api";
import type { Logger } from "@sextant/observability";
import type { MessageCodec } from "@sextant/proto";

/** The definition of an event subject and the message type it carries. */
export interface SubjectSpec<T> {
  readonly subject: string;
  readonly codec: MessageCodec<T>;
  readonly description: string;
}

/** Defines an event subject; see catalog.ts for Sextant's subjects. */
export function defineSubject<T>(
  subject: string,
  codec: MessageCodec<T>,
  description: string,
): SubjectSpec<T> {
  return { subject, codec, description };
}

/** An event received on a subject, with the trace context it was published in. */
export interface ReceivedEvent<T> {
  readonly subject: string;
  readonly value: T;
  readonly traceContext: Context;
  readonly headers: Record<string, string>;
}

const headerSetter: TextMapSetter<MsgHdrs> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

const headerGetter: TextMapGetter<MsgHdrs | undefined> = {
  keys: (carrier) => (carrier ? [...carrier.keys()] : []),
  get: (carrier, key) => carrier?.get(key) || undefined,
};

/**
 * Publishes and subscribes to one event subject with protobuf payloads. The
 * active OpenTelemetry context travels in the message headers (W3C
 * traceparent with the SDK's default propagator).
 */
export class TypedSubject<T> {
  constructor(
    readonly spec: SubjectSpec<T>,
    private readonly nc: NatsConnection,
    private readonly logger: Logger,
  ) {}

  /** Publishes an event in the given (default: active) trace context. */
  publish(value: T, traceContext: Context = context.active()): void {
    const headers = createHeaders();
    propagation.inject(traceContext, headers, headerSetter);
    this.nc.publish(this.spec.subject, this.spec.codec.encode(value).finish(), { headers });
  }

  /** Calls handler for each event; a payload that does not decode is logged and dropped. */
  subscribe(
    handler: (event: ReceivedEvent<T>) => void | Promise<void>,
    options: { queue?: string } = {},
  ): Subscription {
    return this.nc.subscribe(this.spec.subject, {
      queue: options.queue,
      callback: (error, message) => {
        if (error) {
          this.logger.warn({ subject: this.spec.subject, err: error }, "subscription error");
          return;
        }
        let value: T;
        try {
          value = this.spec.codec.decode(message.data);
        } catch (decodeError) {
          this.logger.error(
            { subject: message.subject, err: decodeError },
            "dropping an event that does not decode",
          );
          return;
        }
        const headers: Record<string, string> = {};
        for (const key of message.headers?.keys() ?? []) headers[key] = message.headers?.get(key) ?? "";
        const traceContext = propagation.extract(context.active(), message.headers, headerGetter);
        Promise.resolve(handler({ subject: message.subject, value, traceContext, headers })).catch(
          (handlerError) =>
            this.logger.error({ subject: message.subject, err: handlerError }, "event handler failed"),
        );
      },
    });
  }
}
