import { resolve } from "node:path";
import { type ProxyKind, type ProxyNode, proxyNode } from "../node/proxy-node.js";
import { PROXY_CONFIG_DEFAULTS } from "../pod/proxy-config.js";
import type { AgentSettings } from "../settings.js";
import { envoyBootstrap, type JsonObject } from "./envoy-bootstrap.js";
import { grpcBootstrap } from "./grpc-bootstrap.js";

/** The node of this agent's workload, for a bootstrap of the given kind. */
export function nodeFromSettings(settings: AgentSettings, kind: ProxyKind): ProxyNode {
  return proxyNode(
    {
      podName: settings.POD_NAME,
      namespace: settings.POD_NAMESPACE,
      serviceAccount: settings.SERVICE_ACCOUNT,
      instanceIp: settings.INSTANCE_IP,
      trustDomain: settings.TRUST_DOMAIN,
      domainSuffix: settings.DOMAIN_SUFFIX,
      labels: settings.LABELS,
      annotations: settings.ANNOTATIONS,
      proxyConfig: { ...PROXY_CONFIG_DEFAULTS, ...settings.PROXY_CONFIG.raw },
      envMetadata: settings.NODE_METADATA,
    },
    kind,
  );
}

/**
 * The Envoy bootstrap for this agent's settings. Paths are made absolute
 * against the agent's working directory, so Envoy finds the sockets
 * whatever its own working directory is.
 */
export function envoyBootstrapFromSettings(settings: AgentSettings): JsonObject {
  return envoyBootstrap({
    node: nodeFromSettings(settings, "envoy"),
    instanceIp: settings.INSTANCE_IP,
    sdsSocketPath: resolve(settings.SDS_SOCKET),
    xdsSocketPath: resolve(settings.XDS_SOCKET),
    agentHttpPort: settings.HTTP_PORT,
    adminPort: settings.PROXY_CONFIG.proxyAdminPort,
  });
}

/**
 * Where a proxyless app reaches the xDS proxy: the loopback TCP port when it
 * is on, else the Unix socket (grpc-js accepts `unix:///absolute/path`).
 */
export function xdsProxyUri(settings: AgentSettings): string {
  return settings.XDS_PROXY_PORT > 0
    ? `127.0.0.1:${settings.XDS_PROXY_PORT}`
    : `unix://${resolve(settings.XDS_SOCKET)}`;
}

/** The gRPC xDS bootstrap for this agent's settings. */
export function grpcBootstrapFromSettings(settings: AgentSettings): JsonObject {
  return grpcBootstrap({
    node: nodeFromSettings(settings, "grpc"),
    serverUri: xdsProxyUri(settings),
    certificateDir: settings.OUTPUT_CERTS ? resolve(settings.OUTPUT_CERTS) : undefined,
    certificateTtlSeconds: settings.SECRET_TTL,
  });
}

/** A bootstrap as the file Envoy or gRPC reads: indented JSON and a final newline. */
export function bootstrapText(bootstrap: JsonObject): string {
  return `${JSON.stringify(bootstrap, null, 2)}\n`;
}
