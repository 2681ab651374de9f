import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { bookinfoPlatformFile } from "@sextant/testing";
import { parseAllDocuments } from "yaml";
import type { PodJson } from "../src/inject/inject.js";

/** Bookinfo's Deployments, from the repository's samples/. */
export function bookinfoDeployments(): Array<{
  metadata: { name: string };
  spec: { template: { metadata: PodJson["metadata"]; spec: PodJson["spec"] } };
}> {
  const text = readFileSync(bookinfoPlatformFile(), "utf8");
  return parseAllDocuments(text)
    .map((d) => d.toJS())
    .filter((d) => d?.kind === "Deployment");
}

/**
 * The AdmissionReview kube-apiserver sends when the Deployment's ReplicaSet
 * creates a pod: generateName, the pod-template-hash label, the ReplicaSet as
 * controller, no name and no namespace in the object (the request has it).
 */
export function podCreateReview(
  deployment: ReturnType<typeof bookinfoDeployments>[number],
  namespace = "default",
) {
  const template = deployment.spec.template;
  const hash = createHash("sha256").update(JSON.stringify(template)).digest("hex").slice(0, 10);
  const rs = `${deployment.metadata.name}-${hash}`;
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `uid-${deployment.metadata.name}`,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      requestKind: { group: "", version: "v1", kind: "Pod" },
      requestResource: { group: "", version: "v1", resource: "pods" },
      namespace,
      operation: "CREATE",
      userInfo: { username: "system:serviceaccount:kube-system:replicaset-controller" },
      object: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          generateName: `${rs}-`,
          labels: { ...template.metadata?.labels, "pod-template-hash": hash },
          ownerReferences: [
            {
              apiVersion: "apps/v1",
              kind: "ReplicaSet",
              name: rs,
              uid: `uid-${rs}`,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: template.spec,
      },
      oldObject: null,
      dryRun: false,
      options: { apiVersion: "meta.k8s.io/v1", kind: "CreateOptions" },
    },
  };
}
