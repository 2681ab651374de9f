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
  type PodJson,
  parseTemplate,
  render,
  type SelectionContext,
  STATUS_ANNOTATION,
} from "../src/inject/index.js";
import { bookinfoDeployments, podCreateReview } from "./bookinfo.js";
import { assertValidPodSpec } from "./helpers.js";

const testdata = join(import.meta.dirname, "testdata", "inject");
const config = defaultInjectionConfig();

describe("injection goldens (Bookinfo's Deployments)", () => {
  it("each AdmissionReview gives the expected patch, and the patched pod is valid", () => {
    const produced = checkGoldenDir(testdata, (testCase) => {
      const review = parse(testCase.input);
      const parsed = parseReview(review);
      assert.ok(parsed.ok, testCase.name);
      const response = admitInjection(parsed.request, config);
      assert.equal(response.allowed, true, testCase.name);
      assert.equal(response.patchType, "JSONPatch");
      const patch = JSON.parse(Buffer.from(response.patch!, "base64").toString("utf8"));
      const pod = jsonPatch.applyPatch(structuredClone(parsed.request.object), patch, true, false)
        .newDocument as any;
      assertValidPodSpec(pod);
      const native = testCase.name.startsWith("native-sidecar");
      const proxy = (native ? pod.spec.initContainers : pod.spec.containers).find(
        (c: any) => c.name === "istio-proxy",
      );
      assert.ok(proxy, `${testCase.name}: no istio-proxy`);
      assert.equal(pod.spec.initContainers[0].name, "istio-init");
      assert.equal(proxy.securityContext.runAsUser, 1337);
      assert.deepEqual(
        proxy.ports.map((p: any) => p.containerPort),
        [15090, 15021],
      );
      assert.equal(proxy.readinessProbe.httpGet.path, "/healthz/ready");
      assert.equal(proxy.readinessProbe.httpGet.port, 15021);
      if (native) assert.equal(proxy.restartPolicy, "Always");
      const token = pod.spec.volumes.find((v: any) => v.name === "istio-token");
      assert.equal(token.projected.sources[0].serviceAccountToken.audience, "istio-ca");
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

  it("honours the per-pod annotations", () => {
    const review = parse(readFileSync(join(testdata, "annotations-reviews-v2.in.yaml"), "utf8"));
    const { pod } = injectPod(review.request.object, { namespace: "bookinfo" }, config);
    const proxy = pod.spec!.containers!.find((c) => c.name === "istio-proxy") as any;
    const init = pod.spec!.initContainers![0] as any;
    assert.equal(proxy.image, "example.com/proxy:custom");
    assert.equal(init.image, "example.com/proxy:custom");
    assert.deepEqual(proxy.resources, {
      requests: { cpu: "250m", memory: "128Mi" },
      limits: { cpu: "2000m", memory: "512Mi" },
    });
    const arg = (flag: string) => init.args[init.args.indexOf(flag) + 1];
    assert.equal(arg("-o"), "3306,6379");
    assert.equal(arg("-d"), "15090,15021,15020,9443");
    assert.equal(arg("-i"), "10.0.0.0/8,172.16.0.0/12");
    assert.equal(arg("-p"), "15001");
    assert.equal(arg("-z"), "15006");
    assert.equal(arg("-u"), "1337");
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
      "already injected (istio-proxy container)",
      { spec: { containers: [{ name: "app" }, { name: "istio-proxy" }] } },
      ctx({ namespaceLabels: enabled }),
      false,
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
