// The agent's DNS proxy end to end (issue 19 §4): real nats-server, ca,
// ingest, discovery (reading a fake kube-apiserver) and TWO push replicas,
// and one agent with DNS capture on each replica. Queries go to the agents
// with node's resolver; the pod's nameserver is a resolver on loopback.
import assert from "node:assert/strict";
import { createSocket, type Socket } from "node:dgram";
import { Resolver } from "node:dns/promises";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { eventually, type FakeKubeApiServer, freePort, startFakeKubeApiServer } from "@sextant/testing";
import * as packet from "dns-packet";
import { type Account, type Agent, type SecureMesh, startSecureMesh } from "../src/secure-mesh.js";

const productpage: Account = { namespace: "default", serviceAccount: "bookinfo-productpage" };

/** A Kubernetes Service as the API server holds it once a ClusterIP is assigned. */
const RATINGS_SERVICE = {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "ratings", namespace: "default", labels: { app: "ratings" } },
  spec: {
    type: "ClusterIP",
    clusterIP: "10.96.0.13",
    clusterIPs: ["10.96.0.13"],
    selector: { app: "ratings" },
    ports: [{ name: "http", port: 9080, targetPort: 9080, protocol: "TCP" }],
  },
};

/** A ServiceEntry without addresses: push allocates it one from 240.240.0.0/16 for DNS-capturing proxies. */
const EXTERNAL_API = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external-api, namespace: default}
spec:
  hosts: [api.partner.example]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{number: 80, name: http, protocol: HTTP}]
`;

/** The pod's nameserver: example.org has an address, every other name is NXDOMAIN. Over UDP only: the test asks small names. */
async function startLoopbackResolver(): Promise<{ port: number; socket: Socket }> {
  const socket = createSocket("udp4");
  socket.on("message", (message, peer) => {
    const query = packet.decode(message);
    const question = query.questions![0]!;
    const known = question.name.toLowerCase() === "example.org";
    const reply = packet.encode({
      id: query.id,
      type: "response",
      flags: (query.flags! & packet.RECURSION_DESIRED) | packet.RECURSION_AVAILABLE | (known ? 0 : 3),
      questions: [question],
      answers:
        known && question.type === "A"
          ? [{ type: "A", name: question.name, ttl: 300, class: "IN", data: "192.0.2.10" }]
          : [],
    });
    socket.send(reply, peer.port, peer.address);
  });
  socket.bind(0, "127.0.0.1");
  await new Promise((resolve) => socket.once("listening", resolve));
  return { port: socket.address().port, socket };
}

describe("DNS proxy end to end: two push replicas, one DNS-capturing agent on each", () => {
  let kube: FakeKubeApiServer;
  let mesh: SecureMesh;
  let upstream: { port: number; socket: Socket };
  const agents: Array<{ agent: Agent; dnsPort: number }> = [];

  before(async () => {
    kube = await startFakeKubeApiServer();
    kube.apply(RATINGS_SERVICE);
    const dir = mkdtempSync(join(tmpdir(), "sextant-dns-e2e-"));
    const kubeconfig = join(dir, "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    upstream = await startLoopbackResolver();
    const resolvConf = join(dir, "resolv.conf");
    writeFileSync(
      resolvConf,
      `nameserver 127.0.0.1:${upstream.port}\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n`,
    );
    mesh = await startSecureMesh([productpage], {
      pushReplicas: 2,
      discoveryEnv: { KUBERNETES: "on", KUBECONFIG: kubeconfig },
    });
    await mesh.apply(EXTERNAL_API);
    for (const replica of [0, 1]) {
      const dnsPort = await freePort();
      const agent = await mesh.startAgent({
        pod: `productpage-v1-${replica}`,
        account: productpage,
        ip: `127.0.0.${41 + replica}`,
        labels: { app: "productpage", version: "v1" },
        pushReplica: replica,
        env: {
          ISTIO_META_DNS_CAPTURE: "true",
          ISTIO_META_DNS_AUTO_ALLOCATE: "true",
          DNS_PROXY_ADDR: `127.0.0.1:${dnsPort}`,
          DNS_RESOLV_CONF: resolvConf,
        },
      });
      agents.push({ agent, dnsPort });
    }
  });

  after(async () => {
    await mesh?.close();
    upstream?.socket.close();
    await kube?.close();
  });

  const resolverOf = (dnsPort: number) => {
    const resolver = new Resolver({ timeout: 3_000, tries: 1 });
    resolver.setServers([`127.0.0.1:${dnsPort}`]);
    return resolver;
  };

  it("each agent is ready (its first name table arrived) and listens on its DNS port", async () => {
    for (const { agent } of agents) {
      const response = await fetch(`http://127.0.0.1:${agent.process.httpPort}/healthz/ready`);
      assert.equal(response.status, 200, await response.text());
    }
  });

  it("the ServiceEntry host without addresses answers the same auto-allocated 240.240.x.y from both replicas", async () => {
    const addresses = await Promise.all(
      agents.map(({ dnsPort }) =>
        eventually(
          async () => {
            const answer = await resolverOf(dnsPort)
              .resolve4("api.partner.example")
              .catch((): string[] => []);
            return answer.length > 0 ? answer : undefined;
          },
          { timeoutMs: 30_000, message: `api.partner.example on ${dnsPort}` },
        ),
      ),
    );
    assert.match(addresses[0]![0]!, /^240\.240\.\d+\.\d+$/);
    assert.deepEqual(addresses[0], addresses[1]);
  });

  it("the Kubernetes service by its short name, name.namespace and FQDN", async () => {
    for (const { dnsPort } of agents) {
      const resolver = resolverOf(dnsPort);
      await eventually(
        async () =>
          (await resolver.resolve4("ratings").catch((): string[] => [])).includes("10.96.0.13") || undefined,
        { timeoutMs: 30_000, message: `ratings on ${dnsPort}` },
      );
      assert.deepEqual(await resolver.resolve4("ratings.default"), ["10.96.0.13"]);
      assert.deepEqual(await resolver.resolve4("ratings.default.svc.cluster.local"), ["10.96.0.13"]);
    }
  });

  it("/debug/ndsz on each agent's status port shows the table push sent", async () => {
    for (const { agent } of agents) {
      const response = await fetch(`http://127.0.0.1:${agent.process.httpPort}/debug/ndsz`);
      assert.equal(response.status, 200);
      const view = (await response.json()) as {
        table: Record<string, { ips: string[]; altHosts?: string[] }>;
      };
      assert.deepEqual(view.table["ratings.default.svc.cluster.local"]?.altHosts, [
        "ratings",
        "ratings.default",
        "ratings.default.svc",
      ]);
      assert.match(view.table["api.partner.example"]?.ips[0] ?? "", /^240\.240\./);
    }
  });

  it("example.org goes to the pod's nameserver on loopback; an unknown name is its NXDOMAIN", async () => {
    for (const { dnsPort } of agents) {
      const resolver = resolverOf(dnsPort);
      assert.deepEqual(await resolver.resolve4("example.org"), ["192.0.2.10"]);
      await assert.rejects(resolver.resolve4("nothing.example.org"), { code: "ENOTFOUND" });
    }
  });
});
