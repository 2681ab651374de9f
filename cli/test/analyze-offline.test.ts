import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runCli } from "./capture.js";

const testdata = join(import.meta.dirname, "testdata", "analyze");
const file = (name: string) => join(testdata, name);

describe("sextantctl analyze -f (offline: no server)", () => {
  it("files without problems: istioctl's ✔ line and exit 0", async () => {
    // The VirtualService's host and subset exist only through the file's Service and DestinationRule.
    const run = await runCli(["--ingest", "http://127.0.0.1:1", "analyze", "-f", file("clean.yaml")]);
    assert.equal(run.stdout, "✔ No validation issues found when analyzing namespace: default.");
    assert.equal(run.exitCode, 0);
  });

  it("prints each message in istioctl's format with the file and the line of its field, and exits 1 on errors", async () => {
    const run = await runCli(["analyze", "-n", "bookinfo", "-f", file("broken.yaml")]);
    const broken = file("broken.yaml");
    assert.deepEqual(run.stdout.split("\n"), [
      `Error [IST0106] (DestinationRule bookinfo/details ${broken}:28) Schema validation error: spec.trafficPolicy.loadBalancer.simple: invalid value "FASTEST": expected one of UNSPECIFIED, LEAST_CONN, RANDOM, PASSTHROUGH, ROUND_ROBIN, LEAST_REQUEST`,
      `Error [IST0101] (VirtualService bookinfo/ratings ${broken}:12) Referenced gateway not found: "bookinfo/bookinfo-gateway"`,
      `Error [IST0101] (VirtualService bookinfo/ratings ${broken}:17) Referenced host+subset in DestinationRule not found: "ratings.bookinfo.svc.cluster.local+v2"`,
    ]);
    assert.equal(run.stderr, "Error: Analyzers found issues when analyzing namespace: bookinfo.");
    assert.equal(run.exitCode, 1);
  });

  it("reports on the namespace asked for: another namespace's errors are not shown and do not fail", async () => {
    const run = await runCli(["analyze", "-f", file("broken.yaml")]);
    assert.equal(run.stdout, "✔ No validation issues found when analyzing namespace: default.");
    assert.equal(run.exitCode, 0);
  });

  it("warnings print but exit 0, unless --failure-threshold Warning; --output-threshold Error hides them", async () => {
    const args = ["analyze", "-A", "-f", file("warning.yaml")];
    const run = await runCli(args);
    assert.match(
      run.stdout,
      /^Warning \[SXT0002\] \(DestinationRule shop\/payments .*warning\.yaml:22\) credentialName on a DestinationRule without workloadSelector/,
    );
    assert.equal(run.exitCode, 0);
    assert.equal((await runCli([...args, "--failure-threshold", "Warning"])).exitCode, 1);
    const quiet = await runCli([...args, "--output-threshold", "Error"]);
    assert.equal(quiet.stdout, "");
    assert.equal(quiet.exitCode, 0);
  });

  it("a directory is every file in it, analysed together", async () => {
    const run = await runCli(["analyze", "-A", "-f", testdata]);
    assert.equal(run.stdout.split("\n").length, 4);
    assert.equal(run.exitCode, 1);
  });

  it("a JSON file's messages name the file without a line, as istioctl", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "sextantctl-analyze-")), "vs.json");
    const virtualService = {
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "orphan" },
      spec: {
        hosts: ["orphan"],
        gateways: ["nowhere"],
        http: [{ route: [{ destination: { host: "orphan" } }] }],
      },
    };
    writeFileSync(path, JSON.stringify(virtualService, null, 2));
    const run = await runCli(["analyze", "-f", path]);
    assert.equal(
      run.stdout,
      `Error [IST0101] (VirtualService default/orphan ${path}) Referenced gateway not found: "default/nowhere"`,
    );
  });

  it("a bad threshold is a usage error (exit 2)", async () => {
    const run = await runCli(["analyze", "-f", file("clean.yaml"), "--failure-threshold", "Fatal"]);
    assert.match(run.stderr, /--failure-threshold "Fatal" is not a level: use Info, Warning, Error/);
    assert.equal(run.exitCode, 2);
  });
});
