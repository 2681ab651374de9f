import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { repositoryRoot } from "@sextant/testing";
import { parse, parseAllDocuments, stringify } from "yaml";
import { runCli } from "./capture.js";

/** The webhook's injection goldens: an AdmissionReview (or a Pod) in, the injected pod out. */
const goldens = join(repositoryRoot(), "services", "webhook", "test", "testdata", "inject");
const directory = mkdtempSync(join(tmpdir(), "sextantctl-inject-"));

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects, compared whole.
type Json = any;

/** A golden case's pod, with the namespace its AdmissionReview gave it. */
function goldenPod(name: string): Json {
  const input = parse(readFileSync(join(goldens, `${name}.in.yaml`), "utf8"));
  if (input.kind === "Pod") return input;
  const pod = input.request.object;
  return { ...pod, metadata: { ...pod.metadata, namespace: input.request.namespace } };
}

function goldenResult(name: string): Json {
  return parse(readFileSync(join(goldens, `${name}.pod.out.yaml`), "utf8"));
}

async function kubeInject(name: string, ...objects: Json[]): Promise<Json[]> {
  const path = join(directory, name);
  writeFileSync(path, objects.map((object) => stringify(object)).join("---\n"));
  const run = await runCli(["kube-inject", "-f", path]);
  assert.equal(run.exitCode, 0, run.stderr);
  return parseAllDocuments(run.stdout).map((document) => document.toJS());
}

const withoutNamespace = ({ metadata: { namespace: _, ...metadata }, ...pod }: Json) => ({
  ...pod,
  metadata,
});

describe("sextantctl kube-inject", () => {
  const cases = readdirSync(goldens)
    .filter((file) => file.endsWith(".pod.out.yaml"))
    .map((file) => file.slice(0, -".pod.out.yaml".length));

  it("injects each golden case's pod exactly as the webhook's patch does", async () => {
    assert.ok(cases.length > 5);
    for (const name of cases) {
      const [injected] = await kubeInject(`${name}.yaml`, goldenPod(name));
      const expected = goldenResult(name);
      assert.deepEqual(
        expected.metadata.namespace === undefined ? withoutNamespace(injected) : injected,
        expected,
        name,
      );
    }
  });

  it("injects a Deployment's pod template as the webhook injects its pods; other kinds pass through", async () => {
    // details-v1's pod came from this Deployment; the template's pod is the same without the ReplicaSet's marks.
    const { generateName: _, ownerReferences: __, namespace, ...template } = goldenPod("details-v1").metadata;
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "details-v1", namespace },
      spec: {
        selector: { matchLabels: { app: "details" } },
        template: { metadata: template, spec: goldenPod("details-v1").spec },
      },
    };
    const service = {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "details" },
      spec: { ports: [{ port: 9080 }] },
    };
    const [injected, unchanged] = await kubeInject("details.yaml", deployment, service);
    const {
      generateName: ___,
      ownerReferences: ____,
      ...expectedMetadata
    } = goldenResult("details-v1").metadata;
    assert.deepEqual(injected.spec.template, {
      metadata: expectedMetadata,
      spec: goldenResult("details-v1").spec,
    });
    assert.deepEqual(injected.metadata, deployment.metadata);
    assert.deepEqual(unchanged, service);
  });

  it("commander's own usage errors (no -f) exit 2, as the usage errors sextantctl finds", () => {
    const main = join(import.meta.dirname, "..", "src", "main.ts");
    const child = spawnSync(
      process.execPath,
      ["--conditions=@sextant/source", "--import", "tsx", main, "kube-inject"],
      {
        encoding: "utf8",
      },
    );
    assert.equal(child.status, 2);
    assert.match(child.stderr, /required option '-f, --filename <path\.\.\.>' not specified/);
  });

  it("merges the ProxyConfigs among the files as the webhook merges the stored ones; an invalid one exits 1", async () => {
    const proxyConfig = (name: string, spec: Json, namespace = "shop") => ({
      apiVersion: "networking.istio.io/v1beta1",
      kind: "ProxyConfig",
      metadata: { name, namespace },
      spec,
    });
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "web-0", namespace: "shop", labels: { app: "web" } },
      spec: { containers: [{ name: "app", image: "example/web:1" }] },
    };
    const [namespaceWide, injected] = await kubeInject(
      "proxyconfig.yaml",
      proxyConfig("shop", { concurrency: 2, image: { imageType: "debug" } }),
      pod,
      proxyConfig("web", { selector: { matchLabels: { app: "web" } }, environmentVariables: { A: "b" } }),
    );
    assert.equal(namespaceWide.kind, "ProxyConfig", "ProxyConfigs pass through");
    const proxy = injected.spec.containers.find((c: Json) => c.name === "istio-proxy");
    assert.match(proxy.image, /-debug$/);
    const env = (name: string) => proxy.env.find((e: Json) => e.name === name)?.value;
    assert.equal(JSON.parse(env("PROXY_CONFIG")).concurrency, 2);
    assert.equal(env("A"), "b");

    const path = join(directory, "bad-proxyconfig.yaml");
    writeFileSync(
      path,
      [proxyConfig("bad", { concurrency: -1 }), pod].map((o) => stringify(o)).join("---\n"),
    );
    const run = await runCli(["kube-inject", "-f", path]);
    assert.equal(run.exitCode, 1);
    assert.match(run.stderr, /ProxyConfig shop\/bad is invalid: spec.concurrency/);
  });

  it("a pod whose injection annotations are invalid: the webhook's refusal, at its file, exit 1", async () => {
    const path = join(directory, "refused.yaml");
    writeFileSync(path, stringify(goldenPod("refused-bad-annotations")));
    const run = await runCli(["kube-inject", "-f", path]);
    assert.equal(run.exitCode, 1);
    assert.match(run.stderr, new RegExp(`^error: ${path}:1 \\(Pod .*\\): .+; fix the annotation$`));
    assert.equal(run.stdout, "");
  });
});
