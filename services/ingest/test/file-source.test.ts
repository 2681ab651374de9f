import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Buckets } from "@sextant/bus";
import { configKey } from "@sextant/model";
import { eventually } from "@sextant/testing";
import {
  get,
  type IngestFixture,
  post,
  startIngest,
  startNatsWithClient,
  virtualService,
} from "./harness.js";

const destinationRule = (name: string) =>
  `apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: ${name}}\nspec:\n  host: ${name}\n  subsets:\n  - name: v1\n    labels: {version: v1}\n`;

describe("CONFIG_DIR source", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: IngestFixture;
  let dir: string;
  const exists = async (kind: string, name: string) =>
    (await get(`${ingest.url}/v1/config/${kind}/default/${name}`)).status === 200;
  const start = () => startIngest(env.nats.url, { CONFIG_DIR: dir, CONFIG_DIR_RESCAN_MS: "200" });

  before(async () => {
    env = await startNatsWithClient();
    dir = mkdtempSync(join(tmpdir(), "sextant-config-"));
    writeFileSync(join(dir, "a.yaml"), virtualService("file-a", { subset: "v1" }));
    writeFileSync(join(dir, "b.yaml"), `${virtualService("file-b")}---\n${destinationRule("file-b")}`);
    writeFileSync(join(dir, "notes.txt"), "not config");
    ingest = await start();
  });
  after(async () => {
    await ingest?.stop();
    await env?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("applies every file before it reports ready", async () => {
    assert.equal((await fetch(`${ingest.url}/ready`)).status, 200);
    assert.ok(await exists("VirtualService", "file-a"));
    assert.ok(await exists("VirtualService", "file-b"));
    assert.ok(await exists("DestinationRule", "file-b"));
  });

  it("applies an edited file", async () => {
    writeFileSync(join(dir, "a.yaml"), virtualService("file-a", { subset: "v2" }));
    await eventually(async () => {
      const { json } = await get(`${ingest.url}/v1/config/VirtualService/default/file-a`);
      return json.spec?.http?.[0]?.route?.[0]?.destination?.subset === "v2";
    });
  });

  it("reports a broken file and leaves every resource as it was", async () => {
    writeFileSync(
      join(dir, "b.yaml"),
      `${virtualService("file-b")}---\nkind: DestinationRule\nmetadata: {name: [oops`,
    );
    const report = await eventually(async () => {
      const { json } = await get(`${ingest.url}/v1/analyze`);
      return json.sources.find((s: { source: string }) => s.source.endsWith("/b.yaml"));
    });
    assert.match(JSON.stringify(report.errors), /invalid YAML/);
    assert.ok(await exists("VirtualService", "file-b"));
    assert.ok(await exists("DestinationRule", "file-b"));
    assert.ok(await exists("VirtualService", "file-a"));
  });

  it("deletes what a fixed file no longer holds, and clears its report", async () => {
    writeFileSync(join(dir, "b.yaml"), virtualService("file-b"));
    await eventually(async () => !(await exists("DestinationRule", "file-b")));
    assert.ok(await exists("VirtualService", "file-b"));
    const { json } = await get(`${ingest.url}/v1/analyze`);
    assert.deepEqual(json.sources, []);
  });

  it("deletes the resources of a removed file", async () => {
    rmSync(join(dir, "a.yaml"));
    await eventually(async () => !(await exists("VirtualService", "file-a")));
    assert.ok(await exists("VirtualService", "file-b"));
  });

  it("does not delete a resource that the API took over from a file", async () => {
    writeFileSync(join(dir, "c.yaml"), virtualService("taken-over"));
    await eventually(() => exists("VirtualService", "taken-over"));
    assert.equal(
      (await post(`${ingest.url}/v1/apply`, virtualService("taken-over", { subset: "api" }))).status,
      200,
    );
    rmSync(join(dir, "c.yaml"));
    await eventually(async () => {
      const { json } = await get(`${ingest.url}/v1/analyze`);
      return json.sources.length === 0;
    });
    // Give the removal a full rescan, then check the API's version survived.
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.ok(await exists("VirtualService", "taken-over"));
  });

  it("stores the same value whether a resource came from a file or the API", async () => {
    const config = await env.bus.bucket(Buckets.config);
    const key = configKey({ kind: "VirtualService", namespace: "default", name: "same-either-way" });
    const text = virtualService("same-either-way", { subset: "v1" });
    writeFileSync(join(dir, "same.yaml"), text);
    const fromFile = await eventually(async () => (await config.get(key))?.value);
    rmSync(join(dir, "same.yaml"));
    await eventually(async () => !(await config.get(key)));
    assert.equal((await post(`${ingest.url}/v1/apply`, text)).status, 200);
    const fromApi = (await config.get(key))?.value;
    assert.deepEqual(fromApi, fromFile);
  });

  it("after a restart, deletes what a file removed while ingest was down held", async () => {
    writeFileSync(join(dir, "d.yaml"), virtualService("removed-while-down"));
    await eventually(() => exists("VirtualService", "removed-while-down"));
    await ingest.stop();
    rmSync(join(dir, "d.yaml"));
    ingest = await start();
    assert.equal(await exists("VirtualService", "removed-while-down"), false);
    assert.ok(await exists("VirtualService", "file-b"));
  });
});
