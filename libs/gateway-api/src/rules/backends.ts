// backendRefs (and mirror backendRefs) resolved to Istio destinations, as
// istiod's buildDestination and build{HTTP,GRPC,TCP}Destination do.
import {
  Destination,
  HTTPRouteDestination,
  RouteDestination,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { CORE_GROUP, GATEWAY_GROUP, type ObjectRef } from "../references.js";
import { headerOperations } from "./filters.js";
import type { RuleContext, RuleError, RuleTarget } from "./types.js";

/** The group of Istio's own kinds: a backendRef of kind Hostname names a ServiceEntry host. */
export const ISTIO_NETWORKING_GROUP = "networking.istio.io";
const MCS_GROUP = "multicluster.x-k8s.io";

/** A backendRef as written: a reference with a weight, and for HTTP and gRPC its own filters. */
export interface BackendRef extends ObjectRef {
  weight?: number;
  filters?: Array<{ type?: string; requestHeaderModifier?: unknown; responseHeaderModifier?: unknown }>;
}

/** The route a reference is resolved for. */
export interface Referrer {
  readonly kind: string;
  readonly namespace: string;
  readonly target: RuleTarget;
}

/**
 * A destination, or a fatal error (no destination). A backend that is only
 * unusable (not found, not permitted, of an unsupported kind) still yields a
 * destination, with `error` set: Istio keeps it so its share of traffic gets
 * a 500 rather than going to the other backends.
 */
interface Resolved {
  readonly destination?: Destination;
  readonly error?: RuleError;
}

const emptyDestination = (): Destination => Destination.fromPartial({});

/** Resolves one backendRef to an Istio destination (Istio's buildDestination). */
export function resolveBackend(ref: ObjectRef, referrer: Referrer, ctx: RuleContext): Resolved {
  const group = ref.group ?? CORE_GROUP;
  const kind = ref.kind ?? "Service";
  const namespace = ref.namespace ?? referrer.namespace;
  // Only a Gateway's routes need a ReferenceGrant to reach across
  // namespaces: a mesh route's traffic is the client's own.
  if (
    referrer.target === "gateway" &&
    ref.namespace !== undefined &&
    ref.namespace !== referrer.namespace &&
    !ctx.grants.allows({
      from: { group: GATEWAY_GROUP, kind: referrer.kind, namespace: referrer.namespace },
      to: { group, kind, namespace: ref.namespace, name: ref.name },
    })
  ) {
    return {
      destination: emptyDestination(),
      error: {
        reason: "RefNotPermitted",
        message: `backendRef ${ref.name}/${ref.namespace} not accessible to a ${referrer.kind} in namespace "${referrer.namespace}" (missing a ReferenceGrant?)`,
      },
    };
  }
  let hostname: string;
  let error: RuleError | undefined;
  if ((group === CORE_GROUP && kind === "Service") || (group === MCS_GROUP && kind === "ServiceImport")) {
    // A ServiceImport is served as the Service of its name (Istio without MCS hosts does the same).
    if (kind === "Service" && ref.name.includes(".")) {
      return {
        error: {
          reason: "InvalidDestination",
          message: "service name invalid; the name of the Service must be used, not the hostname.",
        },
      };
    }
    hostname = `${ref.name}.${namespace}.svc.${ctx.domainSuffix}`;
    if (!ctx.services.has(hostname))
      error = { reason: "BackendNotFound", message: `backend(${hostname}) not found` };
  } else if (group === ISTIO_NETWORKING_GROUP && kind === "Hostname") {
    if (ref.namespace !== undefined) {
      return {
        error: { reason: "InvalidDestination", message: "namespace may not be set with Hostname type" },
      };
    }
    hostname = ref.name;
    if (!ctx.services.has(hostname))
      error = { reason: "BackendNotFound", message: `backend(${hostname}) not found` };
  } else {
    return {
      destination: emptyDestination(),
      error: {
        reason: "InvalidKind",
        message: `referencing unsupported backendRef: group "${ref.group ?? ""}" kind "${ref.kind ?? ""}"`,
      },
    };
  }
  if (ref.port === undefined) {
    // "Port is required when the referent is a Kubernetes Service."
    return { error: { reason: "InvalidDestination", message: "port is required in backendRef" } };
  }
  return {
    destination: Destination.fromPartial({ host: hostname, port: { number: ref.port } }),
    ...(error ? { error } : {}),
  };
}

/** Whether the error only makes one backend unusable (Istio's isInvalidBackend), not the whole route. */
function onlyThisBackend(error: RuleError): boolean {
  return (
    error.reason === "RefNotPermitted" || error.reason === "BackendNotFound" || error.reason === "InvalidKind"
  );
}

/** The sum of the weights as written (default 1): 0 means every request gets a 500. */
export function weightSum(refs: readonly BackendRef[] | undefined): number {
  return (refs ?? []).reduce((sum, ref) => sum + (ref.weight ?? 1), 0);
}

/**
 * The backends that take traffic, with their weights: weight 0 drops a
 * backend, and a single one gets weight 0 (VirtualService's "all").
 */
function weighted(refs: readonly BackendRef[]): Array<{ ref: BackendRef; weight: number }> {
  const taking = refs.filter((ref) => (ref.weight ?? 1) !== 0);
  return taking.map((ref) => ({ ref, weight: taking.length === 1 ? 0 : (ref.weight ?? 1) }));
}

interface Destinations<T> {
  readonly destinations?: T[];
  /** Fatal (no destinations) or for one backend only. */
  readonly error?: RuleError;
}

/** HTTPRoute and GRPCRoute backendRefs, with their header filters. */
export function httpDestinations(
  refs: readonly BackendRef[],
  referrer: Referrer,
  ctx: RuleContext,
): Destinations<HTTPRouteDestination> {
  let backendError: RuleError | undefined;
  const destinations: HTTPRouteDestination[] = [];
  for (const { ref, weight } of weighted(refs)) {
    const { destination, error } = resolveBackend(ref, referrer, ctx);
    if (error && (!destination || !onlyThisBackend(error))) return { error };
    if (error) backendError = error;
    const routeDestination = HTTPRouteDestination.fromPartial({ destination, weight });
    for (const filter of ref.filters ?? []) {
      const header =
        filter.type === "RequestHeaderModifier"
          ? "request"
          : filter.type === "ResponseHeaderModifier"
            ? "response"
            : undefined;
      if (!header) {
        return { error: { reason: "InvalidFilter", message: `unsupported filter type "${filter.type}"` } };
      }
      const operations = headerOperations(
        header === "request" ? filter.requestHeaderModifier : filter.responseHeaderModifier,
      );
      if ("error" in operations) return { error: operations.error };
      if (!operations.value) continue;
      routeDestination.headers ??= { request: undefined, response: undefined };
      routeDestination.headers[header] = operations.value;
    }
    destinations.push(routeDestination);
  }
  return { destinations, ...(backendError ? { error: backendError } : {}) };
}

/** TCPRoute and TLSRoute backendRefs. */
export function l4Destinations(
  refs: readonly BackendRef[],
  referrer: Referrer,
  ctx: RuleContext,
): Destinations<RouteDestination> {
  let backendError: RuleError | undefined;
  const destinations: RouteDestination[] = [];
  for (const { ref, weight } of weighted(refs)) {
    const { destination, error } = resolveBackend(ref, referrer, ctx);
    if (error && (!destination || !onlyThisBackend(error))) return { error };
    if (error) backendError = error;
    destinations.push(RouteDestination.fromPartial({ destination, weight }));
  }
  return { destinations, ...(backendError ? { error: backendError } : {}) };
}
