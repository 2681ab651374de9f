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
  }
}
