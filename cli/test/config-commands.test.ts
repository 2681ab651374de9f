// apply, get, delete and live analyze against a real ingest and nats-server.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  eventually,
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { parse } from "yaml";
import { runCli } from "./capture.js";

const reviews = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  subsets:
    - name: v1
      labels:
        version: v1
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
    - reviews
  http:
    - route:
        - destination:
            host: reviews
            subset: v1
`;

describe("sextantctl apply, get, delete and analyze against ingest", () => {
  let nats: NatsServerFixture;
  let ingest: ServiceProcess;
  let directory: string;
  const cli = (...args: string[]) => runCli(["--ingest", `http://127.0.0.1:${ingest.httpPort}`, ...args]);
  const file = (name: string, text: string) => {
    const path = join(directory, name);
    writeFileSync(path, text);
    return path;
  };

  before(async () => {
    nats = await startNatsServer();
    ingest = await startServiceProcess("ingest", {
      NATS_URL: nats.url,
      API_AUTH: "none",
      ANALYSIS_DEBOUNCE_MS: "20",
    });
    directory = mkdtempSync(join(tmpdir(), "sextantctl-"));
  });
  after(async () => {
    await ingest?.stop();
    await nats?.dispose();
  });

  it("apply prints created, then unchanged, then configured per resource, as kubectl", async () => {
    const path = file("reviews.yaml", reviews);
    const created = await cli("apply", "-f", path);
    assert.equal(
      created.stdout,
      "destinationrule.networking.istio.io/reviews created\nvirtualservice.networking.istio.io/reviews created",
    );
    assert.equal(created.exitCode, 0);
    assert.equal(
      (await cli("apply", "-f", path)).stdout,
      "destinationrule.networking.istio.io/reviews unchanged\nvirtualservice.networking.istio.io/reviews unchanged",
    );
    const changed = await cli(
      "apply",
      "-f",
      file("reviews.yaml", reviews.replace("version: v1", "version: v9")),
    );
    assert.equal(
      changed.stdout,
      "destinationrule.networking.istio.io/reviews configured\nvirtualservice.networking.istio.io/reviews unchanged",
    );
  });

  it("apply --dry-run says what would happen and stores nothing", async () => {
    const path = file("ratings.yaml", reviews.replaceAll("reviews", "ratings"));
    const run = await cli("apply", "--dry-run", "-f", path);
    assert.equal(
      run.stdout,
      "destinationrule.networking.istio.io/ratings created (server dry run)\n" +
        "virtualservice.networking.istio.io/ratings created (server dry run)",
    );
    assert.equal(run.exitCode, 0);
    const get = await cli("get", "vs", "ratings");
    assert.equal(
      get.stderr,
      'error: virtualservices.networking.istio.io "ratings" not found in namespace "default"',
    );
    assert.equal(get.exitCode, 1);
    assert.match(
      (await cli("apply", "--dry-run", "-f", file("reviews.yaml", reviews))).stdout,
      /reviews configured \(server dry run\)/,
    );
  });

  it("an invalid document: every error at its file and line, exit 1, nothing stored", async () => {
    const path = file(
      "bad.yaml",
      `${reviews}---\n${reviews.split("---\n")[0]!.replace("reviews", "bad").replace("name: v1", "name: ''")}`,
    );
    const run = await cli("apply", "-f", path);
    assert.equal(run.exitCode, 1);
    assert.match(run.stderr, /^error: 1 document is invalid; nothing was stored$/m);
    assert.match(
      run.stderr,
      new RegExp(`^  ${path}:32 \\(DestinationRule default/bad\\): spec\\.subsets\\[0\\]\\.name: `, "m"),
    );
    assert.equal((await cli("get", "dr", "bad")).exitCode, 1);
  });

  it("apply -f DIR applies its files; -f - reads stdin", async () => {
    const sub = mkdtempSync(join(tmpdir(), "sextantctl-dir-"));
    writeFileSync(join(sub, "a.yaml"), reviews.replaceAll("reviews", "details"));
    writeFileSync(join(sub, "notes.txt"), "not a manifest");
    assert.equal(
      (await cli("apply", "-f", sub)).stdout,
      "destinationrule.networking.istio.io/details created\nvirtualservice.networking.istio.io/details created",
    );
    const main = join(import.meta.dirname, "..", "src", "main.ts");
    const child = spawnSync(
      process.execPath,
      [
        "--conditions=@sextant/source",
        "--import",
        "tsx",
        main,
        "--ingest",
        `http://127.0.0.1:${ingest.httpPort}`,
        "apply",
        "-f",
        "-",
      ],
      { input: reviews.replaceAll("reviews", "productpage"), encoding: "utf8" },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.equal(
      child.stdout,
      "destinationrule.networking.istio.io/productpage created\nvirtualservice.networking.istio.io/productpage created\n",
    );
  });

  it("get: a table with Istio's printer columns, -A with NAMESPACE, -o yaml/json the objects", async () => {
    await cli(
      "apply",
      "-f",
      file("other.yaml", reviews.replaceAll("name: reviews", "name: reviews\n  namespace: other")),
    );
    const table = await cli("get", "virtualservices");
    assert.equal(
      table.stdout,
      [
        "NAME          GATEWAYS   HOSTS",
        'details                  ["details"]',
        'productpage              ["productpage"]',
        'reviews                  ["reviews"]',
      ].join("\n"),
    );
    const all = await cli("get", "dr", "-A");
    assert.match(all.stdout, /^NAMESPACE {3}NAME {10}HOST$/m);
    assert.match(all.stdout, /^other {7}reviews {7}reviews$/m);
    const list = parse((await cli("get", "VirtualService", "-n", "other", "-o", "yaml")).stdout);
    assert.equal(list.kind, "List");
    assert.deepEqual(
      list.items.map((item: { metadata: { name: string } }) => item.metadata.name),
      ["reviews"],
    );
    const one = JSON.parse(
      (await cli("get", "destinationrule.networking.istio.io", "reviews", "-o", "json")).stdout,
    );
    assert.equal(one.kind, "DestinationRule");
    assert.equal(one.metadata.generation, 2);
    assert.deepEqual(one.spec.subsets[0].labels, { version: "v9" });
    const empty = await cli("get", "gw");
    assert.equal(empty.stderr, "No resources found in default namespace.");
    assert.equal(empty.exitCode, 0);
  });

  it("an unknown kind or output format is a usage error (exit 2)", async () => {
    const kind = await cli("get", "pods");
    assert.match(
      kind.stderr,
      /doesn't have a resource type "pods": use one of virtualservices, destinationrules/,
    );
    assert.equal(kind.exitCode, 2);
    assert.equal((await cli("get", "vs", "-o", "wide")).exitCode, 2);
  });

  it("delete prints deleted; a second delete is not found (exit 1)", async () => {
    const run = await cli("delete", "vs", "details");
    assert.equal(run.stdout, 'virtualservice.networking.istio.io "details" deleted');
    assert.equal(run.exitCode, 0);
    const again = await cli("delete", "vs", "details");
    assert.equal(
      again.stderr,
      'error: virtualservices.networking.istio.io "details" not found in namespace "default"',
    );
    assert.equal(again.exitCode, 1);
  });

  it("analyze (live): ingest's messages in istioctl's format, exit 1 on errors; -n another namespace is clean", async () => {
    await cli(
      "apply",
      "-f",
      file(
        "dangling.yaml",
        reviews
          .split("---\n")[1]!
          .replace("name: reviews", "name: dangling")
          .replace("subset: v1", "subset: v7"),
      ),
    );
    const run = await eventually(async () => {
      const result = await cli("analyze");
      assert.match(result.stdout, /dangling/);
      return result;
    });
    assert.match(
      run.stdout,
      /^Error \[IST0101\] \(VirtualService default\/dangling\) Referenced host\+subset in DestinationRule not found: "reviews\.default\.svc\.cluster\.local\+v7"$/m,
    );
    assert.equal(run.stderr, "Error: Analyzers found issues when analyzing namespace: default.");
    assert.equal(run.exitCode, 1);
    const other = await cli("analyze", "-n", "nowhere");
    assert.equal(other.stdout, "✔ No validation issues found when analyzing namespace: nowhere.");
    assert.equal(other.exitCode, 0);
  });

  it("the Gateway API's kinds: apply, get and delete by kubectl's names; gateway alone stays Istio's", async () => {
    const manifest = [
      "apiVersion: gateway.networking.k8s.io/v1",
      "kind: Gateway",
      "metadata:",
      "  name: web",
      "spec:",
      "  gatewayClassName: istio",
      "  listeners:",
      "  - {name: http, port: 80, protocol: HTTP}",
      "---",
      "apiVersion: gateway.networking.k8s.io/v1",
      "kind: HTTPRoute",
      "metadata:",
      "  name: web",
      "spec:",
      "  parentRefs: [{name: web}]",
      "  rules:",
      "  - backendRefs: [{name: productpage, port: 9080}]",
      "",
    ].join("\n");
    const applied = await cli("apply", "-f", file("gateway-api.yaml", manifest));
    assert.equal(
      applied.stdout,
      "gateway.gateway.networking.k8s.io/web created\nhttproute.gateway.networking.k8s.io/web created",
    );
    const one = JSON.parse(
      (await cli("get", "gateways.gateway.networking.k8s.io", "web", "-o", "json")).stdout,
    );
    assert.equal(one.kind, "Gateway");
    assert.equal(one.apiVersion, "gateway.networking.k8s.io/v1");
    assert.equal((await cli("get", "gw", "web")).exitCode, 1, "gw is Istio's Gateway");
    assert.match((await cli("get", "httproutes")).stdout, /^web$/m);
    const deleted = await cli("delete", "gtw", "web");
    assert.equal(deleted.stdout, 'gateway.gateway.networking.k8s.io "web" deleted');
  });

  it("an unreachable ingest: what failed and what to do, exit 1", async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const run = await runCli(["--ingest", closed, "get", "vs"]);
    assert.match(
      run.stderr,
      /^error: cannot reach ingest at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): start the mesh, or point --ingest \(or SEXTANT_INGEST\) at ingest's API$/,
    );
    assert.equal(run.exitCode, 1);
  });
});
