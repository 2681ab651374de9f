import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { buildProgram } from "../src/main.js";

/** Runs sextantctl in-process and returns what it printed. */
async function run(args: string[]): Promise<string> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...parts: unknown[]) => lines.push(parts.join(" "));
  try {
    await buildProgram().parseAsync(["node", "sextantctl", ...args]);
  } finally {
    console.log = log;
  }
  return lines.join("\n");
}

describe("sextantctl version", () => {
  const server = createServer((request, response) => {
    response.statusCode = request.url === "/ready" ? 200 : 404;
    response.end();
  });
  let url = "";
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  it("prints the client's version and whether each service answers /ready", async () => {
    const output = await run(["--ingest", url, "--push", "http://127.0.0.1:1", "version"]);
    assert.match(output, /^client version: 0\.0\.0$/m);
    assert.match(output, /^SERVICE +URL +STATE$/m);
    assert.match(output, new RegExp(`^ingest +${url} +ready$`, "m"));
    assert.match(output, /^push +http:\/\/127\.0\.0\.1:1 +unreachable/m);
  });

  it("prints the same as YAML and JSON", async () => {
    const yaml = await run(["--ingest", url, "--push", "http://127.0.0.1:1", "version", "-o", "yaml"]);
    assert.match(yaml, /^clientVersion: 0\.0\.0$/m);
    assert.match(yaml, /^ {4}state: ready$/m);
    const json = JSON.parse(await run(["--ingest", url, "version", "-o", "json"]));
    assert.equal(json.services[0].state, "ready");
  });
});
