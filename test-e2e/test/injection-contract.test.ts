// The contract between the webhook's injected pod and the agent, checked both
// ways on every injection case of the webhook's goldens: every variable the
// injected istio-proxy container sets is one the agent reads; every setting an
// injected pod must set is set; every file and socket the agent uses is on a
// volume that provides it; and the agent, started in that container's
// environment with those volumes (this test plays the kubelet), reads the
// pod's labels, push's address and its domain.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  agentReadsEnv,
  agentSettingsFromEnv,
  envoyNodeFromSettings,
  POD_REQUIRED_ENV,
} from "@sextant/agent/pod-contract";
import { repositoryRoot } from "@sextant/testing";
import { defaultInjectionConfig, injectPod, type PodJson } from "@sextant/webhook/inject";
import { parse } from "yaml";
import { mountProblems, podFacts, proxyContainer, resolveEnv } from "../src/kubelet.js";

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

/**
 * Checks the contract for one injected pod. With `root`, writes the files the
 * volumes provide under it (root = the container's "/"), for the agent to read.
 */
function contractProblems(pod: PodJson, root?: string): string[] {
  const problems: string[] = [];
  const container = proxyContainer(pod);
  const env = resolveEnv(container, podFacts(pod), problems);
  for (const variable of container.env ?? [])
    if (!agentReadsEnv(variable.name))
      problems.push(`${variable.name} is set, but the agent does not read it`);
  for (const [name, why] of Object.entries(POD_REQUIRED_ENV))
    if (!env[name]) problems.push(`${name} is not set (the agent needs it for ${why})`);
  const domainArg = container.args?.[(container.args?.indexOf("--domain") ?? -2) + 1];
  if (domainArg !== `${env.POD_NAMESPACE ?? podFacts(pod).namespace}.svc.${env.DOMAIN_SUFFIX}`)
    problems.push(`--domain ${domainArg} disagrees with DOMAIN_SUFFIX ${env.DOMAIN_SUFFIX}`);
  return [...problems, ...mountProblems(pod, container, root)];
}

/** The agent's settings read from inside the container: its environment, its working directory "/" at root. */
function agentSettingsInPod(pod: PodJson) {
  const root = mkdtempSync(join(tmpdir(), "injected-pod-"));
  assert.deepEqual(contractProblems(pod, root), []);
  const env = resolveEnv(proxyContainer(pod), podFacts(pod));
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
