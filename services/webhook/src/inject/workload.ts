import type { TemplateValue } from "./template.js";

/** The parts of a pod that name its workload. */
export interface WorkloadPod {
  metadata?: {
    name?: string;
    generateName?: string;
    labels?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion?: string; kind?: string; name?: string; controller?: boolean }>;
  };
  spec?: { containers?: Array<{ name?: string; ports?: unknown[] }> };
}

/** A Job a CronJob started is named <cronjob>-<scheduled time in minutes>: 8 to 10 digits (Istio's rule). */
const CRONJOB_JOB = /^(.+)-\d{8,10}$/;

/** Kubernetes' limit on a label value. */
const LABEL_VALUE_MAX = 63;

/**
 * The workload's name and owner as Istio derives them from the pod's
 * controller: a ReplicaSet with the pod-template-hash is its Deployment, a
 * Job named like a CronJob's is that CronJob (batch/v1), any other controller
 * is itself; without a controller the pod is its own workload.
 */
export function workloadIdentity(pod: WorkloadPod, namespace: string): { name: string; owner: string } {
  const labels = pod.metadata?.labels ?? {};
  const podName = pod.metadata?.name || pod.metadata?.generateName?.replace(/-$/, "") || "";
  const controller = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  let apiVersion = "v1";
  let kind = "Pod";
  let name = podName;
  if (controller?.name && controller.kind) {
    apiVersion = controller.apiVersion ?? "v1";
    kind = controller.kind;
    name = controller.name;
    const hash = labels["pod-template-hash"];
    const cronJob = CRONJOB_JOB.exec(controller.name);
    if (kind === "ReplicaSet" && hash && name.endsWith(`-${hash}`)) {
      name = name.slice(0, -hash.length - 1);
      kind = "Deployment";
    } else if (kind === "Job" && cronJob) {
      name = cronJob[1]!;
      kind = "CronJob";
      // The pod does not say the CronJob's version; batch/v1 is the one served.
      apiVersion = "batch/v1";
    }
  }
  const owner = `kubernetes://apis/${apiVersion}/namespaces/${namespace}/${kind.toLowerCase()}s/${name}`;
  return { name, owner };
}

/**
 * The values that describe the workload: its app containers and ports, its
 * name and owner, and its canonical service labels (Istio's defaults; the
 * name cut to a label's 63 characters with separators trimmed from its ends).
 */
export function workloadValues(pod: WorkloadPod, namespace: string): Record<string, TemplateValue> {
  const labels = pod.metadata?.labels ?? {};
  // A pod's own istio-proxy (an override) is not an app container, but its ports are the pod's (a gateway's).
  const ports = (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
  const containers = (pod.spec?.containers ?? []).filter((c) => c.name !== "istio-proxy");
  const identity = workloadIdentity(pod, namespace);
  const canonicalName =
    labels["service.istio.io/canonical-name"] ||
    labels["app.kubernetes.io/name"] ||
    labels.app ||
    identity.name;
  return {
    appContainers: containers.map((c) => c.name ?? "").join(","),
    podPortsJson: JSON.stringify(ports),
    workloadName: labels["service.istio.io/workload-name"] || identity.name,
    owner: identity.owner,
    canonicalName: trimSeparators(canonicalName.slice(0, LABEL_VALUE_MAX)),
    canonicalRevision:
      labels["service.istio.io/canonical-revision"] ||
      labels["app.kubernetes.io/version"] ||
      labels.version ||
      "latest",
    defaultContainer: containers[0]?.name,
  };
}

/** Sprig's trimAll "-_.": a label value must start and end with a letter or digit. */
function trimSeparators(value: string): string {
  return value.replace(/^[-_.]+|[-_.]+$/g, "");
}
