// The kubelet's part in running an injected pod, as the tests play it: the
// facts it fills in (name, IP, node), a container's environment resolved from
// its values and field references, and what each volume holds at a path.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { podPaths } from "@sextant/agent/pod-contract";
import type { PodJson } from "@sextant/webhook/inject";

type Env = { name: string; value?: string; valueFrom?: Record<string, Record<string, string>> };
export type Container = {
  name?: string;
  args?: string[];
  env?: Env[];
  ports?: Array<{ name?: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  [field: string]: unknown;
};
type Volume = { name: string; [kind: string]: unknown };

/** What the kubelet gives a pod: its name (from generateName), IP, node. */
export interface PodFacts {
  name: string;
  namespace: string;
  ip: string;
  node: string;
  serviceAccount: string;
}

/** The contents the cluster provides for the projected token and the root-cert ConfigMap. */
export interface ClusterFiles {
  token: string;
  rootCert: string;
}

export function podFacts(pod: PodJson, ip = "10.244.1.17"): PodFacts {
  return {
    name: pod.metadata?.name ?? `${pod.metadata?.generateName ?? "pod-"}x7k2p`,
    namespace: pod.metadata?.namespace ?? "default",
    ip,
    node: "node-1",
    serviceAccount: String(pod.spec?.serviceAccountName ?? "default"),
  };
}

export function proxyContainer(pod: PodJson): Container {
  const all = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])] as Container[];
  const proxy = all.find((container) => container.name === "istio-proxy");
  assert.ok(proxy, "no istio-proxy container");
  return proxy;
}

/** The container's environment as the kubelet resolves it; a field this kubelet does not know is a problem. */
export function resolveEnv(
  container: Container,
  facts: PodFacts,
  problems: string[] = [],
): Record<string, string> {
  const fields: Record<string, string> = {
    "metadata.name": facts.name,
    "metadata.namespace": facts.namespace,
    "status.podIP": facts.ip,
    "spec.serviceAccountName": facts.serviceAccount,
    "spec.nodeName": facts.node,
  };
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    const fieldPath = variable.valueFrom?.fieldRef?.fieldPath;
    const resource = variable.valueFrom?.resourceFieldRef?.resource;
    if (variable.value !== undefined) env[variable.name] = variable.value;
    else if (fieldPath && fields[fieldPath] !== undefined) env[variable.name] = fields[fieldPath];
    // limits.cpu with the default divisor: whole cores, rounded up.
    else if (resource === "limits.cpu") env[variable.name] = "2";
    else
      problems.push(
        `${variable.name}: the test's kubelet cannot resolve ${JSON.stringify(variable.valueFrom)}`,
      );
  }
  return env;
}

/** Go's %q for the values Kubernetes writes (JSON's quoting is a subset Go unquotes). */
const downwardApiText = (entries: Record<string, string>) =>
  Object.keys(entries)
    .sort()
    .map((key) => `${key}=${JSON.stringify(entries[key])}`)
    .join("\n");

/**
 * What a volume mounted at mountPath holds at `path` (under it), or a
 * problem: the downward API's items, the root-cert ConfigMap's key, the
 * projected token; an emptyDir holds what the agent writes there.
 */
function volumeProvides(
  pod: PodJson,
  volume: Volume,
  relative: string,
  files: ClusterFiles,
): { content?: string } | string {
  const downward = volume.downwardAPI as
    | { items?: Array<{ path: string; fieldRef?: { fieldPath: string } }> }
    | undefined;
  if (downward) {
    const item = downward.items?.find((candidate) => candidate.path === relative);
    if (!item) return `downward-API volume ${volume.name} has no item ${relative}`;
    const field = item.fieldRef?.fieldPath;
    if (field === "metadata.labels") return { content: downwardApiText(pod.metadata?.labels ?? {}) };
    if (field === "metadata.annotations")
      return { content: downwardApiText(pod.metadata?.annotations ?? {}) };
    return `downward-API item ${relative} holds ${field}, not labels or annotations`;
  }
  const configMap = volume.configMap as { name?: string } | undefined;
  if (configMap) {
    // The namespace controller publishes the root under this key, as istiod does.
    if (configMap.name === "istio-ca-root-cert" && relative === "root-cert.pem")
      return { content: files.rootCert };
    return `ConfigMap volume ${volume.name} (${configMap.name}) does not hold ${relative}`;
  }
  const projected = volume.projected as
    | { sources?: Array<{ serviceAccountToken?: { path: string } }> }
    | undefined;
  if (projected) {
    const token = projected.sources?.find((source) => source.serviceAccountToken?.path === relative);
    return token ? { content: files.token } : `projected volume ${volume.name} has no ${relative}`;
  }
  if (volume.emptyDir) return {};
  return `volume ${volume.name} is of a kind this test does not know`;
}

/**
 * Checks that every file and socket the agent uses is on a volume of the
 * container that provides it. With `root`, writes the files the volumes
 * provide under it (root = the container's "/"), for the agent to read.
 */
export function mountProblems(
  pod: PodJson,
  container: Container,
  root?: string,
  files: ClusterFiles = { token: "TOKEN", rootCert: "ROOT" },
): string[] {
  const problems: string[] = [];
  const volumes = (pod.spec?.volumes ?? []) as Volume[];
  for (const [setting, path] of Object.entries(podPaths())) {
    const mount = (container.volumeMounts ?? [])
      .filter((candidate) => `${path}/`.startsWith(`${candidate.mountPath.replace(/\/$/, "")}/`))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    if (!mount) {
      problems.push(`${setting} (${path}) is on no volume mount`);
      continue;
    }
    const volume = volumes.find((candidate) => candidate.name === mount.name);
    if (!volume) {
      problems.push(`${setting}: mount ${mount.name} has no volume`);
      continue;
    }
    const provided = volumeProvides(pod, volume, posix.relative(mount.mountPath, path), files);
    if (typeof provided === "string") problems.push(`${setting} (${path}): ${provided}`);
    else if (root) {
      // Every mount's folder exists from the start; an emptyDir's is empty, for the agent to write into.
      mkdirSync(join(root, mount.mountPath), { recursive: true });
      if (provided.content !== undefined) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), provided.content);
      }
    }
  }
  return problems;
}
