// The entry point of the conversion: a snapshot's Gateway API resources in,
// Istio's internal config and each resource's status out (istiod's
// pilot/pkg/config/kube/gateway does the same inside istiod).
import type { GatewayApiInput, GatewayApiOutput } from "./types.js";

/** The controllerName of the GatewayClasses Sextant implements: Istio's, so Istio's `istio` class moves over as is. */
export const ISTIO_CONTROLLER = "istio.io/gateway-controller";
/** Sextant's own controllerName (GatewayClass `sextant`). */
export const SEXTANT_CONTROLLER = "sextant.io/gateway-controller";

/** Converts a snapshot. Pure and deterministic: equal inputs give equal outputs. */
export function convertGatewayApi(input: GatewayApiInput): GatewayApiOutput {
  void input;
  return { gateways: [], virtualServices: [], destinationRules: [], statuses: new Map() };
}
