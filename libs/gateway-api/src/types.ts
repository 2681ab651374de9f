// The types the Gateway API conversion speaks: what it reads (every stored
// config resource and the registry's services), what it makes (Istio's
// internal Gateways, VirtualServices and DestinationRules, each naming the
// Gateway API resource it came from) and the status it computes for each
// Gateway API resource (the Kubernetes `status` object, as istiod writes it).
import type { ConfigRef, ConfigResource, Service } from "@sextant/proto";
import type { DestinationRule } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { Gateway } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import type { VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";

/** What the conversion reads. */
export interface GatewayApiInput {
  /** Every stored config resource, in key order; the Gateway API kinds among them are converted. */
  readonly resources: readonly ConfigResource[];
  /** The registry's services by hostname: backendRefs and Service parents resolve against them. */
  readonly services: ReadonlyMap<string, Service>;
  /** The cluster's DNS suffix (DOMAIN_SUFFIX), e.g. "cluster.local". */
  readonly domainSuffix: string;
  /**
   * The Secrets discovery published (`namespace/name`), for a listener's
   * certificateRefs' ResolvedRefs; absent: every Secret counts as present.
   */
  readonly secrets?: ReadonlySet<string>;
  /**
   * Why a Secret's certificate and key cannot serve (`namespace/name` to the
   * reason: not PEM, a key of another certificate), as istiod's X509KeyPair
   * check finds; a listener naming one gets InvalidCertificateRef.
   */
  readonly secretProblems?: ReadonlyMap<string, string>;
}

/** One internal config made from a Gateway API resource. */
export interface ConvertedConfig<T> {
  /** The internal config's own kind (Gateway, VirtualService, DestinationRule), namespace and Istio's generated name. */
  readonly ref: ConfigRef;
  /** The Gateway API resource it was made from (NACKs and traces name it). */
  readonly source: ConfigRef;
  /** The source's generation. */
  readonly generation: number;
  /**
   * Istio's internal annotations the translation reads, if any: an internal
   * Gateway's `internal.istio.io/gateway-service` (the Services whose
   * proxies it applies to, in its namespace; it has no selector).
   */
  readonly annotations?: Readonly<Record<string, string>>;
  readonly spec: T;
}

/** A Kubernetes condition, without lastTransitionTime: the writer keeps or sets it. */
export interface GatewayApiCondition {
  readonly type: string;
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
  readonly observedGeneration: number;
}

/** A parentRef as a route's status names it (defaults filled in as the API server would). */
export interface ParentReference {
  readonly group: string;
  readonly kind: string;
  readonly namespace?: string;
  readonly name: string;
  readonly sectionName?: string;
  readonly port?: number;
}

export interface GatewayClassStatus {
  readonly conditions: readonly GatewayApiCondition[];
}

export interface ListenerStatus {
  readonly name: string;
  readonly supportedKinds: ReadonlyArray<{ readonly group: string; readonly kind: string }>;
  readonly attachedRoutes: number;
  readonly conditions: readonly GatewayApiCondition[];
}

export interface GatewayStatus {
  readonly addresses: ReadonlyArray<{ readonly type: string; readonly value: string }>;
  readonly conditions: readonly GatewayApiCondition[];
  readonly listeners: readonly ListenerStatus[];
}

export interface RouteParentStatus {
  readonly parentRef: ParentReference;
  readonly controllerName: string;
  readonly conditions: readonly GatewayApiCondition[];
}

/** HTTPRoute, GRPCRoute, TLSRoute and TCPRoute status. */
export interface RouteStatus {
  readonly parents: readonly RouteParentStatus[];
}

/** BackendTLSPolicy status (PolicyAncestorStatus). */
export interface PolicyStatus {
  readonly ancestors: ReadonlyArray<{
    readonly ancestorRef: ParentReference;
    readonly controllerName: string;
    readonly conditions: readonly GatewayApiCondition[];
  }>;
}

/** The `status` of one Gateway API resource, by its kind. */
export type GatewayApiStatus =
  | { readonly kind: "GatewayClass"; readonly status: GatewayClassStatus }
  | { readonly kind: "KubernetesGateway"; readonly status: GatewayStatus }
  | { readonly kind: "HTTPRoute" | "GRPCRoute" | "TLSRoute" | "TCPRoute"; readonly status: RouteStatus }
  | { readonly kind: "BackendTLSPolicy"; readonly status: PolicyStatus };

/** What the conversion makes. */
export interface GatewayApiOutput {
  readonly gateways: readonly ConvertedConfig<Gateway>[];
  readonly virtualServices: readonly ConvertedConfig<VirtualService>[];
  readonly destinationRules: readonly ConvertedConfig<DestinationRule>[];
  /**
   * The status of each Gateway API resource this controller owns, by config
   * key (`kind.namespace.name`, @sextant/model's configKey). A resource of
   * another controller's class has none: its controller writes it.
   */
  readonly statuses: ReadonlyMap<string, GatewayApiStatus>;
}
