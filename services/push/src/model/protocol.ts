import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";

/** Istio's protocol.Parse (case-insensitive names); unknown names are PROTOCOL_UNSPECIFIED. */
export function parseProtocol(name: string): Protocol {
  switch (name.toUpperCase()) {
    case "HTTP":
      return Protocol.PROTOCOL_HTTP;
    case "HTTP2":
      return Protocol.PROTOCOL_HTTP2;
    case "GRPC":
      return Protocol.PROTOCOL_GRPC;
    case "GRPC-WEB":
      return Protocol.PROTOCOL_GRPC_WEB;
    case "HTTPS":
      return Protocol.PROTOCOL_HTTPS;
    case "TLS":
      return Protocol.PROTOCOL_TLS;
    case "TCP":
      return Protocol.PROTOCOL_TCP;
    case "UDP":
      return Protocol.PROTOCOL_UDP;
    case "MONGO":
      return Protocol.PROTOCOL_MONGO;
    case "REDIS":
      return Protocol.PROTOCOL_REDIS;
    case "MYSQL":
      return Protocol.PROTOCOL_MYSQL;
    default:
      return Protocol.PROTOCOL_UNSPECIFIED;
  }
}
