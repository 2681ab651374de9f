// biome-ignore-all lint/suspicious/noExplicitAny: admission responses and pods are untyped JSON here.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the template placeholders are ${name} strings.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { checkGoldenDir } from "@sextant/testing";
import jsonPatch from "fast-json-patch";
import { parse, stringify } from "yaml";
import { admitInjection } from "../src/admission/inject.js";
import { parseReview } from "../src/admission/review.js";
import {
  AnnotationError,
  defaultInjectionConfig,
  injectionRequired,
  injectPod,
  loadTemplate,
  nativeSidecarDefault,
  type PodJson,
  parseTemplate,
  REFUSED_ANNOTATIONS,
  render,
  type SelectionContext,
  STATUS_ANNOTATION,
} from "../src/inject/index.js";
import { bookinfoDeployments, podCreateReview } from "./bookinfo.js";
import { assertValidPodSpec } from "./helpers.js";

const testdata = join(import.meta.dirname, "testdata", "inject");
const config = defaultInjectionConfig();

/**
 * A case's AdmissionReview: the file's own, or one built around a Pod
 * (Istio-format pods are easier to read), as kube-apiserver sends it.
 */
function reviewOf(input: any): any {
  if (input.kind !== "Pod") return input;
  const namespace = input.metadata.namespace;
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `uid-${input.metadata.name ?? input.metadata.generateName}`,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      namespace,
      operation: "CREATE",
      userInfo: { username: "system:serviceaccount:kube-system:replicaset-controller" },
      object: input,
    },
  };
}

/** The injected pod of a case (the pure function's), for assertions on one case. */
function injectedCase(name: string): any {
  const review = reviewOf(parse(readFileSync(join(testdata, `${name}.in.yaml`), "utf8")));
  return injectPod(review.request.object, { namespace: review.request.namespace }, config).pod;
}

/** The refusal of a case. */
function refusalOf(name: string): string {
  const review = reviewOf(parse(readFileSync(join(testdata, `${name}.in.yaml`), "utf8")));
  try {
    injectPod(review.request.object, { namespace: review.request.namespace }, config);
  } catch (e) {
    assert.ok(e instanceof AnnotationError, String(e));
    return e.message;
  }
  assert.fail(`${name} was not refused`);
}

const proxyOf = (pod: any) =>
  [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c: any) => c.name === "istio-proxy");
const envOf = (container: any, name: string) => container.env.find((e: any) => e.name === name)?.value;
const argOf = (container: any, flag: string) => container.args[container.args.indexOf(flag) + 1];

describe("injection goldens", () => {
  it("each AdmissionReview gives the expected patch (or refusal), and the patched pod is valid", () => {
    const produced = checkGoldenDir(testdata, (testCase): Record<string, string> => {
      const parsed = parseReview(reviewOf(parse(testCase.input)));
      assert.ok(parsed.ok, testCase.name);
      const response = admitInjection(parsed.request, config);
      if (testCase.name.startsWith("refused-")) {
        assert.equal(response.allowed, false, testCase.name);
        return { refusal: stringify({ code: response.status?.code, message: response.status?.message }) };
      }
      assert.equal(response.allowed, true, testCase.name);
      assert.equal(response.patchType, "JSONPatch");
      const patch = JSON.parse(Buffer.from(response.patch!, "base64").toString("utf8"));
      const pod = jsonPatch.applyPatch(structuredClone(parsed.request.object), patch, true, false)
        .newDocument as any;
      assertValidPodSpec(pod);
      const proxy = proxyOf(pod);
      assert.ok(proxy, `${testCase.name}: no istio-proxy`);
      assert.equal(
        pod.spec.containers.filter((c: any) => c.name === "istio-proxy").length,
        native(pod) ? 0 : 1,
      );
      assert.equal(proxy.securityContext.runAsGroup, 1337);
      assert.ok(proxy.ports.some((p: any) => p.containerPort === 15090));
      assert.equal(proxy.readinessProbe.httpGet.path, "/healthz/ready");
      assert.equal(proxy.readinessProbe.httpGet.port, 15021);
      const token = pod.spec.volumes.find((v: any) => v.name === "istio-token");
      assert.equal(token.projected.sources[0].serviceAccountToken.audience, "istio-ca");
      // Every volume a container mounts exists (the API server refuses a pod otherwise).
      const volumes = new Set(pod.spec.volumes.map((v: any) => v.name));
      for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers])
        for (const m of c.volumeMounts ?? []) assert.ok(volumes.has(m.name), `${c.name} mounts ${m.name}`);
      assert.ok(pod.metadata.annotations[STATUS_ANNOTATION]);
      // The patched pod is exactly what the pure function returns.
      const direct = injectPod(
        parsed.request.object as PodJson,
        { namespace: parsed.request.namespace! },
        config,
      );
      assert.deepEqual(pod, direct.pod);
      return { patch: stringify(patch), pod: stringify(pod) };
    });
    // Every Bookinfo Deployment has a case built from its pod template.
    for (const d of bookinfoDeployments()) {
      assert.ok(produced.includes(`${d.metadata.name}.patch.out.yaml`), d.metadata.name);
      const input = parse(readFileSync(join(testdata, `${d.metadata.name}.in.yaml`), "utf8"));
      assert.deepEqual(
        input,
        podCreateReview(d),
        `${d.metadata.name}.in.yaml is stale; regenerate it from bookinfo.yaml`,
      );
    }
  });

  it("a sidecar pod: istio-init last of the init containers, the proxy last of the containers, uid 1337", () => {
    const pod = injectedCase("details-v1");
    assert.equal(pod.spec.initContainers.at(-1).name, "istio-init");
    assert.equal(pod.spec.containers.at(-1).name, "istio-proxy");
    assert.equal(proxyOf(pod).securityContext.runAsUser, 1337);
    assert.deepEqual(
      proxyOf(pod).ports.map((p: any) => p.containerPort),
      [15090, 15021],
    );
    assert.equal(proxyOf(pod).startupProbe.httpGet.path, "/healthz/ready");
    assert.equal(proxyOf(pod).lifecycle, undefined);
  });

  it("honours the per-pod annotations", () => {
    const review = parse(readFileSync(join(testdata, "annotations-reviews-v2.in.yaml"), "utf8"));
    const { pod } = injectPod(review.request.object, { namespace: "bookinfo" }, config);
    const proxy = pod.spec!.containers!.find((c) => c.name === "istio-proxy") as any;
    const init = pod.spec!.initContainers!.find((c) => c.name === "istio-init") as any;
    assert.equal(proxy.image, "example.com/proxy:custom");
    assert.equal(init.image, "example.com/proxy:custom");
    // Istio's rule: with any resource annotation set, only the annotated values.
    assert.deepEqual(proxy.resources, { requests: { cpu: "250m" }, limits: { memory: "512Mi" } });
    assert.equal(argOf(init, "-o"), "3306,6379");
    assert.equal(argOf(init, "-d"), "15090,15021,15020,9443");
    assert.equal(argOf(init, "-i"), "10.0.0.0/8,172.16.0.0/12");
    assert.equal(argOf(init, "-p"), "15001");
    assert.equal(argOf(init, "-z"), "15006");
    assert.equal(argOf(init, "-u"), "1337");
  });

  it("resources: a lone proxyCPU gives that request and no limit; a request above its limit is refused", () => {
    assert.deepEqual(proxyOf(injectedCase("resources-cpu-only")).resources, { requests: { cpu: "4000m" } });
    const refusal = refusalOf("refused-request-above-limit");
    assert.match(
      refusal,
      /sidecar\.istio\.io\/proxyCPU=3 is more than sidecar\.istio\.io\/proxyCPULimit=2000m/,
    );
    assert.match(
      refusal,
      /sidecar\.istio\.io\/proxyMemory=1Gi is more than sidecar\.istio\.io\/proxyMemoryLimit=512Mi/,
    );
  });

  it("a gateway pod's istio-proxy (image auto) is merged into the router form", () => {
    const pod = injectedCase("gateway-auto-image");
    assert.equal(pod.spec.initContainers, undefined);
    assert.deepEqual(
      pod.spec.containers.map((c: any) => c.name),
      ["istio-proxy"],
    );
    const proxy = proxyOf(pod);
    assert.equal(proxy.image, config.proxyImage);
    assert.deepEqual(proxy.args.slice(0, 4), [
      "proxy",
      "router",
      "--domain",
      "istio-ingress.svc.cluster.local",
    ]);
    assert.deepEqual(
      proxy.ports.map((p: any) => p.containerPort),
      [15090, 8080, 8443],
    );
    assert.deepEqual(proxy.resources.limits, { cpu: "2000m", memory: "1024Mi" });
    assert.equal(proxy.securityContext.runAsUser, 1337);
    assert.equal(proxy.securityContext.readOnlyRootFilesystem, true);
    assert.equal(pod.metadata.labels["security.istio.io/tlsMode"], undefined);
    assert.equal(pod.metadata.labels["service.istio.io/canonical-name"], "istio-ingressgateway");
    assert.deepEqual(pod.spec.securityContext, {
      runAsNonRoot: true,
      sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }],
    });
    assert.equal(envOf(proxy, "ISTIO_META_WORKLOAD_NAME"), "istio-ingressgateway");
    assert.deepEqual(
      JSON.parse(envOf(proxy, "ISTIO_META_POD_PORTS")).map((p: any) => p.containerPort),
      [8080, 8443],
    );
    // Already pointing at the agent: left as is, nothing moved to the env.
    assert.equal(pod.metadata.annotations["prometheus.io/port"], "15020");
    assert.equal(envOf(proxy, "ISTIO_PROMETHEUS_ANNOTATIONS"), undefined);
  });

  it("a user's istio-proxy overrides the injected one field by field", () => {
    const pod = injectedCase("override-istio-proxy");
    assert.deepEqual(
      pod.spec.containers.map((c: any) => c.name),
      ["reviews", "istio-proxy"],
    );
    const proxy = proxyOf(pod);
    assert.equal(proxy.image, config.proxyImage);
    assert.deepEqual(proxy.resources, {
      requests: { cpu: "100m", memory: "128Mi" },
      limits: { cpu: "2000m", memory: "2Gi" },
    });
    assert.equal(envOf(proxy, "ISTIO_META_WORKLOAD_NAME"), "reviews-canary");
    assert.equal(proxy.env.filter((e: any) => e.name === "ISTIO_META_WORKLOAD_NAME").length, 1);
    assert.deepEqual(proxy.lifecycle.preStop.exec.command, ["sleep", "10"]);
    assert.equal(proxy.securityContext.runAsUser, 1500);
    assert.equal(proxy.securityContext.readOnlyRootFilesystem, true);
    assert.equal(argOf(pod.spec.initContainers.at(-1), "-u"), "1500");
    assert.equal(envOf(proxy, "ISTIO_META_APP_CONTAINERS"), "reviews");
  });

  it("an unknown template is refused by name", () => {
    assert.match(
      refusalOf("refused-unknown-template"),
      /unknown template grpc-agent; known: sidecar, gateway/,
    );
  });

  it("interception NONE has no istio-init; TPROXY runs the proxy as root with NET_ADMIN", () => {
    const none = injectedCase("interception-none");
    assert.equal(none.spec.initContainers, undefined);
    assert.equal(envOf(proxyOf(none), "ISTIO_META_INTERCEPTION_MODE"), "NONE");
    const tproxy = injectedCase("interception-tproxy");
    const init = tproxy.spec.initContainers.find((c: any) => c.name === "istio-init");
    assert.equal(argOf(init, "-m"), "TPROXY");
    assert.equal(argOf(init, "-u"), "1337");
    assert.deepEqual(proxyOf(tproxy).securityContext, {
      allowPrivilegeEscalation: false,
      capabilities: { add: ["NET_ADMIN"], drop: ["ALL"] },
      privileged: false,
      readOnlyRootFilesystem: true,
      runAsGroup: 1337,
      runAsNonRoot: false,
      runAsUser: 0,
    });
  });

  it("accepts every Envoy log level Istio does, warn included; cuts the canonical name to 63", () => {
    const pod = injectedCase("log-warn-long-name");
    assert.ok(proxyOf(pod).args.includes("--proxyLogLevel=warn"));
    const name = pod.metadata.labels["service.istio.io/canonical-name"];
    // Cut at 63, which ends in "-": trimmed, as a label value must end with a letter or digit.
    assert.equal(name, "a-service-with-a-very-long-name-that-keeps-going-and-going-and");
    assert.ok(name.length <= 63);
    assert.equal(pod.metadata.labels["service.istio.io/canonical-revision"], "2.1");
    for (const level of ["trace", "debug", "info", "warning", "warn", "error", "critical", "off"]) {
      const p: PodJson = {
        metadata: { annotations: { "sidecar.istio.io/logLevel": level } },
        spec: { containers: [{ name: "app" }] },
      };
      assert.doesNotThrow(() => injectPod(p, { namespace: "default" }, config), level);
    }
  });

  it("native sidecars: the proxy is the init container after istio-init, with a startup probe and a drain on preStop", () => {
    const pod = injectedCase("native-sidecar-details-v1");
    assert.deepEqual(
      pod.spec.initContainers.map((c: any) => c.name),
      ["istio-init", "istio-proxy"],
    );
    const proxy = proxyOf(pod);
    assert.equal(proxy.restartPolicy, "Always");
    assert.deepEqual(proxy.startupProbe, {
      httpGet: { path: "/healthz/ready", port: 15021 },
      initialDelaySeconds: 0,
      periodSeconds: 1,
      timeoutSeconds: 3,
      failureThreshold: 600,
    });
    assert.deepEqual(proxy.lifecycle.preStop.exec.command, [
      "agent",
      "request",
      "--debug-port=15020",
      "POST",
      "drain",
    ]);
  });

  it("prometheus.io annotations move to ISTIO_PROMETHEUS_ANNOTATIONS; merge-metrics false opts out", () => {
    const pod = injectedCase("prometheus-merge");
    assert.deepEqual(
      Object.fromEntries(
        Object.entries(pod.metadata.annotations).filter(([k]) => k.startsWith("prometheus.io/")),
      ),
      {
        "prometheus.io/port": "15020",
        "prometheus.io/path": "/stats/prometheus",
        "prometheus.io/scrape": "true",
      },
    );
    assert.equal(
      envOf(proxyOf(pod), "ISTIO_PROMETHEUS_ANNOTATIONS"),
      '{"scrape":"true","path":"/metrics","port":"9080"}',
    );
    assert.equal(proxyOf(pod).env.at(-1).name, "ISTIO_PROMETHEUS_ANNOTATIONS");
    const optOut = injectedCase("prometheus-opt-out");
    assert.equal(optOut.metadata.annotations["prometheus.io/port"], "9080");
    assert.equal(envOf(proxyOf(optOut), "ISTIO_PROMETHEUS_ANNOTATIONS"), undefined);
    // A pod without scrape annotations is scraped on the agent too, with no env (as Istio).
    const plain = injectedCase("details-v1");
    assert.equal(plain.metadata.annotations["prometheus.io/port"], "15020");
    assert.equal(envOf(proxyOf(plain), "ISTIO_PROMETHEUS_ANNOTATIONS"), undefined);
  });

  it("HTTP, TCP and gRPC probes go to the agent, the originals in ISTIO_KUBE_APP_PROBERS", () => {
    const pod = injectedCase("probes-rewritten");
    const [web, api] = pod.spec.containers;
    assert.deepEqual(web.readinessProbe, {
      httpGet: {
        path: "/app-health/web/readyz",
        port: 15020,
        scheme: "HTTP",
        httpHeaders: [{ name: "X-Probe", value: "kubelet" }],
      },
      periodSeconds: 5,
      timeoutSeconds: 2,
    });
    assert.deepEqual(web.livenessProbe, {
      httpGet: { path: "/app-health/web/livez", port: 15020 },
      initialDelaySeconds: 10,
    });
    assert.deepEqual(api.startupProbe, {
      httpGet: { path: "/app-health/api/startupz", port: 15020 },
      failureThreshold: 30,
    });
    assert.deepEqual(api.livenessProbe, { exec: { command: ["cat", "/tmp/healthy"] } });
    assert.deepEqual(web.lifecycle, {
      preStop: { httpGet: { path: "/app-lifecycle/web/prestopz", port: 15020 } },
      postStart: { exec: { command: ["touch", "/tmp/started"] } },
    });
    const probers = envOf(proxyOf(pod), "ISTIO_KUBE_APP_PROBERS");
    assert.equal(
      probers,
      JSON.stringify({
        "/app-health/api/startupz": { grpc: { port: 9090, service: "health" } },
        "/app-health/web/livez": { tcpSocket: { port: 8080 } },
        "/app-health/web/readyz": {
          httpGet: {
            path: "/ready",
            port: 8080,
            scheme: "HTTPS",
            httpHeaders: [{ name: "X-Probe", value: "kubelet" }],
          },
          timeoutSeconds: 2,
        },
        "/app-lifecycle/web/prestopz": { httpGet: { path: "/shutdown", port: 8080 } },
      }),
    );
    assert.equal(proxyOf(pod).env.at(-1).name, "ISTIO_KUBE_APP_PROBERS");
    const kept = injectedCase("probes-not-rewritten");
    assert.deepEqual(kept.spec.containers[0].readinessProbe, { httpGet: { path: "/ready", port: 8080 } });
    assert.equal(envOf(proxyOf(kept), "ISTIO_KUBE_APP_PROBERS"), undefined);
  });

  it("a CronJob's Job pod is owned by the CronJob", () => {
    const proxy = proxyOf(injectedCase("cronjob-owner"));
    assert.equal(envOf(proxy, "ISTIO_META_WORKLOAD_NAME"), "nightly-report");
    assert.equal(
      envOf(proxy, "ISTIO_META_OWNER"),
      "kubernetes://apis/batch/v1/namespaces/jobs/cronjobs/nightly-report",
    );
  });

  it("honours proxy.istio.io/config, the status port, readiness timings, outbound ports, interfaces, user volumes", () => {
    const pod = injectedCase("pod-annotations");
    const proxy = proxyOf(pod);
    const init = pod.spec.initContainers.find((c: any) => c.name === "istio-init");
    assert.equal(argOf(init, "-q"), "443,8443");
    assert.equal(argOf(init, "-c"), "eth1,net1");
    assert.equal(argOf(init, "-d"), "15090,15021,15030");
    assert.deepEqual(
      [
        proxy.readinessProbe.initialDelaySeconds,
        proxy.readinessProbe.periodSeconds,
        proxy.readinessProbe.failureThreshold,
      ],
      [2, 5, 10],
    );
    assert.equal(pod.spec.containers[0].readinessProbe.httpGet.port, 15030);
    assert.equal(pod.metadata.annotations["prometheus.io/port"], "15030");
    assert.deepEqual(pod.spec.volumes.at(-1), { name: "extra-certs", secret: { secretName: "extra-certs" } });
    assert.deepEqual(proxy.volumeMounts.at(-1), {
      name: "extra-certs",
      mountPath: "/etc/extra-certs",
      readOnly: true,
    });
  });

  it("refuses status port 0: the agent always serves its status port", () => {
    assert.match(refusalOf("refused-status-port-zero"), /status\.sidecar\.istio\.io\/port=0 is refused/);
  });

  it("refuses a metrics port of the proxy's, and holdApplicationUntilProxyStarts outside native sidecars", () => {
    assert.match(refusalOf("refused-prometheus-port"), /prometheus\.io\/port=15090 is the proxy's own port/);
    assert.match(refusalOf("refused-hold-application"), /holdApplicationUntilProxyStarts is not supported/);
    const native: PodJson = {
      metadata: {
        annotations: {
          "proxy.istio.io/config": "holdApplicationUntilProxyStarts: true",
          "sidecar.istio.io/nativeSidecar": "true",
        },
      },
      spec: { containers: [{ name: "app" }] },
    };
    assert.doesNotThrow(() => injectPod(native, { namespace: "default" }, config));
  });

  it("proxy.istio.io/config is merged over the mesh defaults into the value for PROXY_CONFIG", () => {
    const seen: string[] = [];
    const spy = parseTemplate(
      stringify({
        ...structuredClone(config.template),
        annotations: { ...config.template.annotations, "test/proxy-config": "${proxyConfigJson}" },
      }),
    );
    const review = reviewOf(parse(readFileSync(join(testdata, "pod-annotations.in.yaml"), "utf8")));
    const { pod } = injectPod(review.request.object, { namespace: "default" }, { ...config, template: spy });
    seen.push(pod.metadata!.annotations!["test/proxy-config"]!);
    assert.deepEqual(JSON.parse(seen[0]!), {
      discoveryAddress: config.discoveryAddress,
      drainDuration: "45s",
      terminationDrainDuration: "20s",
      proxyAdminPort: 15000,
      statusPort: 15030,
      proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true" },
      concurrency: 4,
    });
  });

  it("refuses the annotations it does not support, and bad values, each named", () => {
    assert.match(
      refusalOf("refused-bootstrap-override"),
      /sidecar\.istio\.io\/bootstrapOverride is refused: a custom Envoy bootstrap is not supported/,
    );
    for (const name of Object.keys(REFUSED_ANNOTATIONS)) {
      const pod: PodJson = {
        metadata: { annotations: { [name]: "true" } },
        spec: { containers: [{ name: "app" }] },
      };
      assert.throws(
        () => injectPod(pod, { namespace: "default" }, config),
        (e: unknown) => String(e).includes(`${name} is refused`),
        name,
      );
    }
    const problems = (() => {
      const review = reviewOf(parse(readFileSync(join(testdata, "refused-bad-annotations.in.yaml"), "utf8")));
      try {
        injectPod(review.request.object, { namespace: "default" }, config);
      } catch (e) {
        return (e as AnnotationError).problems;
      }
      return [];
    })();
    assert.deepEqual(
      problems.map((p) => p.split(/[=:]/)[0]),
      [
        "proxy.istio.io/config",
        "proxy.istio.io/config",
        "status.sidecar.istio.io/port",
        "sidecar.istio.io/logLevel",
        "traffic.sidecar.istio.io/excludeInterfaces",
        "readiness.status.sidecar.istio.io/periodSeconds",
        "sidecar.istio.io/userVolumeMount",
      ],
    );
  });

  it("refuses invalid annotations with every problem named", () => {
    const pod: PodJson = {
      metadata: {
        annotations: {
          "traffic.sidecar.istio.io/excludeOutboundPorts": "80,http",
          "traffic.sidecar.istio.io/includeOutboundIPRanges": "10.0.0.0/33",
          "sidecar.istio.io/proxyCPU": "lots",
        },
      },
      spec: { containers: [{ name: "app", image: "app" }] },
    };
    assert.throws(
      () => injectPod(pod, { namespace: "default" }, config),
      (e: unknown) => e instanceof AnnotationError && e.problems.length === 3,
    );
  });

  it("leaves an injected pod alone (idempotent)", () => {
    const d = bookinfoDeployments()[0]!;
    const once = injectPod(podCreateReview(d).request.object as PodJson, { namespace: "default" }, config);
    const twice = injectPod(once.pod, { namespace: "default" }, config);
    assert.equal(twice.decision.inject, false);
    assert.deepEqual(twice.patch, []);
  });
});

describe("native sidecar default (ENABLE_NATIVE_SIDECARS)", () => {
  const nodes = [
    { name: "a", kubeletVersion: "v1.33.2" },
    { name: "b", kubeletVersion: "v1.32.5" },
  ];
  it("true and false decide alone; auto needs every node (or the pod's node) at 1.33 or later", () => {
    assert.equal(nativeSidecarDefault("true", undefined, undefined), true);
    assert.equal(nativeSidecarDefault("false", nodes, "a"), false);
    assert.equal(nativeSidecarDefault("auto", undefined, undefined), false);
    assert.equal(nativeSidecarDefault("auto", nodes, undefined), false);
    assert.equal(nativeSidecarDefault("auto", nodes, "a"), true);
    assert.equal(nativeSidecarDefault("auto", nodes.slice(0, 1), undefined), true);
    assert.equal(
      nativeSidecarDefault("auto", [{ name: "x", kubeletVersion: "v1.34.0-gke.1" }], undefined),
      true,
    );
  });

  it("auto with 1.33 nodes injects a native sidecar; the annotation wins", () => {
    const pod: PodJson = { metadata: {}, spec: { containers: [{ name: "app" }] } };
    const modern = { namespace: "default", nodes: nodes.slice(0, 1) };
    assert.equal(proxyOf(injectPod(pod, modern, config).pod).restartPolicy, "Always");
    assert.equal(proxyOf(injectPod(pod, { namespace: "default" }, config).pod).restartPolicy, undefined);
    const refuse = { ...pod, metadata: { annotations: { "sidecar.istio.io/nativeSidecar": "false" } } };
    assert.equal(proxyOf(injectPod(refuse, modern, config).pod).restartPolicy, undefined);
  });
});

function native(pod: any): boolean {
  return (pod.spec.initContainers ?? []).some((c: any) => c.name === "istio-proxy");
}

describe("selection rules", () => {
  const ctx = (over: Partial<SelectionContext> = {}): SelectionContext => ({
    namespace: "default",
    namespaceLabels: {},
    revision: "default",
    ...over,
  });
  const pod = (
    labels: Record<string, string> = {},
    annotations: Record<string, string> = {},
    extra: Partial<NonNullable<PodJson["spec"]>> = {},
  ): PodJson => ({ metadata: { labels, annotations }, spec: { containers: [{ name: "app" }], ...extra } });
  const enabled = { "istio-injection": "enabled" };
  const table: Array<[string, PodJson, SelectionContext, boolean]> = [
    ["namespace istio-injection=enabled", pod(), ctx({ namespaceLabels: enabled }), true],
    [
      "namespace istio-injection=disabled",
      pod(),
      ctx({ namespaceLabels: { "istio-injection": "disabled" } }),
      false,
    ],
    [
      "namespace disabled beats pod label true",
      pod({ "sidecar.istio.io/inject": "true" }),
      ctx({ namespaceLabels: { "istio-injection": "disabled" } }),
      false,
    ],
    [
      "namespace istio.io/rev matching",
      pod(),
      ctx({ namespaceLabels: { "istio.io/rev": "canary" }, revision: "canary" }),
      true,
    ],
    ["namespace istio.io/rev=default", pod(), ctx({ namespaceLabels: { "istio.io/rev": "default" } }), true],
    [
      "namespace istio.io/rev of another revision",
      pod(),
      ctx({ namespaceLabels: { "istio.io/rev": "canary" } }),
      false,
    ],
    [
      "istio-injection wins over istio.io/rev",
      pod(),
      ctx({ namespaceLabels: { ...enabled, "istio.io/rev": "canary" }, revision: "canary" }),
      false,
    ],
    [
      "enabled namespace, non-default revision",
      pod(),
      ctx({ namespaceLabels: enabled, revision: "canary" }),
      false,
    ],
    ["unlabelled namespace", pod(), ctx(), false],
    ["unlabelled namespace, pod label true", pod({ "sidecar.istio.io/inject": "true" }), ctx(), true],
    [
      "unlabelled namespace, pod annotation true only",
      pod({}, { "sidecar.istio.io/inject": "true" }),
      ctx(),
      false,
    ],
    [
      "unlabelled namespace, pod istio.io/rev matching",
      pod({ "istio.io/rev": "canary" }),
      ctx({ revision: "canary" }),
      true,
    ],
    ["unlabelled namespace, pod istio.io/rev other", pod({ "istio.io/rev": "canary" }), ctx(), false],
    [
      "pod label false",
      pod({ "sidecar.istio.io/inject": "false" }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    [
      "pod annotation false",
      pod({}, { "sidecar.istio.io/inject": "false" }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    [
      "pod label true wins over annotation false",
      pod({ "sidecar.istio.io/inject": "true" }, { "sidecar.istio.io/inject": "false" }),
      ctx({ namespaceLabels: enabled }),
      true,
    ],
    [
      "pod label false wins over annotation true",
      pod({ "sidecar.istio.io/inject": "false" }, { "sidecar.istio.io/inject": "true" }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    [
      "pod annotation true in enabled namespace",
      pod({}, { "sidecar.istio.io/inject": "true" }),
      ctx({ namespaceLabels: enabled }),
      true,
    ],
    [
      "pod label with another word refuses",
      pod({ "sidecar.istio.io/inject": "maybe" }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    ["hostNetwork pod", pod({}, {}, { hostNetwork: true }), ctx({ namespaceLabels: enabled }), false],
    [
      "hostNetwork beats pod label true",
      pod({ "sidecar.istio.io/inject": "true" }, {}, { hostNetwork: true }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    [
      "kube-system",
      pod({ "sidecar.istio.io/inject": "true" }),
      ctx({ namespace: "kube-system", namespaceLabels: enabled }),
      false,
    ],
    ["kube-public", pod(), ctx({ namespace: "kube-public", namespaceLabels: enabled }), false],
    ["kube-node-lease", pod(), ctx({ namespace: "kube-node-lease", namespaceLabels: enabled }), false],
    ["local-path-storage", pod(), ctx({ namespace: "local-path-storage", namespaceLabels: enabled }), false],
    [
      "already injected (status annotation)",
      pod({}, { [STATUS_ANNOTATION]: "{}" }),
      ctx({ namespaceLabels: enabled }),
      false,
    ],
    [
      "an istio-proxy container is an override, not an injection",
      { spec: { containers: [{ name: "app" }, { name: "istio-proxy" }] } },
      ctx({ namespaceLabels: enabled }),
      true,
    ],
    [
      "namespace labels unknown: the webhook configuration selected it",
      pod(),
      ctx({ namespaceLabels: undefined }),
      true,
    ],
    [
      "namespace labels unknown, pod label false",
      pod({ "sidecar.istio.io/inject": "false" }),
      ctx({ namespaceLabels: undefined }),
      false,
    ],
  ];
  for (const [name, p, context, expected] of table) {
    it(name, () => {
      const decision = injectionRequired(p, context);
      assert.equal(decision.inject, expected, decision.reason);
      assert.ok(decision.reason.length > 0);
    });
  }
});

describe("template", () => {
  it("substitutes typed values, drops undefined ones and rejects unknown placeholders", () => {
    const out = render(
      { a: "${x}", b: "n-${y}", c: ["${u}", "k"], d: "${u}" },
      { x: { z: 1 }, y: 2, u: undefined },
    );
    assert.deepEqual(out, { a: { z: 1 }, b: "n-2", c: ["k"] });
    assert.throws(() => render({ a: "${nope}" }, {}), /unknown placeholder/);
  });

  it("the bundled template parses and has a version; a broken one is refused", () => {
    assert.ok(loadTemplate().version);
    assert.throws(() => parseTemplate("version: 1\n"), /must be a mapping|version/);
    assert.throws(() => parseTemplate("- a\n"), /mapping/);
  });
});

describe("the Kubernetes schema check used on patched pods", () => {
  it("finds an unknown field and a value of the wrong type", async () => {
    const { schemaProblems } = await import("./kube-schema.js");
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p" },
      spec: {
        containers: [{ name: "c", image: "i", readinessProbes: [], ports: [{ containerPort: "15090" }] }],
      },
    };
    assert.deepEqual(schemaProblems(pod, "V1Pod"), [
      "spec.containers[0].readinessProbes: not a field of V1Container",
      "spec.containers[0].ports[0].containerPort: expected a number",
    ]);
  });
});
