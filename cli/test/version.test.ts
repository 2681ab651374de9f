import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { freePort } from "@sextant/testing";
import { runCli } from "./capture.js";
import { type ProxyMesh, startProxyMesh } from "./mesh.js";

describe("sextantctl version", () => {
  let mesh: ProxyMesh;
  const cli = (...args: string[]) => runCli(["--ingest", mesh.ingestUrl, ...args]);

  // nats-server, ingest, discovery and two push replicas, each a process recording itself in sextant-members.
  before(async () => {
    mesh = await startProxyMesh(2, 1000);
  });
  after(() => mesh?.close());

  it("prints the client's version and each service's version and replica count", async () => {
    const run = await cli("version");
    assert.equal(run.stderr, "");
    assert.equal(run.exitCode, 0);
    assert.equal(
      run.stdout,
      [
        "client version: 0.0.0",
        "SERVICE     VERSION   REPLICAS",
        "discovery   0.0.0     1",
        "ingest      0.0.0     1",
        "push        0.0.0     2",
      ].join("\n"),
    );
  });

  it("prints the same, with each replica, as JSON and YAML", async () => {
    const json = JSON.parse((await cli("version", "-o", "json")).stdout);
    assert.equal(json.clientVersion, "0.0.0");
    const push = json.services.find((service: { service: string }) => service.service === "push");
    assert.equal(push.replicas, 2);
    assert.deepEqual(
      push.instances.map((instance: { instance: string }) => instance.instance),
      ["push-0", "push-1"],
    );
    const yaml = (await cli("version", "-o", "yaml")).stdout;
    assert.match(yaml, /^clientVersion: 0\.0\.0$/m);
    assert.match(yaml, /^ {2}- service: push\n {4}version: 0\.0\.0\n {4}replicas: 2$/m);
  });

  it("stops counting a replica as soon as it stops: a stopping service deletes its record", async () => {
    await mesh.pushes.pop()?.stop();
    assert.match((await cli("version")).stdout, /^push +0\.0\.0 +1$/m);
  });

  it("still prints the client's version when ingest cannot be reached, and exits 1", async () => {
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const run = await runCli(["--ingest", nobody, "version"]);
    assert.equal(run.stdout, "client version: 0.0.0");
    assert.match(run.stderr, new RegExp(`^error: cannot reach ingest at ${nobody} \\(ECONNREFUSED\\)`));
    assert.equal(run.exitCode, 1);
  });
});
