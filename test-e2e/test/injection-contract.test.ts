// The contract between the webhook's injected pod and the agent, checked both
// ways on every injection case of the webhook's goldens: every variable the
// injected istio-proxy container sets is one the agent reads; every setting an
// injected pod must set is set; every file and socket the agent uses is on a
// volume that provides it; and the agent, started in that container's
// environment with those volumes (this test plays the kubelet), reads the
// pod's labels, push's address and its domain.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { describe, test } from "node:test";
import {
  agentReadsEnv,
  agentSettingsFromEnv,
  envoyNodeFromSettings,
  POD_REQUIRED_ENV,
  podPaths,
} from "@sextant/agent/pod-contract";
import { repositoryRoot } from "@sextant/testing";
import { defaultInjectionConfig, injectPod, type PodJson } from "@sextant/webhook/inject";
import { parse } from "yaml";

type Env = { name: string; value?: string; valueFrom?: Record<string, Record<string, string>> };
type Container = {
  name?: string;
  args?: string[];
  env?: Env[];
  volumeMounts?: Array<{ name: string; mountPath: string }>;
};
type Volume = { name: string; [kind: string]: unknown };

const CASES_DIR = join(repositoryRoot(), "services", "webhook", "test", "testdata", "inject");
const config = defaultInjectionConfig();

/** The injected pods of the webhook's golden cases (refused-* cases are never injected). */
function injectedCases(): Array<{ name: string; pod: PodJson }> {
  return readdirSync(CASES_DIR)
    .filter((file) => file.endsWith(".in.yaml") && !file.startsWith("refused-"))
    .map((file) => {
      const input = parse(readFileSync(join(CASES_DIR, file), "utf8"));
      // A case is an AdmissionReview, or a Pod whose own namespace is the request's.
      const review =
        input.kind === "Pod" ? { request: { object: input, namespace: input.metadata.namespace } } : input;
      const result = injectPod(review.request.object, { namespace: review.request.namespace }, config);
      assert.ok(result.decision.inject, `${file} was not injected`);
      // The API server fills in the namespace of the request.
      const pod = result.pod;
      pod.metadata = { ...pod.metadata, namespace: review.request.namespace };
      return { name: file.replace(/\.in\.yaml$/, ""), pod };
    });
}

function proxyContainer(pod: PodJson): Container {
  const all = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])] as Container[];
  const proxy = all.find((container) => container.name === "istio-proxy");
  assert.ok(proxy, "no istio-proxy container");
  return proxy;
}

/** What the kubelet would give this pod: its name (from generateName), IP, node. */
function podFacts(pod: PodJson) {
  return {
    name: pod.metadata?.name ?? `${pod.metadata?.generateName ?? "pod-"}x7k2p`,
    namespace: pod.metadata?.namespace ?? "default",
    ip: "10.244.1.17",
    node: "node-1",
    serviceAccount: String(pod.spec?.serviceAccountName ?? "default"),
  };
}

/** The container's environment as the kubelet resolves it; a field this kubelet does not know is a problem. */
function resolveEnv(pod: PodJson, container: Container, problems: string[]): Record<string, string> {
  const facts = podFacts(pod);
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
function volumeProvides(pod: PodJson, volume: Volume, relative: string): { content?: string } | string {
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
    if (configMap.name === "istio-ca-root-cert" && relative === "root-cert.pem") return { content: "ROOT" };
    return `ConfigMap volume ${volume.name} (${configMap.name}) does not hold ${relative}`;
  }
  const projected = volume.projected as
    | { sources?: Array<{ serviceAccountToken?: { path: string } }> }
    | undefined;
  if (projected) {
    const token = projected.sources?.find((source) => source.serviceAccountToken?.path === relative);
    return token ? { content: "TOKEN" } : `projected volume ${volume.name} has no ${relative}`;
  }
  if (volume.emptyDir) return {};
  return `volume ${volume.name} is of a kind this test does not know`;
}

/**
 * Checks the contract for one injected pod. With `root`, writes the files the
 * volumes provide under it (root = the container's "/"), for the agent to read.
 */
function contractProblems(pod: PodJson, root?: string): string[] {
  const problems: string[] = [];
  const container = proxyContainer(pod);
  const env = resolveEnv(pod, container, problems);
  for (const variable of container.env ?? [])
    if (!agentReadsEnv(variable.name))
      problems.push(`${variable.name} is set, but the agent does not read it`);
  for (const [name, why] of Object.entries(POD_REQUIRED_ENV))
    if (!env[name]) problems.push(`${name} is not set (the agent needs it for ${why})`);
  const domainArg = container.args?.[(container.args?.indexOf("--domain") ?? -2) + 1];
  if (domainArg !== `${env.POD_NAMESPACE ?? podFacts(pod).namespace}.svc.${env.DOMAIN_SUFFIX}`)
    problems.push(`--domain ${domainArg} disagrees with DOMAIN_SUFFIX ${env.DOMAIN_SUFFIX}`);
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
    const provided = volumeProvides(pod, volume, posix.relative(mount.mountPath, path));
    if (typeof provided === "string") problems.push(`${setting} (${path}): ${provided}`);
    else if (root && provided.content !== undefined) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), provided.content);
    }
  }
  return problems;
}

/** The agent's settings read from inside the container: its environment, its working directory "/" at root. */
function agentSettingsInPod(pod: PodJson) {
  const root = mkdtempSync(join(tmpdir(), "injected-pod-"));
  const problems: string[] = [];
  assert.deepEqual(contractProblems(pod, root), []);
  const env = resolveEnv(pod, proxyContainer(pod), problems);
  const cwd = process.cwd();
  process.chdir(root);
  try {
    return agentSettingsFromEnv(env);
  } finally {
    process.chdir(cwd);
  }
}

describe("injection contract: the webhook's pod and the agent agree", () => {
  const cases = injectedCases();

  test("the webhook's golden cases are all checked", () => {
    assert.ok(cases.length >= 8, `only ${cases.length} cases`);
    assert.ok(
      cases.some((c) => c.name.startsWith("native-sidecar")),
      "no native-sidecar case",
    );
  });

  for (const { name, pod } of cases) {
    test(`${name}: env, required settings and mounts agree`, () => {
      assert.deepEqual(contractProblems(pod), []);
    });

    test(`${name}: the agent in the injected container reads the pod's labels, push and its domain`, () => {
      const settings = agentSettingsInPod(pod);
      const { "pod-template-hash": _hash, ...labels } = pod.metadata?.labels ?? {};
      assert.deepEqual(settings.LABELS, labels);
      assert.deepEqual(settings.ANNOTATIONS, pod.metadata?.annotations ?? {});
      assert.equal(settings.XDS_ADDR, config.discoveryAddress);
      assert.equal(settings.CA_ADDR, config.caAddress);
      assert.equal(settings.DOMAIN_SUFFIX, config.domainSuffix);
      assert.equal(settings.TRUST_DOMAIN, config.trustDomain);
      assert.equal(settings.POD_NAMESPACE, podFacts(pod).namespace);
      assert.equal(settings.SERVICE_ACCOUNT, podFacts(pod).serviceAccount);
      assert.equal(settings.INSTANCE_IP, podFacts(pod).ip);
      assert.equal(settings.NODE_METADATA.NODE_NAME, podFacts(pod).node);
      assert.equal(settings.NODE_METADATA.CLUSTER_ID, config.clusterId);
      assert.equal(typeof settings.NODE_METADATA.WORKLOAD_NAME, "string");
      // The pod's proxy.istio.io/config wins (Istio's order); without it, ISTIO_CPU_LIMIT's whole cores.
      const annotated = /^\s*concurrency:\s*(\d+)\s*$/m.exec(
        pod.metadata?.annotations?.["proxy.istio.io/config"] ?? "",
      );
      assert.equal(
        settings.PROXY_CONFIG.concurrency,
        annotated ? Number(annotated[1]) : 2,
        annotated ? "concurrency from proxy.istio.io/config" : "concurrency from ISTIO_CPU_LIMIT",
      );
    });

    test(`${name}: the bootstrap's node carries the metadata Istio's sidecars send`, () => {
      const { metadata } = envoyNodeFromSettings(agentSettingsInPod(pod));
      // PLATFORM_METADATA is left out: Istio fills it from a cloud's metadata server only.
      for (const key of [
        "NAME",
        "NAMESPACE",
        "SERVICE_ACCOUNT",
        "INSTANCE_IPS",
        "LABELS",
        "ANNOTATIONS",
        "OWNER",
        "WORKLOAD_NAME",
        "CLUSTER_ID",
        "MESH_ID",
        "ISTIO_VERSION",
        "PROXY_CONFIG",
        "POD_PORTS",
        "APP_CONTAINERS",
        "INTERCEPTION_MODE",
        "NODE_NAME",
        "ENVOY_STATUS_PORT",
        "ENVOY_PROMETHEUS_PORT",
      ]) {
        // A gateway pod has no app container (its istio-proxy is the workload), so none to announce.
        if (key === "APP_CONTAINERS" && !pod.spec?.containers?.some((c) => c.name !== "istio-proxy"))
          continue;
        assert.ok(metadata[key] !== undefined && metadata[key] !== "", `${key} is missing`);
      }
      assert.equal(
        (metadata.PROXY_CONFIG as { discoveryAddress?: string }).discoveryAddress,
        config.discoveryAddress,
      );
      assert.equal(metadata.MESH_ID, config.meshId);
    });
  }

  test("drift on either side is caught", () => {
    const pod = structuredClone(cases[0]!.pod);
    const container = proxyContainer(pod);
    // The old template's variable, one required setting gone, the labels volume unmounted.
    container.env = [
      ...(container.env ?? []).filter((variable) => variable.name !== "PROXY_CONFIG"),
      { name: "DISCOVERY_ADDRESS", value: "push:15012" },
    ];
    container.volumeMounts = (container.volumeMounts ?? []).filter((mount) => mount.name !== "istio-podinfo");
    const problems = contractProblems(pod);
    assert.ok(
      problems.includes("DISCOVERY_ADDRESS is set, but the agent does not read it"),
      problems.join("\n"),
    );
    assert.ok(
      problems.some((problem) => problem.startsWith("PROXY_CONFIG is not set")),
      problems.join("\n"),
    );
    assert.ok(
      problems.includes("POD_LABELS_FILE (/etc/istio/pod/labels) is on no volume mount"),
      problems.join("\n"),
    );
  });
});
