import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { V1EndpointSlice, V1Namespace, V1Node, V1Pod, V1Service } from "@kubernetes/client-node";
import { EndpointShard, HealthStatus, Protocol, Service } from "@sextant/proto";
import type { ServiceEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import type { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import { checkGoldenDir, type GoldenCase } from "@sextant/testing";
import { decodeSpec, parseDocuments } from "@sextant/validation";
import {
  endpointsFromSlices,
  exportToOf,
  healthOf,
  localityOf,
  networkOf,
  podDnsIdentity,
  serviceFromKube,
  supportsDraining,
  workloadNameOf,
} from "../src/kube/translate.js";
import { inferKubeProtocol, parseProtocol } from "../src/registry/protocol.js";
import { type Named, translateServiceEntry } from "../src/serviceentry/translate.js";

// biome-ignore lint/suspicious/noExplicitAny: test documents are plain JSON.
type Doc = Record<string, any>;

const testdata = (dir: string) => fileURLToPath(new URL(`testdata/${dir}`, import.meta.url));
const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function documents(testCase: GoldenCase): Doc[] {
  const parsed = parseDocuments(testCase.input, { maxDocuments: 100 });
  assert.deepEqual(parsed.errors, [], `${testCase.name} parses`);
  return parsed.documents.map((doc) => doc.value as Doc);
}

function named<T>(doc: Doc): Named<T> {
  const decoded = decodeSpec<T>(doc.kind, doc.spec);
  assert.deepEqual(decoded.errors, [], `${doc.kind} ${doc.metadata.name} decodes`);
  return {
    namespace: doc.metadata.namespace ?? "default",
    name: doc.metadata.name,
    labels: doc.metadata.labels ?? {},
    spec: decoded.value as T,
  };
}

describe("protocol inference, as Istio does it", () => {
  const cases: Array<[string, Parameters<typeof inferKubeProtocol>[0], Protocol]> = [
    ["name http", { port: 80, name: "http" }, Protocol.PROTOCOL_HTTP],
    ["prefix http-", { port: 80, name: "http-web" }, Protocol.PROTOCOL_HTTP],
    ["prefix is case-insensitive", { port: 80, name: "HTTP2-x" }, Protocol.PROTOCOL_HTTP2],
    ["grpc", { port: 80, name: "grpc-api" }, Protocol.PROTOCOL_GRPC],
    ["grpc-web whole", { port: 80, name: "grpc-web-ui" }, Protocol.PROTOCOL_GRPC_WEB],
    ["https", { port: 443, name: "https" }, Protocol.PROTOCOL_HTTPS],
    ["tls", { port: 443, name: "tls-x" }, Protocol.PROTOCOL_TLS],
    ["tcp", { port: 1, name: "tcp" }, Protocol.PROTOCOL_TCP],
    ["mongo", { port: 1, name: "mongo" }, Protocol.PROTOCOL_MONGO],
    ["redis", { port: 1, name: "redis-cache" }, Protocol.PROTOCOL_REDIS],
    ["mysql", { port: 1, name: "mysql" }, Protocol.PROTOCOL_MYSQL],
    ["no dash, no prefix", { port: 80, name: "http2foo" }, Protocol.PROTOCOL_UNSPECIFIED],
    ["unnamed", { port: 8080 }, Protocol.PROTOCOL_UNSPECIFIED],
    ["unknown name on a well-known port is TCP", { port: 3306, name: "db" }, Protocol.PROTOCOL_TCP],
    ["unnamed DNS port is TCP", { port: 53 }, Protocol.PROTOCOL_TCP],
    ["UDP port", { port: 53, name: "http", protocol: "UDP" }, Protocol.PROTOCOL_UDP],
    // Istio pkg/config/kube/conversion.go ConvertProtocol: after the UDP IP
    // protocol and appProtocol, the name prefix goes through protocol.Parse,
    // whose "udp" is UDP, whatever the IP protocol (TCP by default).
    ["udp name on a TCP port is UDP", { port: 9, name: "udp-stats" }, Protocol.PROTOCOL_UDP],
    [
      "udp name on an explicit TCP port is UDP",
      { port: 9, name: "udp", protocol: "TCP" },
      Protocol.PROTOCOL_UDP,
    ],
    ["appProtocol udp is UDP", { port: 9, name: "http", appProtocol: "udp" }, Protocol.PROTOCOL_UDP],
    [
      "appProtocol wins over a udp name",
      { port: 9, name: "udp-x", appProtocol: "http" },
      Protocol.PROTOCOL_HTTP,
    ],
    [
      "appProtocol wins over the name",
      { port: 80, name: "http", appProtocol: "grpc" },
      Protocol.PROTOCOL_GRPC,
    ],
    ["appProtocol h2c", { port: 80, name: "web", appProtocol: "kubernetes.io/h2c" }, Protocol.PROTOCOL_HTTP2],
    ["appProtocol ws", { port: 80, appProtocol: "kubernetes.io/ws" }, Protocol.PROTOCOL_HTTP],
    ["appProtocol wss", { port: 80, appProtocol: "kubernetes.io/wss" }, Protocol.PROTOCOL_HTTPS],
    [
      "unknown appProtocol",
      { port: 80, name: "http", appProtocol: "example.com/x" },
      Protocol.PROTOCOL_UNSPECIFIED,
    ],
  ];
  for (const [name, port, expected] of cases) it(name, () => assert.equal(inferKubeProtocol(port), expected));

  it("parses ServiceEntry protocol names case-insensitively", () => {
    assert.equal(parseProtocol("HTTP"), Protocol.PROTOCOL_HTTP);
    assert.equal(parseProtocol("GRPC-Web"), Protocol.PROTOCOL_GRPC_WEB);
    assert.equal(parseProtocol("THRIFT"), Protocol.PROTOCOL_UNSPECIFIED);
  });
});

describe("Kubernetes translation helpers", () => {
  it("reads health from EndpointSlice conditions as Istio's endpointHealthStatus does", () => {
    // pilot/pkg/serviceregistry/kube/controller/endpointslice.go,
    // endpointHealthStatus: ready (or no ready condition) is Healthy; an absent
    // serving/terminating condition counts as true; serving+terminating is
    // Draining only when the Service SupportsDrainingEndpoints (persistent
    // sessions), else any terminating endpoint is Terminating (model.Terminating,
    // Istio >= 1.25); not ready and not terminating is UnHealthy.
    assert.equal(healthOf(undefined), HealthStatus.HEALTH_STATUS_HEALTHY);
    assert.equal(healthOf({ ready: true }), HealthStatus.HEALTH_STATUS_HEALTHY);
    assert.equal(healthOf({ ready: true, terminating: true }), HealthStatus.HEALTH_STATUS_HEALTHY);
    assert.equal(
      healthOf({ ready: false, serving: false, terminating: false }),
      HealthStatus.HEALTH_STATUS_UNHEALTHY,
    );
    assert.equal(healthOf({ ready: false }), HealthStatus.HEALTH_STATUS_TERMINATING);
    const servingTerminating = { ready: false, serving: true, terminating: true };
    assert.equal(healthOf(servingTerminating), HealthStatus.HEALTH_STATUS_TERMINATING);
    assert.equal(healthOf(servingTerminating, true), HealthStatus.HEALTH_STATUS_DRAINING);
    assert.equal(
      healthOf({ ready: false, serving: false, terminating: true }, true),
      HealthStatus.HEALTH_STATUS_TERMINATING,
    );
    assert.equal(
      healthOf({ ready: false, serving: true, terminating: false }, true),
      HealthStatus.HEALTH_STATUS_UNHEALTHY,
    );
  });

  it("drains only for Services with Istio's persistent-session labels (Service.SupportsDrainingEndpoints)", () => {
    assert.equal(supportsDraining({ "istio.io/persistent-session": "JSESSIONID" }), true);
    assert.equal(supportsDraining({ "istio.io/persistent-session-header": "x-session" }), true);
    assert.equal(supportsDraining({ "istio.io/persistent-session": "" }), false);
    assert.equal(supportsDraining({ app: "web" }), false);
  });

  it("places a workload on its own network label, then the system namespace's, then the default (Controller.Network)", () => {
    const system = { metadata: { name: "istio-system", labels: { "topology.istio.io/network": "sys" } } };
    assert.equal(networkOf({ "topology.istio.io/network": "own" }, system, "mesh"), "own");
    assert.equal(networkOf({ "topology.istio.io/network": "" }, system, "mesh"), "sys");
    assert.equal(networkOf({}, system, "mesh"), "sys");
    assert.equal(networkOf({}, undefined, "mesh"), "mesh");
  });

  it("keeps a pod's DNS hostname only with a subdomain, as istiod's NewEndpointBuilder", () => {
    const pod = (spec: Record<string, string>) => ({
      metadata: { name: "web-0" },
      spec: { containers: [], ...spec },
    });
    assert.deepEqual(podDnsIdentity(pod({ subdomain: "web" })), { hostname: "web-0", subdomain: "web" });
    assert.deepEqual(podDnsIdentity(pod({ subdomain: "web", hostname: "db" })), {
      hostname: "db",
      subdomain: "web",
    });
    assert.deepEqual(podDnsIdentity(pod({ hostname: "db" })), {});
    assert.deepEqual(podDnsIdentity(undefined), {});
  });

  it("reads locality from the pod label, else the node's labels, else the slice's zone", () => {
    const node = {
      metadata: {
        labels: { "failure-domain.beta.kubernetes.io/region": "old", "topology.kubernetes.io/zone": "z" },
      },
    };
    assert.deepEqual(localityOf(undefined, node), { region: "old", zone: "z", subzone: "" });
    assert.deepEqual(localityOf({ metadata: { labels: { "istio-locality": "a.b.c" } } }, node), {
      region: "a",
      zone: "b",
      subzone: "c",
    });
    assert.deepEqual(localityOf(undefined, undefined, "z9"), { region: "", zone: "z9", subzone: "" });
  });

  it("names the workload after the Deployment, the owner, or the pod", () => {
    const pod = (labels: Record<string, string>, owner?: { kind: string; name: string }) => ({
      metadata: {
        name: "p",
        labels,
        ownerReferences: owner ? [{ ...owner, apiVersion: "v1", uid: "u", controller: true }] : undefined,
      },
    });
    assert.equal(
      workloadNameOf(pod({ "pod-template-hash": "abc" }, { kind: "ReplicaSet", name: "web-abc" })),
      "web",
    );
    assert.equal(workloadNameOf(pod({}, { kind: "StatefulSet", name: "db" })), "db");
    assert.equal(workloadNameOf(pod({})), "p");
  });

  it("reads exportTo from the annotation", () => {
    assert.deepEqual(exportToOf({ "networking.istio.io/exportTo": " b, a ,," }), ["a", "b"]);
    assert.deepEqual(exportToOf({}), []);
  });
});

describe("golden translations", () => {
  it("translates Kubernetes Services and EndpointSlices (testdata/kube)", () => {
    const produced = checkGoldenDir(testdata("kube"), (testCase) => {
      const docs = documents(testCase);
      const of = <T>(kind: string) => docs.filter((doc) => doc.kind === kind) as T[];
      const pods = new Map(
        of<V1Pod>("Pod").map((pod) => [`${pod.metadata?.namespace}/${pod.metadata?.name}`, pod]),
      );
      const nodes = new Map(of<V1Node>("Node").map((node) => [node.metadata?.name, node]));
      const namespaces = new Map(of<V1Namespace>("Namespace").map((ns) => [ns.metadata?.name, ns]));
      const lookup = {
        pod: (ns: string, name: string) => pods.get(`${ns}/${name}`),
        node: (name: string) => nodes.get(name),
        namespace: (name: string) => namespaces.get(name),
      };
      const options = {
        domainSuffix: "cluster.local",
        network: "default-net",
        systemNamespace: "istio-system",
      };
      const services = of<V1Service>("Service");
      return {
        services: json(services.map((s) => Service.toJSON(serviceFromKube(s, options)))),
        endpoints: json(
          services.map((s) => ({
            service: s.metadata?.name,
            endpoints: endpointsFromSlices(
              of<V1EndpointSlice>("EndpointSlice").filter(
                (slice) => slice.metadata?.labels?.["kubernetes.io/service-name"] === s.metadata?.name,
              ),
              lookup,
              options,
              supportsDraining(s.metadata?.labels),
            ).map(
              (e) =>
                (
                  EndpointShard.toJSON({ hostname: "", namespace: "", shard: "", endpoints: [e] }) as {
                    endpoints: unknown[];
                  }
                ).endpoints[0],
            ),
          })),
        ),
      };
    });
    assert.ok(produced.length >= 4);
  });

  it("translates ServiceEntries with the workloads they select (testdata/serviceentry)", () => {
    const produced = checkGoldenDir(testdata("serviceentry"), (testCase) => {
      const docs = documents(testCase);
      const workloadEntries = docs
        .filter((d) => d.kind === "WorkloadEntry")
        .map((d) => named<WorkloadEntry>(d));
      const pods = docs.filter((d) => d.kind === "Pod") as V1Pod[];
      const outputs = docs
        .filter((d) => d.kind === "ServiceEntry")
        .map((d) =>
          translateServiceEntry(named<ServiceEntry>(d), { workloadEntries, pods }, { network: "" }),
        );
      return {
        services: json(outputs.flatMap((o) => o.services.map((s) => Service.toJSON(s)))),
        endpoints: json(outputs.flatMap((o) => o.endpoints.map((e) => EndpointShard.toJSON(e)))),
      };
    });
    assert.ok(produced.length >= 10);
  });
});
