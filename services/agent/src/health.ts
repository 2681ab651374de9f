import { JsonAnswer, type ReadinessGate } from "@sextant/observability";

/** Istio's readiness path, which Envoy's 15021 listener routes to the agent. */
export const ISTIO_READY_PATH = "/healthz/ready";

/**
 * `/healthz/ready`: the same answer as the runtime's `/ready` (200 once the
 * identity is obtained and SDS and the xDS proxy listen; 503 with what is
 * pending before), under the path Kubernetes probes through Envoy. This is
 * `agent run`'s, which does not start Envoy; `agent proxy` replaces it with one
 * that also asks Envoy's admin API (src/envoy/proxy-service.ts).
 */
// A route that reads nothing of the request (still a JsonRoute for the health server).
export function istioReadyRoute(
  readiness: ReadinessGate,
): () => { ready: true; pending: string[] } | JsonAnswer {
  return () =>
    readiness.ready
      ? { ready: true, pending: [] }
      : new JsonAnswer(503, { ready: false, pending: readiness.pending });
}
