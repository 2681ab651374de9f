import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { TypeUrl } from "@sextant/proto/envoy";
import { DEBUG_TOKEN, eventually, expectGolden } from "@sextant/testing";
import { runCli } from "./capture.js";
import { FakeProxy, grpcSubscriptions } from "./fake-proxy.js";
import { HOST, type ProxyMesh, startProxyMesh } from "./mesh.js";

const TESTDATA = join(import.meta.dirname, "testdata");

/** Subsets v1 and v2, and a route sending jason to v2 and everyone else to v1. */
const ROUTING_YAML = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${HOST}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${HOST}]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: ${HOST}, subset: v2}}]
  - route: [{destination: {host: ${HOST}, subset: v1}}]
`;

describe("sextantctl proxy-config", () => {
  let mesh: ProxyMesh;
  const proxies: FakeProxy[] = [];
  const cli = (...args: string[]) => runCli(["--push", mesh.pushUrls[0]!, "--token", DEBUG_TOKEN, ...args]);

  before(async () => {
    mesh = await startProxyMesh(1, 1_000);
    await mesh.apply(ROUTING_YAML);
    proxies.push(
      new FakeProxy(mesh.xdsAddresses[0]!, "grpc-client", grpcSubscriptions(HOST, 9080, ["v1", "v2"])),
    );
    const clusters = ["", "v1", "v2"].map((subset) => `outbound|9080|${subset}|${HOST}`);
    proxies.push(
      new FakeProxy(
        mesh.xdsAddresses[0]!,
        "productpage-v1",
        {
          [TypeUrl.Cluster]: [],
          [TypeUrl.Listener]: [],
          [TypeUrl.RouteConfiguration]: ["9080"],
          [TypeUrl.ClusterLoadAssignment]: clusters,
        },
        true,
      ),
    );
    // Both proxies have ACKed the routing: every type of both is SYNCED.
    await eventually(
      async () =>
        (await cli("proxy-status")).stdout.split("\n").filter((line) => /(SYNCED\s+){4}/.test(line))
          .length === 2 &&
        (await cli("proxy-config", "endpoints", "grpc-client.default")).stdout.includes("|v2|"),
      { timeoutMs: 30_000, message: "the proxies never synced the routing" },
    );
  });
  after(async () => {
    for (const proxy of proxies) proxy.close();
    await mesh?.close();
  });

  const cases: Array<[string, string[]]> = [
    ["grpc-clusters", ["clusters", "grpc-client.default"]],
    ["grpc-listeners", ["listeners", "grpc-client.default"]],
    ["grpc-routes", ["routes", "grpc-client.default"]],
    ["grpc-endpoints", ["endpoints", "grpc-client.default"]],
    ["grpc-clusters-subset-v2", ["clusters", "grpc-client.default", "--subset", "v2"]],
    ["sidecar-all", ["all", "productpage-v1.default"]],
    [
      "sidecar-clusters-outbound-9080",
      ["clusters", "productpage-v1.default", "--direction", "outbound", "--port", "9080"],
    ],
    ["sidecar-listeners-port-9080", ["listeners", "productpage-v1.default", "--port", "9080"]],
    ["sidecar-routes-name-9080", ["routes", "productpage-v1.default", "--name", "9080"]],
    [
      "sidecar-endpoints-fqdn",
      ["endpoints", "productpage-v1.default", "--fqdn", "reviews", "--subset", "v1"],
    ],
  ];
  for (const [name, args] of cases) {
    it(`prints ${args.join(" ")} as testdata/${name}.txt`, async () => {
      const run = await cli("proxy-config", ...args);
      assert.equal(run.exitCode, 0, run.stderr);
      expectGolden(join(TESTDATA, `${name}.txt`), `${run.stdout}\n`);
    });
  }

  it("prints the full resources with -o json and -o yaml", async () => {
    const json = await cli("proxy-config", "clusters", "grpc-client.default", "-o", "json");
    const clusters = JSON.parse(json.stdout) as Array<{ name: string; "@type": string }>;
    assert.deepEqual(clusters.map((cluster) => cluster.name).sort(), [
      `outbound|9080|v1|${HOST}`,
      `outbound|9080|v2|${HOST}`,
      `outbound|9080||${HOST}`,
    ]);
    assert.ok(clusters.every((cluster) => cluster["@type"] === TypeUrl.Cluster));
    const yaml = await cli("proxy-config", "routes", "grpc-client.default", "-o", "yaml");
    assert.match(
      yaml.stdout,
      /^- "@type": type\.googleapis\.com\/envoy\.config\.route\.v3\.RouteConfiguration$/m,
    );
  });

  it("accepts the full node id and istioctl's short section names", async () => {
    const run = await cli("pc", "c", proxies[0]!.id);
    assert.equal(run.exitCode, 0, run.stderr);
    assert.match(run.stdout, /^SERVICE FQDN\s+PORT\s+SUBSET\s+DIRECTION\s+TYPE\s+DESTINATION RULE$/m);
  });

  it("exits 2 on a usage error, as a process", () => {
    const main = join(import.meta.dirname, "..", "src", "main.ts");
    const run = spawnSync(
      process.execPath,
      ["--conditions=@sextant/source", "--import", "tsx", main, "proxy-config", "bootstraps", "x"],
      { encoding: "utf8" },
    );
    assert.equal(run.status, 2, run.stderr);
    assert.match(
      run.stderr,
      /^error: command-argument value 'bootstraps' is invalid for argument 'section'/m,
    );
  });
});
