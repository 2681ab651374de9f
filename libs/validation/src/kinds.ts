import { WasmPlugin } from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import { DestinationRule } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import { EnvoyFilter } from "@sextant/proto/gen/istio/networking/v1alpha3/envoy_filter";
import { Gateway } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { ServiceEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import { Sidecar } from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import { VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import { ProxyConfig } from "@sextant/proto/gen/istio/networking/v1beta1/proxy_config";
import { AuthorizationPolicy } from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import { PeerAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/peer_authentication";
import { RequestAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/request_authentication";
import { Telemetry } from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import {
  BACKEND_TLS_POLICY_SPEC,
  GATEWAY_CLASS_SPEC,
  GATEWAY_SPEC,
  GRPC_ROUTE_SPEC,
  HTTP_ROUTE_SPEC,
  REFERENCE_GRANT_SPEC,
  TCP_ROUTE_SPEC,
  TLS_ROUTE_SPEC,
} from "./gateway-api/schemas.js";
import type { ObjectShape } from "./gateway-api/shape.js";
import type { SpecValidator } from "./rules/context.js";
import { validateDestinationRule } from "./rules/destination_rule.js";
import { validateEnvoyFilter } from "./rules/envoy-filter.js";
import { validateGateway } from "./rules/gateway.js";
import {
  type BackendTlsPolicySpec,
  type GatewayApiSpec,
  type GrpcRouteSpec,
  type HttpRouteSpec,
  type KubernetesGatewaySpec,
  type TcpRouteSpec,
  type TlsRouteSpec,
  validateBackendTlsPolicy,
  validateGatewayClass,
  validateGrpcRoute,
  validateHttpRoute,
  validateKubernetesGateway,
  validateReferenceGrant,
  validateTcpRoute,
  validateTlsRoute,
} from "./rules/gateway-api.js";
import { validateProxyConfig } from "./rules/proxy-config.js";
import {
  validateAuthorizationPolicy,
  validatePeerAuthentication,
  validateRequestAuthentication,
} from "./rules/security.js";
import { validateServiceEntry, validateWorkloadEntry, validateWorkloadGroup } from "./rules/service_entry.js";
import { validateSidecar } from "./rules/sidecar.js";
import { validateTelemetry } from "./rules/telemetry.js";
import { validateVirtualService } from "./rules/virtual_service.js";
import { validateWasmPlugin } from "./rules/wasm-plugin.js";

/** The JSON half of a ts-proto message codec. */
export interface JsonCodec<T> {
  fromJSON(object: unknown): T;
  toJSON(message: T): unknown;
}

/** The Istio type of the spec of each supported kind. */
export interface ConfigSpecs {
  VirtualService: VirtualService;
  DestinationRule: DestinationRule;
  Gateway: Gateway;
  ServiceEntry: ServiceEntry;
  WorkloadEntry: WorkloadEntry;
  WorkloadGroup: WorkloadGroup;
  Sidecar: Sidecar;
  PeerAuthentication: PeerAuthentication;
  AuthorizationPolicy: AuthorizationPolicy;
  RequestAuthentication: RequestAuthentication;
  WasmPlugin: WasmPlugin;
  ProxyConfig: ProxyConfig;
  EnvoyFilter: EnvoyFilter;
  Telemetry: Telemetry;
  // Kubernetes Gateway API (not protobuf: the JSON as written, checked by shape).
  GatewayClass: GatewayApiSpec;
  KubernetesGateway: KubernetesGatewaySpec;
  HTTPRoute: HttpRouteSpec;
  GRPCRoute: GrpcRouteSpec;
  TLSRoute: TlsRouteSpec;
  TCPRoute: TcpRouteSpec;
  ReferenceGrant: GatewayApiSpec;
  BackendTLSPolicy: BackendTlsPolicySpec;
}

/** A supported kind's name. */
export type ConfigKind = keyof ConfigSpecs;

/** Everything Sextant knows about one Istio kind. */
export interface KindInfo<T = unknown> {
  /**
   * Sextant's name of the kind, e.g. `VirtualService`: the key of KINDS, of
   * stored resources and of the config API's paths. Unique across groups, so
   * the Gateway API's Gateway is `KubernetesGateway` (Istio's own name for it).
   */
  kind: string;
  /** The kind as manifests write it (`kind:`), when it differs from `kind`: `Gateway`. */
  apiKind?: string;
  /**
   * A cluster-scoped kind (GatewayClass). Sextant keeps it under the
   * namespace `default` whatever the manifest says, so that one object has
   * one key; ingest shows it without a namespace.
   */
  clusterScoped?: boolean;
  /** The API group, e.g. `networking.istio.io`. */
  group: string;
  /** The CRD's resource (plural) name, e.g. `virtualservices`, as RBAC and API paths name it. */
  plural: string;
  /** Versions accepted in apiVersion, newest first. */
  versions: readonly string[];
  /**
   * Fully qualified protobuf message name of the spec; for a kind defined by
   * `shape`, the Go type its API publishes.
   */
  typeName: string;
  /**
   * The spec's structural schema, for a kind that is not protobuf (the
   * Gateway API's): decoding checks it instead of a protobuf descriptor, and
   * the CRD's schema is built from it.
   */
  shape?: ObjectShape;
  /** The generated codec for the spec (for a `shape` kind, the JSON as it is). */
  codec: JsonCodec<T>;
  /** The kind's semantic rules. */
  validate: SpecValidator<T>;
}

/** API group of Istio's traffic-management kinds. */
export const NETWORKING_GROUP = "networking.istio.io";
/** API group of Istio's security kinds. */
export const SECURITY_GROUP = "security.istio.io";
const NETWORKING_VERSIONS = ["v1", "v1beta1", "v1alpha3"] as const;
const SECURITY_VERSIONS = ["v1", "v1beta1"] as const;
/** API group of Istio's extension kinds (WasmPlugin). */
export const EXTENSIONS_GROUP = "extensions.istio.io";
/** API group of Istio's Telemetry kind. */
export const TELEMETRY_GROUP = "telemetry.istio.io";
/** API group of the Kubernetes Gateway API. */
export const GATEWAY_API_GROUP = "gateway.networking.k8s.io";

/** A spec kept as the JSON it is: the Gateway API's kinds are Go structs, not protobuf. */
const jsonCodec = <T>(): JsonCodec<T> => ({
  fromJSON: (object) => object as T,
  toJSON: (message) => message,
});

const gatewayApi = <K extends ConfigKind>(
  kind: K,
  plural: string,
  versions: readonly string[],
  shape: ObjectShape,
) => ({
  kind,
  plural,
  group: GATEWAY_API_GROUP,
  versions,
  typeName: `sigs.k8s.io/gateway-api/apis/${versions[0]}.${kind}Spec`,
  shape,
  codec: jsonCodec<ConfigSpecs[K]>(),
});

// Typed by kind, so that each entry's codec is the one ConfigSpecs names.
function define<K extends ConfigKind>(info: KindInfo<ConfigSpecs[K]> & { kind: K }): KindInfo {
  return info as unknown as KindInfo;
}

const networking = <K extends ConfigKind>(kind: K, plural: string) => ({
  kind,
  plural,
  group: NETWORKING_GROUP,
  versions: NETWORKING_VERSIONS,
  typeName: `istio.networking.v1alpha3.${kind}`,
});
const security = <K extends ConfigKind>(kind: K, plural: string) => ({
  kind,
  plural,
  group: SECURITY_GROUP,
  versions: SECURITY_VERSIONS,
  typeName: `istio.security.v1beta1.${kind}`,
});

/** Every supported kind, by kind name. */
export const KINDS: ReadonlyMap<string, KindInfo> = new Map(
  [
    define({
      ...networking("VirtualService", "virtualservices"),
      codec: VirtualService,
      validate: validateVirtualService,
    }),
    define({
      ...networking("DestinationRule", "destinationrules"),
      codec: DestinationRule,
      validate: validateDestinationRule,
    }),
    define({ ...networking("Gateway", "gateways"), codec: Gateway, validate: validateGateway }),
    define({
      ...networking("ServiceEntry", "serviceentries"),
      codec: ServiceEntry,
      validate: validateServiceEntry,
    }),
    define({
      ...networking("WorkloadEntry", "workloadentries"),
      codec: WorkloadEntry,
      validate: validateWorkloadEntry,
    }),
    define({
      ...networking("WorkloadGroup", "workloadgroups"),
      codec: WorkloadGroup,
      validate: validateWorkloadGroup,
    }),
    define({ ...networking("Sidecar", "sidecars"), codec: Sidecar, validate: validateSidecar }),
    define({
      ...security("PeerAuthentication", "peerauthentications"),
      codec: PeerAuthentication,
      validate: validatePeerAuthentication,
    }),
    define({
      ...security("AuthorizationPolicy", "authorizationpolicies"),
      codec: AuthorizationPolicy,
      validate: validateAuthorizationPolicy,
    }),
    define({
      ...security("RequestAuthentication", "requestauthentications"),
      codec: RequestAuthentication,
      validate: validateRequestAuthentication,
    }),
    define({
      kind: "WasmPlugin",
      plural: "wasmplugins",
      group: EXTENSIONS_GROUP,
      versions: ["v1alpha1"],
      typeName: "istio.extensions.v1alpha1.WasmPlugin",
      codec: WasmPlugin,
      validate: validateWasmPlugin,
    }),
    // Istio serves ProxyConfig as networking.istio.io/v1beta1 only.
    define({
      kind: "ProxyConfig",
      plural: "proxyconfigs",
      group: NETWORKING_GROUP,
      versions: ["v1beta1"],
      typeName: "istio.networking.v1beta1.ProxyConfig",
      codec: ProxyConfig,
      validate: validateProxyConfig,
    }),
    // Istio serves EnvoyFilter as v1alpha3 only.
    define({
      ...networking("EnvoyFilter", "envoyfilters"),
      versions: ["v1alpha3"],
      codec: EnvoyFilter,
      validate: validateEnvoyFilter,
    }),
    define({
      kind: "Telemetry",
      plural: "telemetries",
      group: TELEMETRY_GROUP,
      versions: ["v1", "v1alpha1"],
      typeName: "istio.telemetry.v1alpha1.Telemetry",
      codec: Telemetry,
      validate: validateTelemetry,
    }),
    // The Gateway API kinds at the versions its v1.5.1 CRDs serve (the release Istio 1.30.3 uses).
    define({
      ...gatewayApi("GatewayClass", "gatewayclasses", ["v1", "v1beta1"], GATEWAY_CLASS_SPEC),
      clusterScoped: true,
      validate: validateGatewayClass,
    }),
    define({
      ...gatewayApi("KubernetesGateway", "gateways", ["v1", "v1beta1"], GATEWAY_SPEC),
      apiKind: "Gateway",
      typeName: "sigs.k8s.io/gateway-api/apis/v1.GatewaySpec",
      validate: validateKubernetesGateway,
    }),
    define({
      ...gatewayApi("HTTPRoute", "httproutes", ["v1", "v1beta1"], HTTP_ROUTE_SPEC),
      validate: validateHttpRoute,
    }),
    define({
      ...gatewayApi("GRPCRoute", "grpcroutes", ["v1"], GRPC_ROUTE_SPEC),
      validate: validateGrpcRoute,
    }),
    // TLSRoute is v1 in the standard channel; Istio still reads v1alpha2 too.
    define({
      ...gatewayApi("TLSRoute", "tlsroutes", ["v1", "v1alpha2"], TLS_ROUTE_SPEC),
      validate: validateTlsRoute,
    }),
    // TCPRoute is experimental: v1alpha2 only.
    define({
      ...gatewayApi("TCPRoute", "tcproutes", ["v1alpha2"], TCP_ROUTE_SPEC),
      validate: validateTcpRoute,
    }),
    define({
      ...gatewayApi("ReferenceGrant", "referencegrants", ["v1beta1", "v1"], REFERENCE_GRANT_SPEC),
      validate: validateReferenceGrant,
    }),
    define({
      ...gatewayApi("BackendTLSPolicy", "backendtlspolicies", ["v1"], BACKEND_TLS_POLICY_SPEC),
      validate: validateBackendTlsPolicy,
    }),
  ].map((info) => [info.kind, info]),
);

/** The registry entry for `kind`, or undefined if Sextant does not support it. */
export function findKind(kind: string): KindInfo | undefined {
  return KINDS.get(kind);
}

/** The kind as manifests write it: `Gateway` for KubernetesGateway, else the kind itself. */
export function apiKindOf(info: KindInfo): string {
  return info.apiKind ?? info.kind;
}

/**
 * The kind a manifest's apiVersion and kind name: `gateway.networking.k8s.io/v1`
 * `Gateway` is KubernetesGateway, `networking.istio.io/v1` `Gateway` is Istio's.
 * Any version of the group matches; whether it is served is checked apart.
 */
export function findKindOf(apiVersion: unknown, kind: unknown): KindInfo | undefined {
  if (typeof kind !== "string") return undefined;
  const group =
    typeof apiVersion === "string" ? apiVersion.slice(0, Math.max(0, apiVersion.lastIndexOf("/"))) : "";
  for (const info of KINDS.values()) if (info.group === group && apiKindOf(info) === kind) return info;
  // No such kind in that group: the kind by name, for a message that names the right apiVersion.
  const byName = KINDS.get(kind);
  return byName && apiKindOf(byName) === kind ? byName : undefined;
}
