import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { describe, it } from "node:test";
import { natsClusterConfig, startNatsCluster, startNatsServer } from "../src/nats.js";
import { eventually } from "../src/wait.js";

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = netConnect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

describe("nats-server fixture", () => {
  it("starts on a random port, restarts on the same one, and cleans up", async () => {
    const a = await startNatsServer();
    const b = await startNatsServer();
    try {
      assert.notEqual(a.port, b.port);
      assert.equal(await accepts(a.port), true);
      const port = a.port;
      await a.stop();
      assert.equal(await accepts(port), false);
      await a.start();
      assert.equal(a.port, port);
      assert.equal(await accepts(port), true);
    } finally {
      await a.dispose();
      await b.dispose();
    }
    assert.equal(existsSync(a.storeDir), false);
  });
});

describe("nats-server cluster fixture", () => {
  it("starts nodes routed to each other, each healthy, and removes them all", async () => {
    let seen = "";
    const cluster = await startNatsCluster({
      // The default configuration, checked to be what each node was given.
      config: (node) => {
        const config = natsClusterConfig(node);
        seen += config;
        return config;
      },
    });
    try {
      assert.equal(cluster.nodes.length, 3);
      assert.equal(cluster.url.split(",").length, 3);
      for (const { node } of cluster.nodes) {
        assert.match(seen, new RegExp(`server_name: ${node.name}\n`));
        // Every node comes to route to the two others (by peer: 2.10 pools routes).
        await eventually(
          async () => {
            const response = await fetch(`http://127.0.0.1:${node.monitorPort}/routez`);
            const { routes } = (await response.json()) as { routes?: Array<{ remote_id: string }> };
            return new Set(routes?.map((route) => route.remote_id)).size === 2;
          },
          { message: `${node.name} routes to both others` },
        );
      }
    } finally {
      await cluster.dispose();
    }
    for (const server of cluster.nodes) assert.equal(existsSync(server.storeDir), false);
  });
});
