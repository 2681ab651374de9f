// deploy/nats's configuration run as a real 3-node cluster on loopback: TLS
// for clients and routes, route authentication, the services' users. Only
// addresses, ports and certificate paths are changed from the committed
// files; the route list is the StatefulSet's own, pointed at local ports.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { connect as connectTcp } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { Buckets, type BusOptions, type BusRunnerOptions, busRunner, connectBus } from "@sextant/bus";
import { pushContract } from "@sextant/push/contract";
import {
  eventually,
  freePort,
  type NatsClusterFixture,
  type NatsClusterNode,
  type NatsServerFixture,
  startNatsCluster,
  startNatsServer,
} from "@sextant/testing";
import { NATS_SERVICES, natsInboxPrefix, natsPasswordVariable, natsUser } from "../src/nats-users.js";
import { containerOf, DEPLOY_DIR, envValue, find, render, silentLogger, type Workload } from "./helpers.js";
import { makeNatsTls, type NatsTlsDir } from "./nats-tls.js";

const logger = silentLogger<BusOptions["logger"]>();
const ROUTE_PASSWORD = "0123456789abcdef0123456789abcdef";
const password = (service: string) => `password-of-${service}`;

const natsConf = readFileSync(join(DEPLOY_DIR, "nats", "nats.conf"), "utf8");
const authConf = readFileSync(join(DEPLOY_DIR, "nats", "auth.conf"), "utf8");
const statefulSet = find<Workload>(render("nats"), "StatefulSet", "sextant-nats");
/** NATS_ROUTES as the StatefulSet sets it, before the kubelet expands $(NATS_ROUTE_PASSWORD). */
const routesTemplate = envValue(containerOf(statefulSet), "NATS_ROUTES") ?? "";

/** The committed nats.conf for one local node: loopback ports, the test's certificates and store, auth.conf inlined. */
function localConfig(tls: NatsTlsDir, clusterPort: number, monitorPort: number): string {
  const replaced = natsConf
    .replace("listen: 0.0.0.0:4222", "listen: 127.0.0.1:4222")
    .replace("http: 0.0.0.0:8222", `http: 127.0.0.1:${monitorPort}`)
    .replace("listen: 0.0.0.0:6222", `listen: 127.0.0.1:${clusterPort}`)
    // startNatsServer gives each node its own store on the command line.
    .replace("store_dir: /data", "")
    .replaceAll("/etc/nats-tls", tls.dir)
    .replace("include ./auth.conf", authConf);
  assert.notEqual(replaced, natsConf);
  return replaced;
}

/** The pod's environment: its name, the passwords from the Secret, the routes the kubelet expands. */
function localEnv(name: string, clusterPorts: readonly number[], routePassword: string | undefined) {
  const routes = routesTemplate
    .replace(/sextant-nats-(\d)\.sextant-nats-headless:6222/g, (_, index: string) => {
      const port = clusterPorts[Number(index)];
      assert.ok(port, `no node ${index}`);
      return `127.0.0.1:${port}`;
    })
    .replaceAll(
      "route:$(NATS_ROUTE_PASSWORD)@",
      routePassword === undefined ? "" : `route:${routePassword}@`,
    );
  return {
    POD_NAME: name,
    NATS_ROUTE_PASSWORD: ROUTE_PASSWORD,
    NATS_ROUTES: routes,
    ...Object.fromEntries(NATS_SERVICES.map((service) => [natsPasswordVariable(service), password(service)])),
  };
}

/** The nodes a node has routes to (by server id: nats-server 2.10 may pool several routes per peer). */
async function routeCount(monitorPort: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${monitorPort}/routez`);
  const { routes } = (await response.json()) as { routes?: Array<{ remote_id: string }> };
  return new Set((routes ?? []).map((route) => route.remote_id)).size;
}

describe("deploy/nats as a 3-node cluster with TLS and route authentication", () => {
  let tls: NatsTlsDir;
  let cluster: NatsClusterFixture;
  const asService = (service: string, url: string, extra: Partial<BusOptions> = {}) =>
    connectBus({
      url,
      name: `${service}-test`,
      logger,
      user: natsUser(service as (typeof NATS_SERVICES)[number]),
      password: password(service),
      inboxPrefix: natsInboxPrefix(service as (typeof NATS_SERVICES)[number]),
      tlsCaFile: tls.caFile,
      ...extra,
    });

  before(async () => {
    assert.match(routesTemplate, /^\[.*\]$/, "the StatefulSet sets NATS_ROUTES to a list");
    tls = makeNatsTls();
    cluster = await startNatsCluster({
      config: (node: NatsClusterNode) => localConfig(tls, node.clusterPort, node.monitorPort),
      env: (node: NatsClusterNode) => localEnv(node.name, node.clusterPorts, ROUTE_PASSWORD),
    });
  });
  after(async () => {
    await cluster?.dispose();
  });

  it("each node has routes to the two others", async () => {
    for (const { node } of cluster.nodes) {
      await eventually(async () => (await routeCount(node.monitorPort)) === 2, {
        message: `${node.name} has 2 routes`,
      });
    }
  });

  it("a service's bus connects over TLS with its user, and reads and writes a bucket replicated on all three nodes", async () => {
    const [first, , third] = cluster.nodes;
    assert.ok(first && third);
    const ingest = await asService("ingest", first.url, { replicas: 3 });
    try {
      assert.equal(ingest.nc.info?.tls_required, true);
      const config = await ingest.bucket(Buckets.config);
      const empty = Buckets.config.codec.decode(new Uint8Array());
      await config.put("default.probe", { ...empty, name: "probe" });
      const info = await (await jetstreamManager(ingest.nc)).streams.info("KV_sextant-config");
      assert.equal(info.config.num_replicas, 3);
      assert.equal(info.cluster?.replicas?.length, 2);

      // push as it starts in its pod: everything from its environment, through another node.
      const readiness = { require() {}, done() {} } as unknown as BusRunnerOptions["readiness"];
      const variables = {
        NATS_USER: natsUser("push"),
        NATS_PASSWORD: password("push"),
        NATS_INBOX_PREFIX: natsInboxPrefix("push"),
        NATS_KV_REPLICAS: "3",
        NATS_TLS_CA_FILE: tls.caFile,
      };
      const saved = Object.fromEntries(Object.keys(variables).map((name) => [name, process.env[name]]));
      Object.assign(process.env, variables);
      let runner: ReturnType<typeof busRunner>;
      try {
        runner = busRunner({
          url: third.url,
          name: "push-test",
          logger,
          readiness,
          service: "push",
          contract: pushContract,
        });
      } finally {
        for (const [name, value] of Object.entries(saved)) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      }
      await runner.start();
      try {
        const seen = await eventually(async () =>
          (await runner.bus.bucket(Buckets.config)).get("default.probe"),
        );
        assert.equal((seen as { value: { name: string } }).value.name, "probe");
        const status = await (await jetstreamManager(runner.bus.nc)).streams.info("KV_sextant-proxy-status");
        assert.equal(status.config.num_replicas, 3);
      } finally {
        await runner.close();
      }
    } finally {
      await ingest.close();
    }
  });

  it("refuses a client without TLS, one that does not trust the CA, and one without credentials", async () => {
    const [node] = cluster.nodes;
    assert.ok(node);
    // A plaintext client: the server expects a TLS handshake after its INFO,
    // takes the CONNECT for a broken one and hangs up without a PONG.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connectTcp(node.port, "127.0.0.1");
      let received = "";
      let sent = false;
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => {
        received += chunk;
        if (!sent && received.includes("\r\n")) {
          sent = true;
          socket.write(
            `CONNECT {"user":"ingest","pass":"${password("ingest")}","verbose":false}\r\nPING\r\n`,
          );
        }
      });
      socket.on("error", reject);
      socket.on("close", () => resolve(received));
    });
    assert.match(answer, /^INFO .*"tls_required":true/);
    assert.doesNotMatch(answer, /PONG|\+OK/);
    // The bus without NATS_TLS_CA_FILE: the node's certificate is from no CA it knows.
    await assert.rejects(asService("ingest", node.url, { tlsCaFile: undefined }), /certificate/i);
    // TLS, but another service's password or none at all.
    await assert.rejects(asService("ingest", node.url, { password: password("push") }), /authorization/i);
    await assert.rejects(
      connectBus({ url: node.url, name: "anonymous", logger, tlsCaFile: tls.caFile }),
      /authorization/i,
    );
  });

  it("a node without the route credentials does not join, though its certificate is good", async () => {
    const clusterPorts = cluster.nodes.map(({ node }) => node.clusterPort);
    const [intruderClusterPort, intruderMonitorPort] = [await freePort(), await freePort()];
    let log = "";
    let intruder: NatsServerFixture | undefined;
    try {
      intruder = await startNatsServer({
        config: localConfig(tls, intruderClusterPort, intruderMonitorPort),
        env: localEnv("intruder", clusterPorts, undefined),
        onLog: (chunk) => {
          log += chunk;
        },
      });
      // Each node turned its route away...
      await eventually(() => (log.match(/authorization violation/gi) ?? []).length >= clusterPorts.length, {
        timeoutMs: 30_000,
        message: `the intruder's routes refused by every node:\n${log}`,
      });
      // ...and the cluster is still the three nodes, the intruder alone.
      assert.equal(await routeCount(intruderMonitorPort), 0);
      for (const { node } of cluster.nodes) assert.equal(await routeCount(node.monitorPort), 2);
    } finally {
      await intruder?.dispose();
    }
  });
});
