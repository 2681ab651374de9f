import type { ProxyNodeInputs } from "../../src/node/proxy-node.js";

/**
 * A reviews-v1 pod of Bookinfo as the webhook injects it: a locality label as
 * Kubernetes would carry it, the ISTIO_META_* variables of the template, its
 * annotations (one of Istio's stats annotations) and its PROXY_CONFIG.
 */
export const REVIEWS_POD: ProxyNodeInputs = {
  podName: "reviews-v1-7d9c8b4b7f-x2x9q",
  namespace: "bookinfo",
  serviceAccount: "bookinfo-reviews",
  instanceIp: "10.244.1.17",
  trustDomain: "cluster.local",
  domainSuffix: "cluster.local",
  labels: { app: "reviews", version: "v1", "topology.istio.io/locality": "us-east1.us-east1-b.rack-7" },
  annotations: {
    "sidecar.istio.io/statsInclusionPrefixes": "http.{pod_ip}_",
    "sidecar.istio.io/extraStatTags": "destination_port,request_host",
  },
  proxyConfig: {
    discoveryAddress: "sextant-push.istio-system.svc:15012",
    drainDuration: "45s",
    terminationDrainDuration: "5s",
    proxyAdminPort: 15000,
    statusPort: 15020,
  },
  envMetadata: {
    APP_CONTAINERS: "reviews",
    CLUSTER_ID: "Kubernetes",
    INTERCEPTION_MODE: "REDIRECT",
    MESH_ID: "cluster.local",
    NETWORK: "network-1",
    NODE_NAME: "node-1",
    OWNER: "kubernetes://apis/apps/v1/namespaces/bookinfo/deployments/reviews-v1",
    POD_PORTS: '[{"containerPort":9080}]',
    WORKLOAD_NAME: "reviews-v1",
  },
};
