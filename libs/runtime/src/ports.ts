/**
 * The default local ports of every Sextant process (Istio's numbers where
 * istiod has the same port: 15010, 15012, 15014, 15017). Code, deploy
 * manifests and tests read them from here rather than repeating numbers.
 */
export const DEFAULT_PORTS = {
  nats: 4222,
  ingest: { http: 8080 },
  discovery: { http: 15015 },
  push: { xds: 15010, xdsTls: 15012, http: 15014 },
  ca: { grpc: 8060, http: 15016 },
  webhook: { https: 15017, http: 15018 },
  agent: { http: 15020 },
} as const;

/** The default NATS URL for a local mesh. */
export const DEFAULT_NATS_URL = `nats://127.0.0.1:${DEFAULT_PORTS.nats}`;
