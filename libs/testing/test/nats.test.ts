import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { describe, it } from "node:test";
import { startNatsServer } from "../src/nats.js";

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
