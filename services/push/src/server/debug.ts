import { JsonAnswer, type JsonRoute } from "@sextant/observability";
import { type Any, ProxyStatus } from "@sextant/proto";
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
import { TELEMETRY_NESTED_CODECS } from "../translate/common/telemetry.js";
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
  ...TELEMETRY_NESTED_CODECS,
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

/**
 * GET /debug/syncz and /debug/config_dump?proxyID=, as istiod serves them;
 * /debug/proxy_status, every proxy of every replica (from
 * sextant-proxy-status); and /debug/proxy_diff?proxyID=, what push would send
 * now beside what the proxy held at its last ACK, per type (on the replica
 * holding it).
 */
export function debugRoutes(
  discovery: () => DiscoveryServer,
  status: ProxyStatusReporter,
  allProxyStatuses: () => Promise<ProxyStatus[]>,
): Record<string, JsonRoute> {
  const connectionOf = (proxyId: string | null) =>
    discovery()
      .connections()
      .filter((c) => c.proxy.id === proxyId)
      .at(-1);
  const notHere = (proxyId: string | null) =>
    new JsonAnswer(404, { error: `no proxy ${proxyId ?? "(proxyID missing)"} on this replica` });
  return {
    "/debug/proxy_status": async () =>
      (await allProxyStatuses())
        .sort((a, b) => a.proxyId.localeCompare(b.proxyId))
        .map((record) => ProxyStatus.toJSON(record)),
    "/debug/proxy_diff": (query: URLSearchParams) => {
      const proxyId = query.get("proxyID");
      const connection = connectionOf(proxyId);
      if (!connection) return notHere(proxyId);
      const anyToJson = configDumpDecoder(discovery().types);
      return {
        proxyId,
        types: [...connection.watched].map(([typeUrl, state]) => ({
          typeUrl,
          versionSent: state.versionSent ?? "",
          versionAcked: state.versionAcked ?? "",
          // The proxy's resources, by name: what it held at its last ACK (what it runs).
          acked: Object.fromEntries(
            [...(state.ackedHeld ?? [])].flatMap(([name, held]) =>
              held.resource ? [[name, anyToJson(held.resource.resource)]] : [],
            ),
          ),
          // What a push now would send, by name.
          current: Object.fromEntries(
            (connection.generateNow(typeUrl) ?? []).map((resource) => [
              resource.name,
              anyToJson(resource.resource),
            ]),
          ),
        })),
      };
    },
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
      const connection = connectionOf(proxyId);
      if (!connection) return notHere(proxyId);
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
