import { JsonAnswer, type JsonRoute } from "@sextant/observability";
import type { Any } from "@sextant/proto";
import {
  DownstreamTlsContext,
  HTTPFault,
  HttpConnectionManager,
  HttpRBAC,
  Router,
  TcpProxy,
  TypeUrl,
  UpstreamTlsContext,
} from "@sextant/proto/envoy";
import type { ProxyStatusReporter } from "../status/proxy-status.js";
import type { DiscoveryServer } from "./discovery-server.js";
import type { DebugCodec, XdsTypeTable } from "./xds-type-table.js";

/** Anys nested inside resources (filters, TLS contexts), which config_dump expands too. */
const NESTED_CODECS: Record<string, DebugCodec> = {
  [TypeUrl.HttpConnectionManager]: HttpConnectionManager,
  [TypeUrl.HTTPFault]: HTTPFault,
  [TypeUrl.Router]: Router,
  [TypeUrl.TcpProxy]: TcpProxy,
  [TypeUrl.RBAC]: HttpRBAC,
  [TypeUrl.DownstreamTlsContext]: DownstreamTlsContext,
  [TypeUrl.UpstreamTlsContext]: UpstreamTlsContext,
};

/**
 * Turns an Any into JSON with its type, decoding the resources of the
 * table's types and the nested Anys it knows (the HCM inside a listener).
 */
export function configDumpDecoder(types: XdsTypeTable): (any: Any) => unknown {
  const codecs: Record<string, DebugCodec> = { ...NESTED_CODECS };
  for (const type of types.types) codecs[type.typeUrl] = type.codec;
  const anyToJson = (any: Any): unknown => {
    const codec = codecs[any.typeUrl];
    if (!codec) return { "@type": any.typeUrl, value: Buffer.from(any.value).toString("base64") };
    return {
      "@type": any.typeUrl,
      ...(expandAnys(codec.toJSON(codec.decode(any.value) as never)) as object),
    };
  };
  const expandAnys = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(expandAnys);
    if (value === null || typeof value !== "object") return value;
    const object = value as Record<string, unknown>;
    if (typeof object.typeUrl === "string" && typeof object.value === "string" && codecs[object.typeUrl]) {
      return anyToJson({ typeUrl: object.typeUrl, value: Buffer.from(object.value, "base64") });
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, expandAnys(inner)]));
  };
  return anyToJson;
}

/** GET /debug/syncz and /debug/config_dump?proxyID=, as istiod serves them. */
export function debugRoutes(
  discovery: () => DiscoveryServer,
  status: ProxyStatusReporter,
): Record<string, JsonRoute> {
  return {
    "/debug/syncz": () =>
      discovery()
        .connections()
        .map((connection) => ({
          stream: connection.id,
          kind: connection.proxy.kind,
          protocol: connection.protocol,
          ...status.statusOf(connection),
        })),
    "/debug/config_dump": (query: URLSearchParams) => {
      const proxyId = query.get("proxyID");
      const connection = discovery()
        .connections()
        .filter((c) => c.proxy.id === proxyId)
        .at(-1);
      if (!connection)
        return new JsonAnswer(404, { error: `no proxy ${proxyId ?? "(proxyID missing)"} on this replica` });
      const anyToJson = configDumpDecoder(discovery().types);
      return {
        proxyId,
        configs: [...connection.watched].map(([typeUrl, state]) => ({
          typeUrl,
          version: state.versionSent,
          // What the proxy holds: for a delta stream, the sum of its responses.
          resources: [...state.held.values()].flatMap((held) =>
            held.resource ? [anyToJson(held.resource.resource)] : [],
          ),
        })),
      };
    },
  };
}
