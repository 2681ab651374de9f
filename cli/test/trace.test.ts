import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { type ClientDuplexStream, credentials } from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  type DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import {
  DEBUG_HEADERS,
  debugTokenEnv,
  eventually,
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { buildProgram } from "../src/main.js";

const HOST = "reviews.default.svc.cluster.local";
const CLUSTER = `outbound|9080||${HOST}`;

/** Runs sextantctl in-process: what it printed to stdout and stderr, and its exit code. */
async function run(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const { log, error } = console;
  console.log = (...parts: unknown[]) => stdout.push(parts.join(" "));
  console.error = (...parts: unknown[]) => stderr.push(parts.join(" "));
  process.exitCode = 0;
  try {
    await buildProgram().parseAsync(["node", "sextantctl", ...args]);
  } finally {
    console.log = log;
    console.error = error;
  }
  const code = Number(process.exitCode ?? 0);
  process.exitCode = 0;
  return { stdout: stdout.join("\n"), stderr: stderr.join("\n"), code };
}

/**
 * A raw proxyless ADS client watching reviews' cluster: it ACKs every
 * response, or, once told to, NACKs them with its own message, as a gRPC
 * client rejecting a cluster would.
 */
class AdsClient {
  readonly #client: AggregatedDiscoveryServiceClient;
  readonly #stream: ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  readonly #node: Node;
  #acked = "";
  responses = 0;
  nackWith: string | undefined;

  constructor(
    address: string,
    readonly id: string,
  ) {
    this.#node = Node.fromPartial({
      id: `sidecar~127.0.0.1~${id}.default~default.svc.cluster.local`,
      metadata: { GENERATOR: "grpc", NAMESPACE: "default", SERVICE_ACCOUNT: "default" },
      userAgentName: "sextantctl-test",
    });
    this.#client = new AggregatedDiscoveryServiceClient(address, credentials.createInsecure());
    this.#stream = this.#client.streamAggregatedResources();
    this.#stream.on("error", () => {});
    this.#stream.on("data", (response: DiscoveryResponse) => {
      this.responses++;
      const nack = this.nackWith;
      if (!nack) this.#acked = response.versionInfo;
      this.#stream.write(this.request(response.nonce, nack));
    });
    this.#stream.write(this.request("", undefined));
  }

  close(): void {
    this.#stream.cancel();
    this.#client.close();
  }

  private request(nonce: string, nack: string | undefined): DiscoveryRequest {
    return {
      versionInfo: this.#acked,
      node: this.#node,
      resourceNames: [CLUSTER],
      resourceLocators: [],
      typeUrl: TypeUrl.Cluster,
      responseNonce: nonce,
      errorDetail: nack ? { code: 3, message: nack, details: [] } : undefined,
    };
  }
}

/** reviews' DestinationRule with a connect timeout, which changes the cluster a gRPC client is sent. */
const destinationRule = (connectTimeout: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    connectionPool: {tcp: {connectTimeout: ${connectTimeout}}}
`;

describe("sextantctl trace against nats-server, ingest, discovery and push", () => {
  let nats: NatsServerFixture;
  let ingest: ServiceProcess;
  let discovery: ServiceProcess;
  let push: ServiceProcess;
  let xdsAddress = "";
  const clients: AdsClient[] = [];
  const sextantctl = (...args: string[]) => run(["--ingest", `http://127.0.0.1:${ingest.httpPort}`, ...args]);
  const apply = async (yaml: string) => {
    const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
      method: "POST",
      body: yaml,
    });
    assert.equal(response.status, 200, await response.text());
  };

  before(async () => {
    nats = await startNatsServer();
    ingest = await startServiceProcess("ingest", { NATS_URL: nats.url, API_AUTH: "none" });
    discovery = await startServiceProcess("discovery", {
      NATS_URL: nats.url,
      INGEST_URL: `http://127.0.0.1:${ingest.httpPort}`,
    });
    await apply(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${HOST}]
  location: MESH_INTERNAL
  ports: [{number: 9080, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.1}]
`);
    const xdsPort = await freePort();
    xdsAddress = `127.0.0.1:${xdsPort}`;
    push = await startServiceProcess("push", {
      NATS_URL: nats.url,
      // /debug/syncz accepts DEBUG_HEADERS' token.
      ...debugTokenEnv(),
      XDS_PLAINTEXT_ENABLED: "true",
      XDS_PORT: String(xdsPort),
      XDS_TLS_ENABLED: "false",
      PUSH_DEBOUNCE_AFTER: "50",
      STATUS_FLUSH_MS: "100",
      REPLICA_ID: "push-0",
    });
    clients.push(new AdsClient(xdsAddress, "a"), new AdsClient(xdsAddress, "b"));
    await eventually(async () => clients.every((client) => client.responses > 0), {
      timeoutMs: 20_000,
      message: "the ADS clients got no cluster",
    });
  });

  after(async () => {
    for (const client of clients) client.close();
    await push?.stop();
    await discovery?.stop();
    await ingest?.stop();
    await nats?.stop();
  });

  it("lists every proxy's ACK of an applied change and exits 0", async () => {
    await apply(destinationRule("5s"));
    const { stdout, stderr, code } = await sextantctl(
      "trace",
      "DestinationRule/default/reviews",
      "--wait",
      "20",
    );
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    assert.match(stdout, /^DestinationRule default\/reviews generation 1, trace [0-9a-f]{32}$/m);
    assert.match(stdout, /^stored by ingest at \S+ \(changed by /m);
    assert.match(stdout, /^PushContext built by push-0 at \S+ \(\+\d+ms\)$/m);
    for (const id of ["a", "b"])
      assert.match(
        stdout,
        new RegExp(
          `│ sidecar~127\\.0\\.0\\.1~${id}\\.default\\S* *│ push-0 *│ ACKED *│ CDS *│ \\+\\d+ms *│ \\+\\d+ms *│ - *│`,
        ),
      );
    assert.match(stdout, /^all 2 proxies ACKed the change or needed nothing from it$/m);

    const json = JSON.parse((await sextantctl("trace", "dr/reviews", "-n", "default", "-o", "json")).stdout);
    assert.equal(json.complete, true);
    assert.equal(json.stored.generation, 1);
    // Proxy status records, per type, the trace of the last change sent and ACKed.
    const syncz = (await (
      await fetch(`http://127.0.0.1:${push.httpPort}/debug/syncz`, { headers: DEBUG_HEADERS })
    ).json()) as Array<{
      proxyId: string;
      types: Record<string, { traceIdSent: string; traceIdAcked: string }>;
    }>;
    assert.equal(syncz.length, 2);
    for (const proxy of syncz)
      assert.deepEqual(proxy.types[TypeUrl.Cluster], {
        ...proxy.types[TypeUrl.Cluster],
        traceIdSent: json.stored.traceId,
        traceIdAcked: json.stored.traceId,
      });
  });

  it("shows a proxy's NACK with its message and exits 1 while it has not ACKed", async () => {
    const nacker = new AdsClient(xdsAddress, "c");
    clients.push(nacker);
    await eventually(async () => nacker.responses > 0, { timeoutMs: 20_000 });
    nacker.nackWith = "cluster outbound|9080||reviews: connect_timeout 7s is refused by this test";
    await apply(destinationRule("7s"));
    const { stdout, code } = await eventually(
      async () => {
        const result = await sextantctl("trace", "DestinationRule/default/reviews");
        return /NACKED/.test(result.stdout) && (result.stdout.match(/ACKED *│ CDS/g) ?? []).length === 3
          ? result
          : undefined;
      },
      { timeoutMs: 20_000, message: "the trace never showed c's NACK beside a's and b's ACKs" },
    );
    assert.equal(code, 1, stdout);
    assert.match(stdout, /generation 2,/);
    assert.match(
      stdout,
      /│ sidecar~127\.0\.0\.1~c\.default\S* *│ push-0 *│ NACKED *│ CDS *│ \+\d+ms *│ - *│ \+\d+ms *│/,
    );
    assert.match(
      stdout,
      /^sidecar~127\.0\.0\.1~c\.default~default\.svc\.cluster\.local NACKed CDS: cluster outbound\|9080\|\|reviews: connect_timeout 7s is refused by this test$/m,
    );
    assert.match(stdout, /^1 of 3 proxies have not ACKed the change$/m);
  });

  it("says what failed and what to do for a resource with no recorded change, exit 1", async () => {
    const { stderr, code } = await sextantctl("trace", "VirtualService/default/nothing");
    assert.equal(code, 1);
    assert.match(
      stderr,
      /^error: no change of VirtualService default\/nothing was recorded in the last hour \(traces expire after an hour\): check the kind, namespace and name, or apply a change and trace it within the hour$/,
    );
  });
});

describe("sextantctl trace usage", () => {
  it("exits 2 with what is expected for a malformed resource", () => {
    const result = spawnSync(
      process.execPath,
      [
        "--conditions=@sextant/source",
        "--import",
        "tsx",
        fileURLToPath(new URL("../src/main.ts", import.meta.url)),
        "trace",
        "reviews",
      ],
      { encoding: "utf8" },
    );
    assert.equal(result.status, 2, result.stderr);
    assert.match(
      result.stderr,
      /expected KIND\/NAMESPACE\/NAME \(e\.g\. VirtualService\/default\/reviews\) or KIND\/NAME/,
    );
  });
});
