import { Counter, Gauge, Histogram, type Registry } from "@sextant/observability";

/** Push's metrics, under istiod's names so existing dashboards read them. */
export class XdsMetrics {
  readonly pushes: Counter<"type">;
  readonly convergence: Histogram;
  readonly configSize: Histogram<"type">;
  readonly rejects: Counter<"type">;
  readonly expiredNonces: Counter<"type">;
  readonly connected: Gauge;
  readonly authorizationFailures: Counter;
  readonly streamLimitRefusals: Counter;
  readonly pushTriggers: Counter<"type">;
  readonly queueTime: Histogram;
  readonly sendTime: Histogram;
  readonly writeTimeouts: Counter;
  readonly sendQueueDepth: Gauge;
  readonly superseded: Counter<"type">;
  readonly throttleInFlight: Gauge;
  readonly throttleWaiting: Gauge;
  readonly throttled: Counter;

  constructor(registry: Registry) {
    this.pushes = new Counter({
      name: "pilot_xds_pushes",
      help: "xDS responses sent, by type.",
      labelNames: ["type"],
      registers: [registry],
    });
    this.convergence = new Histogram({
      name: "pilot_proxy_convergence_time",
      help: "Seconds from a config or registry change until a proxy was sent the result.",
      buckets: [0.1, 0.5, 1, 3, 5, 10, 20, 30],
      registers: [registry],
    });
    this.configSize = new Histogram({
      name: "pilot_xds_config_size_bytes",
      help: "Size of xDS responses, by type.",
      labelNames: ["type"],
      buckets: [1, 10_000, 1_000_000, 4_000_000, 10_000_000, 40_000_000],
      registers: [registry],
    });
    this.rejects = new Counter({
      name: "pilot_total_xds_rejects",
      help: "xDS responses rejected (NACKed) by proxies, by type.",
      labelNames: ["type"],
      registers: [registry],
    });
    this.expiredNonces = new Counter({
      name: "pilot_xds_expired_nonce",
      help: "Requests ignored because they answered a nonce that is not the latest, by type.",
      labelNames: ["type"],
      registers: [registry],
    });
    this.connected = new Gauge({ name: "pilot_xds", help: "Connected xDS streams.", registers: [registry] });
    this.authorizationFailures = new Counter({
      name: "sextant_xds_auth_failures",
      help: "Streams on the mTLS port refused because the certificate's identity does not match the node (XDS_AUTH).",
      registers: [registry],
    });
    this.streamLimitRefusals = new Counter({
      name: "sextant_xds_stream_limit_refusals",
      help: "New xDS streams ended with RESOURCE_EXHAUSTED because PUSH_MAX_STREAMS streams were open.",
      registers: [registry],
    });
    this.pushTriggers = new Counter({
      name: "pilot_push_triggers",
      help: "Pushes to a proxy, by reason: config, endpoint, secret, or proxyrequest (a new subscription's first answer).",
      labelNames: ["type"],
      registers: [registry],
    });
    this.queueTime = new Histogram({
      name: "pilot_proxy_queue_time",
      help: "Seconds a push waited for a PUSH_THROTTLE slot.",
      buckets: [0.1, 0.5, 1, 3, 5, 10, 20, 30],
      registers: [registry],
    });
    this.sendTime = new Histogram({
      name: "pilot_xds_send_time",
      help: "Seconds from writing a response until the stream's transport took it.",
      buckets: [0.01, 0.1, 1, 3, 5, 10, 20, 30],
      registers: [registry],
    });
    this.writeTimeouts = new Counter({
      name: "pilot_xds_write_timeout",
      help: "Pushes that gave up their PUSH_THROTTLE slot after PUSH_SEND_TIMEOUT because the proxy did not take its responses (the stream stays open).",
      registers: [registry],
    });
    this.sendQueueDepth = new Gauge({
      name: "sextant_xds_send_queue_depth",
      help: "Responses written to streams that their transports have not taken yet, or held back one per type, over every stream.",
      registers: [registry],
    });
    this.superseded = new Counter({
      name: "sextant_xds_send_superseded",
      help: "Responses never sent because a newer one of their type replaced them while the proxy was not reading, by type.",
      labelNames: ["type"],
      registers: [registry],
    });
    this.throttleInFlight = new Gauge({
      name: "sextant_push_throttle_in_flight",
      help: "Pushes holding a PUSH_THROTTLE slot.",
      registers: [registry],
    });
    this.throttleWaiting = new Gauge({
      name: "sextant_push_throttle_waiting",
      help: "Pushes waiting for a PUSH_THROTTLE slot.",
      registers: [registry],
    });
    this.throttled = new Counter({
      name: "sextant_push_throttled",
      help: "Pushes that had to wait for a PUSH_THROTTLE slot.",
      registers: [registry],
    });
  }
}
