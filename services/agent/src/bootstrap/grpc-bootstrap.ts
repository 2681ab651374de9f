import { join } from "node:path";
import type { ProxyNode } from "../node/proxy-node.js";
import type { JsonObject } from "./envoy-bootstrap.js";

/** The file names istio-agent writes under OUTPUT_CERTS, which proxyless apps read. */
export const CERTIFICATE_FILES = {
  certChain: "cert-chain.pem",
  key: "key.pem",
  root: "root-cert.pem",
} as const;

/** What a gRPC xDS bootstrap is built from. */
export interface GrpcBootstrapOptions {
  node: ProxyNode;
  /** Where the app reaches the agent's xDS proxy: `127.0.0.1:<port>` or `unix:///abs/path/XDS`. */
  serverUri: string;
  /** The directory of the certificate files (absolute); none: no certificate provider. */
  certificateDir: string | undefined;
  /** The certificate lifetime the agent asks for, in seconds: bounds the refresh interval. */
  certificateTtlSeconds: number;
}

/** How often Istio's gRPC bootstrap has file_watcher re-read the files. */
const ISTIO_REFRESH_SECONDS = 900;

/**
 * How often the app re-reads the certificate files: Istio's 900 s, but at
 * most a quarter of the certificate's lifetime. The agent rotates at half of
 * the lifetime (SECRET_GRACE_PERIOD_RATIO 0.5), so the app picks the new
 * certificate up while a quarter of the old one's life is still left; with
 * short lifetimes (tests, or SECRET_TTL=1h) a fixed 900 s could let the old
 * certificate expire in the app before the next read.
 */
export function refreshIntervalSeconds(certificateTtlSeconds: number): number {
  return Math.max(1, Math.min(ISTIO_REFRESH_SECONDS, Math.floor(certificateTtlSeconds / 4)));
}

/**
 * The gRPC xDS bootstrap for a proxyless app beside this agent, as
 * istio-agent writes it (GRPC_XDS_BOOTSTRAP): the xDS server is the agent's
 * plaintext local proxy (grpc-js-xds cannot speak TLS to its xDS server; the
 * agent adds mTLS towards push), the node is announced with GENERATOR=grpc,
 * and the `default` certificate provider reads the files the agent keeps
 * under OUTPUT_CERTS, for xDS-configured mTLS between apps.
 */
export function grpcBootstrap(options: GrpcBootstrapOptions): JsonObject {
  const { node } = options;
  const dir = options.certificateDir;
  return {
    xds_servers: [
      {
        server_uri: options.serverUri,
        channel_creds: [{ type: "insecure" }],
        server_features: ["xds_v3"],
      },
    ],
    node: { id: node.id, cluster: node.cluster, locality: node.locality, metadata: node.metadata },
    ...(dir
      ? {
          certificate_providers: {
            default: {
              plugin_name: "file_watcher",
              config: {
                certificate_file: join(dir, CERTIFICATE_FILES.certChain),
                private_key_file: join(dir, CERTIFICATE_FILES.key),
                ca_certificate_file: join(dir, CERTIFICATE_FILES.root),
                refresh_interval: `${refreshIntervalSeconds(options.certificateTtlSeconds)}s`,
              },
            },
          },
        }
      : {}),
    // Istio's name for the inbound listener of a gRPC server on a port.
    server_listener_resource_name_template: "xds.istio.io/grpc/lds/inbound/%s",
  };
}
