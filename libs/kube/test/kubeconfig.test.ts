import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { after, describe, it } from "node:test";
import { kubernetesAvailable, loadKubeConfig } from "../src/index.js";

const kubeconfig = (cluster: string, server: string, user: string) => `apiVersion: v1
kind: Config
clusters:
  - name: ${cluster}
    cluster: { server: "${server}" }
users:
  - name: ${user}
    user: { token: "${user}-token" }
contexts:
  - name: ${cluster}
    context: { cluster: ${cluster}, user: ${user} }
current-context: ${cluster}
`;

describe("loadKubeConfig", () => {
  const dir = mkdtempSync(join(tmpdir(), "sextant-kubeconfig-"));
  const first = join(dir, "first");
  const second = join(dir, "second");
  writeFileSync(first, kubeconfig("one", "https://one.example:6443", "alice"));
  writeFileSync(second, kubeconfig("two", "https://two.example:6443", "bob"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("reads one file", () => {
    const config = loadKubeConfig(first);
    assert.equal(config.getCurrentContext(), "one");
    assert.equal(config.getCurrentCluster()?.server, "https://one.example:6443");
    assert.equal(config.getCurrentUser()?.token, "alice-token");
  });

  it("merges a path list as kubectl does: the first file's current context, every file's entries", () => {
    const config = loadKubeConfig([first, "", second].join(delimiter));
    assert.equal(config.getCurrentContext(), "one");
    assert.deepEqual(
      config.getClusters().map((cluster) => cluster.name),
      ["one", "two"],
    );
    assert.equal(config.getUser("bob")?.token, "bob-token");
  });

  it("falls back to client-node's defaults, which read KUBECONFIG", () => {
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = second;
    try {
      assert.equal(loadKubeConfig().getCurrentContext(), "two");
      assert.equal(loadKubeConfig("").getCurrentContext(), "two");
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it("throws for a file that does not exist", () => {
    assert.throws(() => loadKubeConfig(join(dir, "missing")));
  });
});

describe("kubernetesAvailable", () => {
  it("is true with a kubeconfig or inside a pod, false otherwise", () => {
    assert.equal(kubernetesAvailable("/etc/kubeconfig", {}), true);
    assert.equal(kubernetesAvailable(undefined, { KUBERNETES_SERVICE_HOST: "10.96.0.1" }), true);
    assert.equal(kubernetesAvailable(undefined, {}), false);
    assert.equal(kubernetesAvailable("", {}), false);
  });
});
