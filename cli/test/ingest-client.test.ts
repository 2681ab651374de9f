import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Command } from "commander";
import { CommandError, IngestClient } from "../src/ingest-client.js";

describe("IngestClient against an overloaded ingest (429, reason overloaded)", () => {
  let server: Server;
  let url = "";
  /** Answers the server still has to give before it serves: 429 overloaded, then 200. */
  let overloadedAnswers = 0;
  let requests = 0;
  before(async () => {
    server = createServer((request, response) => {
      requests++;
      request.resume();
      if (request.url === "/failed-logins") {
        response.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
        return void response.end(JSON.stringify({ error: "too many failed authentications" }));
      }
      if (overloadedAnswers > 0) {
        overloadedAnswers--;
        // Retry-After 0: the test does not wait out the client's pause.
        response.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
        return void response.end(JSON.stringify({ error: "ingest is overloaded", reason: "overloaded" }));
      }
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ ok: true }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const client = () =>
    new IngestClient(
      new Command()
        .option("--ingest <url>")
        .option("--token <token>")
        .parse(["--ingest", url, "--token", "t"], {
          from: "user",
        }),
    );

  it("repeats the request after Retry-After until ingest serves it", async () => {
    overloadedAnswers = 2;
    requests = 0;
    const answer = await client().request("POST", "/v1/apply", "kind: VirtualService");
    assert.equal(answer.status, 200);
    assert.equal(requests, 3);
  });

  it("gives up after five attempts, saying ingest is overloaded", async () => {
    overloadedAnswers = 100;
    requests = 0;
    await assert.rejects(
      client().request("GET", "/v1/config"),
      (error) => error instanceof CommandError && /ingest is overloaded \(5 attempts\)/.test(error.message),
    );
    assert.equal(requests, 5);
  });

  it("does not repeat a 429 for failed logins", async () => {
    requests = 0;
    await assert.rejects(
      client().request("GET", "/failed-logins"),
      (error) => error instanceof CommandError && /too many failed logins/.test(error.message),
    );
    assert.equal(requests, 1);
  });
});
