import { Counter, type Registry } from "@sextant/observability";

/** The CA's metrics, with Citadel's names so existing dashboards keep working. */
export class CaMetrics {
  /** Every CreateCertificate request (Citadel: citadel_server_csr_count). */
  readonly csrCount: Counter;
  /** Certificates issued (Citadel: citadel_server_success_cert_issuance_count). */
  readonly issued: Counter;
  /** Refused or failed requests by reason (Citadel counts some of these as separate counters). */
  readonly errors: Counter<"reason">;

  constructor(registry: Registry) {
    this.csrCount = new Counter({
      name: "citadel_server_csr_count",
      help: "CSRs received by the CA.",
      registers: [registry],
    });
    this.issued = new Counter({
      name: "citadel_server_success_cert_issuance_count",
      help: "Certificates issued by the CA.",
      registers: [registry],
    });
    this.errors = new Counter({
      name: "citadel_server_csr_error_count",
      help: "CSRs refused or failed, by reason (e.g. malformed_csr, bad_csr_signature, weak_key, token_review_failed, san_mismatch).",
      labelNames: ["reason"],
      registers: [registry],
    });
  }
}
