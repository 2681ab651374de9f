import assert from "node:assert/strict";
import { execFile as execFileCallback, execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const execFile = promisify(execFileCallback);

const cli = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The standalone install: the tarball of `pnpm run pack`, installed with
 * `npm i -g` and no registry, run with an environment that knows nothing of
 * the workspace (only Node and the install's bin on PATH, a fresh HOME, a
 * working directory outside the repository).
 */
describe("sextantctl installed from its packed tarball", () => {
  const root = mkdtempSync(join(tmpdir(), "sextantctl-standalone-"));
  const prefix = join(root, "prefix");
  const work = join(root, "work");
  const env = {
    PATH: [join(prefix, "bin"), dirname(process.execPath), "/usr/bin", "/bin"].join(delimiter),
    HOME: root,
  };
  let tarball = "";

  /** Runs the installed sextantctl in `work` (asynchronously: a test's own server must answer it). */
  async function sextantctl(...args: string[]): Promise<{ stdout: string; stderr: string; status: number }> {
    try {
      const { stdout, stderr } = await execFile(join(prefix, "bin", "sextantctl"), args, { cwd: work, env });
      return { stdout, stderr, status: 0 };
    } catch (error) {
      const { stdout, stderr, code } = error as { stdout: string; stderr: string; code: number };
      return { stdout, stderr, status: code };
    }
  }

  before(() => {
    tarball = execFileSync(process.execPath, [join(cli, "scripts", "pack.mjs"), root], {
      cwd: cli,
      encoding: "utf8",
    }).trim();
    execFileSync(
      "npm",
      ["install", "--global", "--offline", "--no-audit", "--no-fund", "--prefix", prefix, tarball],
      {
        cwd: root,
        env: { ...env, npm_config_cache: join(root, "npm-cache") },
        encoding: "utf8",
      },
    );
    mkdirSync(work);
    copyFileSync(join(cli, "test", "testdata", "analyze", "broken.yaml"), join(work, "broken.yaml"));
    writeFileSync(
      join(work, "pod.yaml"),
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ratings\n  namespace: default\nspec:\n  containers:\n    - name: ratings\n      image: ratings:1\n",
    );
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("has no dependencies to fetch: everything is in the bundle", () => {
    const manifest = JSON.parse(
      execFileSync("tar", ["-xOzf", tarball, "package/package.json"], { encoding: "utf8" }),
    );
    assert.equal(manifest.name, "@sextant/cli");
    assert.equal(manifest.dependencies, undefined);
    assert.deepEqual(manifest.bin, { sextantctl: "./dist/sextantctl.mjs" });
  });

  it("prints its version and each service's, as ingest lists them", async () => {
    // A stand-in for ingest's GET /v1/members: this test is about the install, version.test.ts about the services.
    const ingest = createServer((request, response) => {
      response.setHeader("content-type", "application/json");
      if (request.url !== "/v1/members" || request.headers.authorization !== "Bearer t0ken")
        return void response.writeHead(404).end("{}");
      const member = (service: string, instance: string) => ({
        service,
        version: "0.0.0",
        instance,
        started: "",
      });
      response.end(JSON.stringify({ members: [member("push", "push-0"), member("ingest", "ingest-0")] }));
    });
    await new Promise<void>((resolve) => ingest.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(ingest.address() as AddressInfo).port}`;
      // Through the config file in the fresh HOME, as an operator's install would find the mesh.
      mkdirSync(join(root, ".config", "sextant"), { recursive: true });
      writeFileSync(join(root, ".config", "sextant", "config.yaml"), `ingest: ${url}\ntoken: t0ken\n`);
      const run = await sextantctl("version");
      assert.equal(run.stderr, "");
      assert.equal(
        run.stdout,
        "client version: 0.0.0\nSERVICE   VERSION   REPLICAS\ningest    0.0.0     1\npush      0.0.0     1\n",
      );
    } finally {
      ingest.close();
    }
  });

  it("analyzes files offline, reading the proto descriptors it ships for validation", async () => {
    const run = await sextantctl("analyze", "-n", "bookinfo", "-f", "broken.yaml");
    assert.equal(run.status, 1);
    assert.equal(
      run.stdout,
      [
        'Error [IST0106] (DestinationRule bookinfo/details broken.yaml:28) Schema validation error: spec.trafficPolicy.loadBalancer.simple: invalid value "FASTEST": expected one of UNSPECIFIED, LEAST_CONN, RANDOM, PASSTHROUGH, ROUND_ROBIN, LEAST_REQUEST',
        'Error [IST0101] (VirtualService bookinfo/ratings broken.yaml:12) Referenced gateway not found: "bookinfo/bookinfo-gateway"',
        'Error [IST0101] (VirtualService bookinfo/ratings broken.yaml:17) Referenced host+subset in DestinationRule not found: "ratings.bookinfo.svc.cluster.local+v2"',
        "",
      ].join("\n"),
    );
    assert.equal(run.stderr, "Error: Analyzers found issues when analyzing namespace: bookinfo.\n");
  });

  it("injects a sidecar offline, with the injection template it ships", async () => {
    const run = await sextantctl("kube-inject", "-f", "pod.yaml");
    assert.equal(run.stderr, "");
    assert.equal(run.status, 0);
    assert.match(run.stdout, /^ {4}- name: istio-proxy$/m);
    assert.match(run.stdout, /^ {4}sidecar\.istio\.io\/status: /m);
  });
});
