// Istio config the secure-mesh suites apply alike, as YAML for ingest.

/** Mesh-wide STRICT mTLS in namespace default (PeerAuthentication default). */
export const STRICT_MTLS = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: STRICT}
`;

/** A DestinationRule (named after host's first label) sending host's traffic over ISTIO_MUTUAL TLS. */
export const istioMutual = (host: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ${host.split(".")[0]}, namespace: default}
spec:
  host: ${host}
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
`;
