import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import { Buckets, type Bus, encodeKey } from "@sextant/bus";
import { EndpointShard, HealthStatus, Protocol, Resolution, Service } from "@sextant/proto";
import { TypeUrl } from "@sextant/proto/envoy";
import {
  DEBUG_HEADERS,
  eventually,
  freePort,
  type NatsServerFixture,
  startNatsServer,
  trackChildProcess,
} from "@sextant/testing";
import { createTestMeshCa, type TestMeshCa, type WorkloadFiles } from "./fixtures/certs.js";
import { callEcho, EchoClient } from "./fixtures/echo.js";
import { type PushFixture, putConfig, startPush, testBus } from "./harness.js";

const HOST = "reviews.default.svc.cluster.local";
const SERVER_POD = "reviews-v1-acceptance";
const spiffe = (serviceAccount: string) => `spiffe://cluster.local/ns/default/sa/${serviceAccount}`;
const packageDir = fileURLToPath(new URL("..", import.meta.url));

/** A proxyless workload running test/fixtures/proxyless-workload.ts, with its output as JSON lines. */
interface Workload {
  readonly lines: Array<Record<string, unknown>>;
  readonly stderr: string[];
  send(line: string): void;
  stop(): void;
}

function startWorkload(env: Record<string, string>): Workload {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--conditions=@sextant/source", "--import", "tsx", "test/fixtures/proxyless-workload.ts"],
    { cwd: packageDir, env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] },
  );
  trackChildProcess(child);
  const lines: Array<Record<string, unknown>> = [];
  const stderr: string[] = [];
  let buffered = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        stderr.push(line);
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
  return {
    lines,
    stderr,
    send: (line) => child.stdin?.write(`${line}\n`),
    stop: () => child.kill("SIGTERM"),
  };
}

/**
 * A proxyless gRPC bootstrap as istio-agent writes it: push's plaintext ADS
 * port, Istio's node id and metadata, the file_watcher certificate provider
 * "default" over the files the agent keeps fresh, and Istio's server
 * listener name template.
 */
function bootstrap(
  xdsAddress: string,
  pod: string,
  metadata: Record<string, unknown>,
  files: WorkloadFiles,
): string {
  return JSON.stringify({
    xds_servers: [
      { server_uri: xdsAddress, channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] },
    ],
    node: {
      id: `sidecar~127.0.0.1~${pod}.default~default.svc.cluster.local`,
      metadata: { GENERATOR: "grpc", NAMESPACE: "default", INSTANCE_IPS: "127.0.0.1", ...metadata },
      locality: {},
    },
    certificate_providers: {
      default: {
        plugin_name: "file_watcher",
        config: {
          certificate_file: files.certificateFile,
          private_key_file: files.privateKeyFile,
          ca_certificate_file: files.caCertificateFile,
          refresh_interval: "1s",
        },
      },
    },
    server_listener_resource_name_template: "xds.istio.io/grpc/lds/inbound/%s",
  });
}

/** Registers reviews with one endpoint, 127.0.0.1:port, running as serviceAccount (what discovery writes). */
async function registerReviews(bus: Bus, port: number, serviceAccount: string): Promise<void> {
  await (await bus.bucket(Buckets.services)).put(
    encodeKey("default", HOST),
    Service.fromPartial({
      hostname: HOST,
      namespace: "default",
      name: "reviews",
      ports: [{ name: "grpc", number: port, protocol: Protocol.PROTOCOL_GRPC }],
      resolution: Resolution.RESOLUTION_STATIC,
    }),
  );
  await (await bus.bucket(Buckets.endpoints)).put(
    encodeKey("default", HOST, "test"),
    EndpointShard.fromPartial({
      hostname: HOST,
      namespace: "default",
      shard: "test",
      endpoints: [
        {
          address: "127.0.0.1",
          ports: { grpc: port },
          labels: { app: "reviews", version: "v1" },
          namespace: "default",
          serviceAccount,
          health: HealthStatus.HEALTH_STATUS_HEALTHY,
        },
      ],
    }),
  );
}

describe("proxyless gRPC security with a real @grpc/grpc-js-xds XdsServer", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let push: PushFixture;
  let ca: TestMeshCa;
  let port: number;
  let server: Workload;
  const workloads: Workload[] = [];
  const clients: grpc.Client[] = [];
  const identities: Record<string, WorkloadFiles> = {};

  /** A direct (non-xDS) client of the server, with a mesh certificate or none. */
  const directClient = (identity?: WorkloadFiles) => {
    const credentials = identity
      ? grpc.credentials.createSsl(
          Buffer.from(ca.rootPem),
          Buffer.from(identity.keyPem),
          Buffer.from(identity.certPem),
          // Mesh certificates name a SPIFFE id, not a host; the SAN is what push's clusters check.
          { checkServerIdentity: () => undefined },
        )
      : grpc.credentials.createInsecure();
    // Its own subchannels: a shared one could still be backing off from an earlier test's refused handshake.
    const client = new EchoClient(`127.0.0.1:${port}`, credentials, { "grpc.use_local_subchannel_pool": 1 });
    clients.push(client);
    return client;
  };

  const listenerStatus = async () => {
    const syncz = (await (
      await fetch(`${push.httpUrl}/debug/syncz`, { headers: DEBUG_HEADERS })
    ).json()) as Array<{
      proxyId: string;
      types: Record<string, { versionSent: string; versionAcked: string; lastNack?: { message: string } }>;
    }>;
    return syncz.find((entry) => entry.proxyId.includes(SERVER_POD))?.types[TypeUrl.Listener];
  };

  const output = (workload: Workload) =>
    `stdout: ${JSON.stringify(workload.lines)}\nstderr: ${workload.stderr.join("")}`;

  before(async () => {
    nats = await startNatsServer();
    bus = await testBus(nats.url);
    ca = createTestMeshCa();
    for (const account of ["bookinfo-reviews", "bookinfo-productpage", "bookinfo-ratings"])
      identities[account] = ca.issue(account, spiffe(account));
    port = await freePort();
    await registerReviews(bus, port, "bookinfo-reviews");
    await putConfig(bus, {
      kind: "PeerAuthentication",
      apiVersion: "security.istio.io/v1",
      namespace: "istio-system",
      name: "default",
      spec: { mtls: { mode: "STRICT" } },
    });
    await putConfig(bus, {
      kind: "AuthorizationPolicy",
      apiVersion: "security.istio.io/v1",
      name: "reviews-viewer",
      spec: {
        selector: { matchLabels: { app: "reviews" } },
        rules: [
          {
            from: [{ source: { principals: ["cluster.local/ns/default/sa/bookinfo-productpage"] } }],
            to: [{ operation: { methods: ["POST"], paths: ["/sextant.test.Echo/*"] } }],
          },
        ],
      },
    });
    await putConfig(bus, {
      kind: "AuthorizationPolicy",
      apiVersion: "security.istio.io/v1",
      name: "deny-admin",
      spec: { action: "DENY", rules: [{ to: [{ operation: { paths: ["*/Admin"] } }] }] },
    });
    push = await startPush(nats.url);
    server = startWorkload({
      ROLE: "server",
      LISTEN: `127.0.0.1:${port}`,
      GRPC_XDS_EXPERIMENTAL_RBAC: "true",
      GRPC_XDS_BOOTSTRAP_CONFIG: bootstrap(
        push.xdsAddress,
        SERVER_POD,
        { LABELS: { app: "reviews", version: "v1" }, SERVICE_ACCOUNT: "bookinfo-reviews" },
        identities["bookinfo-reviews"]!,
      ),
    });
    workloads.push(server);
  });

  after(async () => {
    for (const client of clients) client.close();
    for (const workload of workloads) workload.stop();
    await push?.stop();
    await bus?.close();
    await nats?.dispose();
    ca?.dispose();
  });

  it("serves on the STRICT listener with RBAC that push sends, and ACKs it", async () => {
    await eventually(() => server.lines.some((line) => line.event === "serving"), {
      timeoutMs: 20_000,
      message: `the XdsServer never started serving\n${output(server)}`,
    });
    const status = await eventually(async () => {
      const listener = await listenerStatus();
      return listener?.versionAcked && listener.versionAcked === listener.versionSent ? listener : undefined;
    });
    assert.equal(status.lastNack, undefined, `the listener was NACKed: ${status.lastNack?.message}`);
  });

  it("requires a mesh certificate, and allows or denies calls by the caller's SPIFFE id and path", async () => {
    const productpage = directClient(identities["bookinfo-productpage"]);
    await eventually(async () => (await callEcho(productpage, "Ping")).code === grpc.status.OK, {
      message: "productpage's call to Ping never succeeded",
    });
    assert.equal(
      (await callEcho(productpage, "Admin")).code,
      grpc.status.PERMISSION_DENIED,
      "DENY of */Admin",
    );
    const ratings = directClient(identities["bookinfo-ratings"]);
    assert.equal(
      (await callEcho(ratings, "Ping")).code,
      grpc.status.PERMISSION_DENIED,
      "ratings is not allowed",
    );
    const plaintext = directClient();
    assert.equal((await callEcho(plaintext, "Ping")).code, grpc.status.UNAVAILABLE, "plaintext got through");
  });

  it("lets an ISTIO_MUTUAL client in through xDS, checking the server's SAN against the endpoints' accounts", async () => {
    await putConfig(bus, {
      kind: "DestinationRule",
      name: "reviews",
      spec: { host: "reviews", trafficPolicy: { tls: { mode: "ISTIO_MUTUAL" } } },
    });
    const client = startWorkload({
      ROLE: "client",
      TARGET: `xds:///${HOST}:${port}`,
      GRPC_XDS_BOOTSTRAP_CONFIG: bootstrap(
        push.xdsAddress,
        "productpage-v1-acceptance",
        { LABELS: { app: "productpage" }, SERVICE_ACCOUNT: "bookinfo-productpage" },
        identities["bookinfo-productpage"]!,
      ),
    });
    workloads.push(client);
    const lastResult = async () => {
      const before = client.lines.length;
      client.send("Ping");
      const result = await eventually(() => client.lines.slice(before).find((l) => l.event === "result"), {
        message: `no answer from the client\n${output(client)}`,
      });
      return result as { code: number; details: string };
    };
    await eventually(async () => (await lastResult()).code === grpc.status.OK, {
      timeoutMs: 20_000,
      message: `the xDS client never reached the server over mTLS\n${output(client)}`,
    });
    // The endpoint now claims another account: the cluster's SANs follow, and the real server's no longer matches.
    await registerReviews(bus, port, "someone-else");
    await eventually(async () => (await lastResult()).code !== grpc.status.OK, {
      timeoutMs: 20_000,
      message: `the client kept trusting a server whose SAN is no longer the endpoint's\n${output(client)}`,
    });
    await registerReviews(bus, port, "bookinfo-reviews");
  });

  it("serves plaintext once the policy is PERMISSIVE, where principals match no one", async () => {
    await putConfig(bus, {
      kind: "PeerAuthentication",
      apiVersion: "security.istio.io/v1",
      namespace: "istio-system",
      name: "default",
      spec: { mtls: { mode: "PERMISSIVE" } },
    });
    const plaintext = directClient();
    // Served now, but reviews-viewer allows only productpage's principal, which a plaintext peer never has.
    await eventually(async () => (await callEcho(plaintext, "Ping")).code === grpc.status.PERMISSION_DENIED, {
      timeoutMs: 20_000,
      message: `the server never switched to plaintext\n${output(server)}`,
    });
    const status = await listenerStatus();
    assert.equal(status?.lastNack, undefined, `the listener was NACKed: ${status?.lastNack?.message}`);
  });

  it("switches back to STRICT without restarting the server", async () => {
    await putConfig(bus, {
      kind: "PeerAuthentication",
      apiVersion: "security.istio.io/v1",
      namespace: "istio-system",
      name: "default",
      spec: { mtls: { mode: "STRICT" } },
    });
    const plaintext = directClient();
    await eventually(async () => (await callEcho(plaintext, "Ping")).code === grpc.status.UNAVAILABLE, {
      timeoutMs: 20_000,
      message: `the server kept serving plaintext\n${output(server)}`,
    });
    const productpage = directClient(identities["bookinfo-productpage"]);
    await eventually(async () => (await callEcho(productpage, "Ping")).code === grpc.status.OK, {
      message: `productpage's mTLS call never succeeded again\n${output(server)}`,
    });
    assert.ok(!server.lines.some((line) => line.event === "error"), output(server));
  });
});
