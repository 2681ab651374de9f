// Upstream compatibility: Istio's own published Bookinfo samples, read from
// ../shared/samples/bookinfo when that folder sits beside the repository (as
// in the project's CI). It is the one test that looks outside the repository:
// the product and every other test use the repository's samples/, and this
// suite checks that they still describe what Istio publishes and that ingest
// takes Istio's files unchanged. Without the folder it skips, saying why.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  bookinfoNetworkingDir,
  bookinfoPlatformFile,
  repositoryRoot,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { parseAllDocuments } from "yaml";

const upstreamDir = join(repositoryRoot(), "..", "shared", "samples", "bookinfo");
const upstreamPresent = existsSync(join(upstreamDir, "networking"));

/** The objects of a YAML file, without the empty or comment-only documents. */
const objectsOf = (path: string): unknown[] =>
  parseAllDocuments(readFileSync(path, "utf8"))
    .map((document) => document.toJS())
    .filter((object) => object !== null);

const upstreamNetworking = (): string[] =>
  readdirSync(join(upstreamDir, "networking"))
    .filter((file) => file.endsWith(".yaml"))
    .sort();

describe("Istio's upstream Bookinfo samples", {
  skip: upstreamPresent
    ? false
    : `Istio's upstream samples not present: ${upstreamDir} does not exist (only the project's CI has ../shared beside the repository)`,
}, () => {
  it("each has a counterpart in samples/ that describes the same objects", () => {
    const files = upstreamNetworking();
    assert.ok(files.length >= 20, `only ${files.length} upstream networking files`);
    for (const file of files) {
      const ours = join(bookinfoNetworkingDir(), file);
      assert.ok(existsSync(ours), `samples/bookinfo/networking/${file} is missing`);
      assert.deepEqual(objectsOf(ours), objectsOf(join(upstreamDir, "networking", file)), file);
    }
    assert.deepEqual(
      objectsOf(bookinfoPlatformFile()),
      objectsOf(join(upstreamDir, "platform", "kube", "bookinfo.yaml")),
      "platform/kube/bookinfo.yaml",
    );
  });

  describe("applied through ingest", () => {
    let nats: Awaited<ReturnType<typeof startNatsServer>>;
    let ingest: ServiceProcess;
    const apply = async (yaml: string) => {
      const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        method: "POST",
        body: yaml,
      });
      const body = (await response.json()) as { resources?: Array<{ result: string }> };
      return { status: response.status, body };
    };

    before(async () => {
      nats = await startNatsServer();
      ingest = await startServiceProcess("ingest", {
        NATS_URL: nats.url,
        LOG_LEVEL: "warn",
        API_AUTH: "none",
      });
    });
    after(async () => {
      await ingest?.stop();
      await nats?.dispose();
    });

    it("takes every upstream file unchanged, and samples/ then changes nothing", async () => {
      for (const file of upstreamNetworking()) {
        const upstream = await apply(readFileSync(join(upstreamDir, "networking", file), "utf8"));
        assert.equal(upstream.status, 200, `${file}: ${JSON.stringify(upstream.body)}`);
        assert.ok((upstream.body.resources ?? []).length > 0, `${file}: no resources`);
        // Each file alone, since several files define the same VirtualService.
        const ours = await apply(readFileSync(join(bookinfoNetworkingDir(), file), "utf8"));
        assert.equal(ours.status, 200, `samples/${file}: ${JSON.stringify(ours.body)}`);
        assert.deepEqual(
          ours.body.resources?.map((resource) => resource.result),
          upstream.body.resources?.map(() => "unchanged"),
          `samples/${file} stores exactly what Istio's ${file} stored`,
        );
      }
    });
  });
});
