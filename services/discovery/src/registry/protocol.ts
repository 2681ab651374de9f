import { Protocol } from "@sextant/proto";

/**
 * Protocol names as Istio parses them (case-insensitive), from a ServiceEntry
 * port's `protocol`, a Kubernetes `appProtocol` or a port-name prefix.
 * Istio's HTTP_PROXY has no counterpart in the registry's enum; it only
 * matters on gateways' ports, which are not registry ports.
 */
const NAMES: Record<string, Protocol> = {
  tcp: Protocol.PROTOCOL_TCP,
  udp: Protocol.PROTOCOL_UDP,
  grpc: Protocol.PROTOCOL_GRPC,
  "grpc-web": Protocol.PROTOCOL_GRPC_WEB,
  http: Protocol.PROTOCOL_HTTP,
  http2: Protocol.PROTOCOL_HTTP2,
  https: Protocol.PROTOCOL_HTTPS,
  tls: Protocol.PROTOCOL_TLS,
  mongo: Protocol.PROTOCOL_MONGO,
  redis: Protocol.PROTOCOL_REDIS,
  mysql: Protocol.PROTOCOL_MYSQL,
};

/**
 * Ports where Istio assumes TCP when nothing names the protocol: sniffing the
 * first bytes would break these protocols, where the server speaks first
 * (SMTP, MySQL) or that are not HTTP-like (DNS, MongoDB).
 */
const WELL_KNOWN_TCP_PORTS = new Set([25, 53, 3306, 27017]);

/**
 * The protocol a name stands for, as Istio's protocol.Parse reads it;
 * PROTOCOL_UNSPECIFIED when it names none (Istio's "unsupported": the proxy
 * sniffs the protocol).
 */
export function parseProtocol(name: string): Protocol {
  return NAMES[name.toLowerCase()] ?? Protocol.PROTOCOL_UNSPECIFIED;
}

/** A Kubernetes Service port, as far as protocol inference is concerned. */
export interface KubePortLike {
  readonly port: number;
  readonly name?: string;
  /** The IP protocol: TCP (default), UDP or SCTP. */
  readonly protocol?: string;
  readonly appProtocol?: string;
}

/**
 * The protocol of a Kubernetes Service port, as Istio infers it:
 *
 * 1. a UDP port is UDP;
 * 2. `appProtocol` wins when set, including Kubernetes' own names
 *    (`kubernetes.io/h2c` is HTTP2, `kubernetes.io/ws` HTTP and
 *    `kubernetes.io/wss` HTTPS);
 * 3. otherwise the port name's prefix before the first `-` (`http-web`,
 *    `grpc`), with `grpc-web` recognised whole since it contains a dash;
 *    a `udp` prefix makes even a TCP port UDP (push then builds no listener
 *    or cluster for it, as Istio does not proxy UDP);
 * 4. nothing recognised on a well-known server-first port is TCP, and
 *    anything else is left unspecified (auto-detected by the proxy).
 */
export function inferKubeProtocol(port: KubePortLike): Protocol {
  if (port.protocol?.toUpperCase() === "UDP") return Protocol.PROTOCOL_UDP;
  let name = port.name ?? "";
  if (port.appProtocol) {
    switch (port.appProtocol) {
      case "kubernetes.io/h2c":
        return Protocol.PROTOCOL_HTTP2;
      case "kubernetes.io/ws":
        return Protocol.PROTOCOL_HTTP;
      case "kubernetes.io/wss":
        return Protocol.PROTOCOL_HTTPS;
    }
    name = port.appProtocol;
  }
  let protocol: Protocol;
  if (name.toLowerCase().startsWith("grpc-web")) {
    protocol = Protocol.PROTOCOL_GRPC_WEB;
  } else {
    const dash = name.indexOf("-");
    protocol = parseProtocol(dash >= 0 ? name.slice(0, dash) : name);
  }
  // A "udp" name is UDP even on a TCP port: Istio's kube.ConvertProtocol
  // returns whatever protocol.Parse makes of the name (the IP protocol is
  // only read to return UDP early).
  if (protocol === Protocol.PROTOCOL_UNSPECIFIED && WELL_KNOWN_TCP_PORTS.has(port.port))
    return Protocol.PROTOCOL_TCP;
  return protocol;
}
