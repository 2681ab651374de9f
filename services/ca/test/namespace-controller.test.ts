import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { type StartedService, startService } from "@sextant/runtime";
import {
  eventually,
  type FakeKubeApiServer,
  freePort,
  type NatsServerFixture,
  startFakeKubeApiServer,
  startNatsServer,
} from "@sextant/testing";
import { caService } from "../src/main.js";
import { CA_ROOT_CERT_CONFIGMAP, ROOT_CERT_KEY } from "../src/namespaces/namespace-controller.js";
import { loadOrCreateCaMaterial } from "../src/pki/ca-material.js";
import type { CaSettings } from "../src/settings.js";
import { trustBundleKey } from "../src/trust/trust-bundle.js";

let nats: NatsServerFixture;
let kube: FakeKubeApiServer;
let ca: StartedService<CaSettings> | undefined;
let bus: Bus;
let caDir: string;
let env: Record<string, string>;
let rootPem: string;

type ConfigMap = {
  metadata: { labels?: Record<string, string>; resourceVersion?: string };
  data?: Record<string, string>;
};

const configMapRef = (namespace: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  name: CA_ROOT_CERT_CONFIGMAP,
  namespace,
});

function configMap(namespace: string): ConfigMap | undefined {
  return kube.get(configMapRef(namespace)) as ConfigMap | undefined;
}

/** Waits until the namespace's ConfigMap holds exactly pem. */
function rootCertOf(namespace: string, pem: string): Promise<ConfigMap> {
  return eventually(
    () => (configMap(namespace)?.data?.[ROOT_CERT_KEY] === pem ? configMap(namespace) : undefined),
    {
      message: `${CA_ROOT_CERT_CONFIGMAP} in ${namespace} does not hold the expected roots: ${JSON.stringify(configMap(namespace)?.data)}`,
    },
  );
}

function addNamespace(name: string, phase?: string): void {
  kube.apply({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name },
    ...(phase ? { status: { phase } } : {}),
  });
}

before(async () => {
  nats = await startNatsServer();
  kube = await startFakeKubeApiServer({
    namespaces: ["default", "kube-system", "kube-public", "kube-node-lease", "bookinfo"],
  });
  const work = mkdtempSync(join(tmpdir(), "sextant-ca-namespaces-"));
  caDir = join(work, "cacerts");
  writeFileSync(join(work, "kubeconfig"), kube.kubeconfigYaml());
  // KUBECONFIG alone turns the controller on: ENABLE_NAMESPACE_CONTROLLER's default.
  env = {
    NATS_URL: nats.url,
    HTTP_PORT: "0",
    GRPC_PORT: String(await freePort()),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    CA_CERTS_DIR: caDir,
    KUBECONFIG: join(work, "kubeconfig"),
    CA_AUTHENTICATORS: "mesh-certificate",
  };
  ca = await startService(caService, env);
  rootPem = readFileSync(join(caDir, "root-cert.pem"), "utf8");
  bus = await connectBus({
    url: nats.url,
    name: "ca-namespace-controller-test",
    logger: createLogger({ service: "test", level: "silent" }),
  });
});

after(async () => {
  await bus?.close();
  await ca?.stop();
  await kube?.close();
  await nats?.dispose();
});

describe("istio-ca-root-cert in every namespace", () => {
  test("every namespace has it, labelled as Istio's, but the ones Istio skips", async () => {
    for (const namespace of ["default", "kube-system", "bookinfo"]) {
      const cm = await rootCertOf(namespace, rootPem);
      assert.deepEqual(cm.metadata.labels, { "istio.io/config": "true" });
      assert.deepEqual(Object.keys(cm.data ?? {}), [ROOT_CERT_KEY]);
    }
    for (const namespace of ["kube-public", "kube-node-lease"])
      assert.equal(configMap(namespace), undefined, namespace);
  });

  test("a namespace created later gets it; a terminating one does not", async () => {
    addNamespace("leaving", "Terminating");
    addNamespace("reviews");
    await rootCertOf("reviews", rootPem);
    // One queue in event order: "leaving" was handled before "reviews".
    assert.equal(configMap("leaving"), undefined);
  });

  test("a deleted ConfigMap comes back", async () => {
    await rootCertOf("bookinfo", rootPem);
    kube.delete(configMapRef("bookinfo"));
    await rootCertOf("bookinfo", rootPem);
  });

  test("an edited root-cert.pem is put back; a key someone added stays", async () => {
    const current = await rootCertOf("default", rootPem);
    kube.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { ...current.metadata, name: CA_ROOT_CERT_CONFIGMAP, namespace: "default" },
      data: { [ROOT_CERT_KEY]: "not a certificate", extra: "kept" },
    });
    const restored = await rootCertOf("default", rootPem);
    assert.equal(restored.data?.extra, "kept");
  });

  test("a change of the trust bundle reaches every namespace at once", async () => {
    const other = loadOrCreateCaMaterial({
      dir: mkdtempSync(join(tmpdir(), "sextant-ca-other-root-")),
      trustDomain: "cluster.local",
      rootTtlSeconds: 86_400,
    }).root.toString();
    const bucket = await bus.bucket(Buckets.trust);
    await bucket.update(trustBundleKey("cluster.local"), (current) => ({
      trustDomain: "cluster.local",
      anchors: [...(current?.anchors ?? []), { certificatePem: other, notAfter: undefined, active: false }],
    }));
    for (const namespace of ["default", "kube-system", "bookinfo", "reviews"])
      await rootCertOf(namespace, `${rootPem}${other}`);
  });

  test("after a root rotation (new cacerts, restart) every namespace has the new root first, then the old", async () => {
    await ca?.stop();
    ca = undefined;
    const bucket = await bus.bucket(Buckets.trust);
    // Back to the CA's own bundle, as before the previous test.
    await bucket.update(trustBundleKey("cluster.local"), (current) => ({
      trustDomain: "cluster.local",
      anchors: (current?.anchors ?? []).filter((a) => a.certificatePem === rootPem),
    }));
    const newDir = mkdtempSync(join(tmpdir(), "sextant-ca-new-root-"));
    const newRoot = loadOrCreateCaMaterial({
      dir: newDir,
      trustDomain: "cluster.local",
      rootTtlSeconds: 86_400,
    }).root.toString();
    rmSync(caDir, { recursive: true });
    cpSync(newDir, caDir, { recursive: true });
    ca = await startService(caService, env);
    for (const namespace of ["default", "kube-system", "bookinfo", "reviews"])
      await rootCertOf(namespace, `${newRoot}${rootPem}`);
  });
});

describe("what the controller asks of the API server", () => {
  test("list and watch of namespaces; list, watch, create and update of its ConfigMaps only (deploy/ca/base/rbac.yaml grants these)", () => {
    const asked = new Set(
      kube
        .requests()
        .filter((r) => r.verb)
        .map((r) => `${r.verb} ${r.resource}${r.resource === "configmaps" && r.name ? `/${r.name}` : ""}`),
    );
    assert.deepEqual([...asked].sort(), [
      "create configmaps",
      "list configmaps",
      "list namespaces",
      `update configmaps/${CA_ROOT_CERT_CONFIGMAP}`,
      "watch configmaps",
      "watch namespaces",
    ]);
    // Its ConfigMap informer asks for the one name only.
    for (const r of kube.requestsMatching({ resource: "configmaps", verb: "watch" }))
      assert.equal(r.query.fieldSelector, `metadata.name=${CA_ROOT_CERT_CONFIGMAP}`);
  });
});

describe("ENABLE_NAMESPACE_CONTROLLER", () => {
  test("defaults to on with Kubernetes, off without; false turns it off", async () => {
    const { caSettings } = await import("../src/settings.js");
    const parse = (more: Record<string, string>) =>
      caSettings.parse({ CA_AUTHENTICATORS: "mesh-certificate", ...more }).ENABLE_NAMESPACE_CONTROLLER;
    assert.equal(parse({ KUBECONFIG: "/kubeconfig" }), true);
    assert.equal(parse({}), process.env.KUBERNETES_SERVICE_HOST !== undefined);
    assert.equal(parse({ KUBECONFIG: "/kubeconfig", ENABLE_NAMESPACE_CONTROLLER: "false" }), false);
    const refused = caSettings.safeParse({ ENABLE_NAMESPACE_CONTROLLER: "yes" });
    assert.deepEqual(
      refused.error?.issues.map((issue) => [issue.path.join("."), issue.message]),
      [["ENABLE_NAMESPACE_CONTROLLER", 'must be "true" or "false"']],
    );
  });
});
