import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { validateBootstrapConfig } from "@grpc/grpc-js-xds/build/src/xds-bootstrap.js";
import { parseSettings } from "@sextant/runtime";
import { trackChildProcess } from "@sextant/testing";
import { envoyBootstrapFromSettings } from "../src/bootstrap/from-settings.js";
import { parseCommand, UsageError } from "../src/cli.js";
import { agentSettings } from "../src/settings.js";

const packageDir = join(import.meta.dirname, "..");

/** Runs `agent <args>` from the sources, as `pnpm dev` does; resolves with its exit code and output. */
function agent(args: string[], env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ["--conditions=@sextant/source", "--import", "tsx", "src/main.ts", ...args],
    { cwd: packageDir, env: { PATH: process.env.PATH ?? "", OTEL_SDK_DISABLED: "true", ...env } },
  );
  trackChildProcess(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
}

const WORKLOAD = {
  POD_NAME: "web-7f9c-abcde",
  POD_NAMESPACE: "shop",
  SERVICE_ACCOUNT: "web",
  INSTANCE_IP: "10.1.2.3",
  ISTIO_METAJSON_LABELS: '{"app":"web","istio-locality":"eu-west1.eu-west1-c"}',
};

describe("agent command line", () => {
  test("`bootstrap envoy` prints the bootstrap of the environment's settings", async () => {
    const { code, stdout, stderr } = await agent(["bootstrap", "envoy"], WORKLOAD);
    assert.equal(code, 0, stderr);
    const printed: unknown = JSON.parse(stdout);
    const { node } = printed as { node: { cluster: string; locality: unknown } };
    assert.equal(node.cluster, "web.shop");
    assert.deepEqual(node.locality, { region: "eu-west1", zone: "eu-west1-c" });
    // The child ran in the package directory, so relative paths resolve the same here.
    process.chdir(packageDir);
    assert.deepEqual(printed, envoyBootstrapFromSettings(parseSettings(agentSettings, WORKLOAD)));
  });

  test("`bootstrap grpc --output` writes a bootstrap grpc-js-xds accepts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sextant-agent-cli-"));
    const output = join(dir, "grpc-bootstrap.json");
    const { code, stderr } = await agent(["bootstrap", "grpc", "--output", output], {
      ...WORKLOAD,
      XDS_PROXY_PORT: "0",
      XDS_SOCKET: join(dir, "XDS"),
      OUTPUT_CERTS: join(dir, "certs"),
    });
    assert.equal(code, 0, stderr);
    const info = validateBootstrapConfig(JSON.parse(readFileSync(output, "utf8")));
    assert.equal(info.xdsServers[0]?.server_uri, `unix://${join(dir, "XDS")}`);
    assert.equal(
      info.certificateProviders.default?.config.certificateFile,
      join(dir, "certs", "cert-chain.pem"),
    );
  });

  test("a bad setting exits with status 2 and names the variable", async () => {
    const { code, stderr } = await agent(["bootstrap", "envoy"], { ...WORKLOAD, SECRET_TTL: "soon" });
    assert.equal(code, 2);
    assert.match(stderr, /SECRET_TTL: must be a positive duration/);
  });

  test("`run` with a bad setting exits with status 2 and names the variable", async () => {
    const { code, stderr } = await agent(["run"], { ...WORKLOAD, XDS_SERVER_SPIFFE_ID: "push" });
    assert.equal(code, 2);
    assert.match(stderr, /XDS_SERVER_SPIFFE_ID: must be a SPIFFE ID/);
  });

  test("an unknown command exits with status 2 and the usage", async () => {
    const { code, stderr } = await agent(["frobnicate"], WORKLOAD);
    assert.equal(code, 2);
    assert.match(stderr, /unknown command "frobnicate"/);
    assert.match(stderr, /agent bootstrap envoy/);
  });

  test("parses the commands", () => {
    assert.deepEqual(parseCommand([]), { command: "run" });
    assert.deepEqual(parseCommand(["run"]), { command: "run" });
    assert.deepEqual(parseCommand(["bootstrap", "envoy"]), {
      command: "bootstrap",
      target: "envoy",
      output: undefined,
    });
    assert.deepEqual(parseCommand(["bootstrap", "grpc", "-o", "/tmp/b.json"]), {
      command: "bootstrap",
      target: "grpc",
      output: "/tmp/b.json",
    });
    assert.throws(() => parseCommand(["bootstrap"]), UsageError);
    assert.throws(() => parseCommand(["bootstrap", "istio"]), /unknown bootstrap "istio"/);
    assert.throws(() => parseCommand(["run", "--output", "x"]), /--output belongs to the bootstrap commands/);
    assert.throws(() => parseCommand(["--verbose"]), UsageError);
  });
});
