import type { ProxyNodeInputs } from "../../src/node/proxy-node.js";

/** A reviews-v1 pod of Bookinfo, with a locality label as Kubernetes would carry it. */
export const REVIEWS_POD: ProxyNodeInputs = {
  podName: "reviews-v1-7d9c8b4b7f-x2x9q",
  namespace: "bookinfo",
  serviceAccount: "bookinfo-reviews",
  instanceIp: "10.244.1.17",
  trustDomain: "cluster.local",
  domainSuffix: "cluster.local",
  labels: { app: "reviews", version: "v1", "topology.istio.io/locality": "us-east1.us-east1-b.rack-7" },
  envMetadata: { CLUSTER_ID: "Kubernetes", NETWORK: "network-1", WORKLOAD_NAME: "reviews-v1" },
};
