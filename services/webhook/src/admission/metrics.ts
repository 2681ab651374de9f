import { Counter, Histogram, type Registry } from "@sextant/observability";

/** The webhook's metrics, with istiod's names so existing dashboards keep working. */
export class WebhookMetrics {
  /** Injection requests (istiod: sidecar_injection_requests_total). */
  readonly injectionRequests: Counter;
  /** Pods injected (istiod: sidecar_injection_success_total). */
  readonly injectionSuccess: Counter;
  /** Pods not injected by the selection rules (istiod: sidecar_injection_skip_total). */
  readonly injectionSkip: Counter;
  /** Injection requests refused or failed (istiod: sidecar_injection_failure_total). */
  readonly injectionFailure: Counter<"type">;
  /** Resources that passed validation (istiod: galley_validation_passed). */
  readonly validationPassed: Counter<"group" | "version" | "resource">;
  /** Resources that failed validation (istiod: galley_validation_failed). */
  readonly validationFailed: Counter<"group" | "version" | "resource" | "reason">;
  /** Requests answered with an HTTP error, e.g. a malformed body (istiod: galley_validation_http_error). */
  readonly httpErrors: Counter<"status">;
  /** Time to answer an admission request, by path. */
  readonly duration: Histogram<"path">;

  constructor(registry: Registry) {
    const registers = [registry];
    this.injectionRequests = new Counter({
      name: "sidecar_injection_requests_total",
      help: "Total number of sidecar injection requests.",
      registers,
    });
    this.injectionSuccess = new Counter({
      name: "sidecar_injection_success_total",
      help: "Total number of successful sidecar injection requests.",
      registers,
    });
    this.injectionSkip = new Counter({
      name: "sidecar_injection_skip_total",
      help: "Total number of skipped sidecar injection requests.",
      registers,
    });
    this.injectionFailure = new Counter({
      name: "sidecar_injection_failure_total",
      help: "Total number of failed sidecar injection requests, by type.",
      labelNames: ["type"],
      registers,
    });
    this.validationPassed = new Counter({
      name: "galley_validation_passed",
      help: "Resource is valid.",
      labelNames: ["group", "version", "resource"],
      registers,
    });
    this.validationFailed = new Counter({
      name: "galley_validation_failed",
      help: "Resource validation failed.",
      labelNames: ["group", "version", "resource", "reason"],
      registers,
    });
    this.httpErrors = new Counter({
      name: "galley_validation_http_error",
      help: "Admission requests answered with an HTTP error.",
      labelNames: ["status"],
      registers,
    });
    this.duration = new Histogram({
      name: "sextant_webhook_admission_duration_seconds",
      help: "Time to answer an admission request.",
      labelNames: ["path"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers,
    });
  }
}
