// Probe rewriting end to end, webhook patch → agent → app: a pod whose app
// container has an HTTP readiness, a TCP liveness and a gRPC startup probe is
// injected by the webhook; this test plays the kubelet. It runs the app on
// loopback (the pod's IP is 127.0.0.1, its ports the app's real ones), starts
// `agent proxy sidecar` in the injected container's environment and volumes
// (with ca for its certificate and the Envoy test double), and performs each
// probe as the patched pod now declares it: an HTTP GET on the agent's status
// port, which performs the original probe against the app.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import type { ServerUnaryCall, sendUnaryData } from "@grpc/grpc-js";
import {
  captureOutput,
  eventually,
  freePort,
  onCleanup,
  repositoryRoot,
  startGrpcServer,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { defaultInjectionConfig, injectPod, type PodJson } from "@sextant/webhook/inject";
import { type Container, mountProblems, podFacts, proxyContainer, resolveEnv } from "../src/kubelet.js";

const AGENT_MAIN = join(repositoryRoot(), "services", "agent", "src", "main.ts");
const FAKE_ENVOY = join(repositoryRoot(), "services", "agent", "test", "helpers", "fake-envoy.mjs");
const TOKEN = "probe-rewrite-token-0123456789";
/** grpc.health.v1.HealthCheckResponse.ServingStatus. */
const SERVING = 1;
const NOT_SERVING = 2;

function listen(server: TcpServer): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
}

/** grpc.health.v1.Health/Check by hand (no health implementation in the workspace): always `status()`. */
const healthService = (status: () => number) => ({
  definition: {
    check: {
      path: "/grpc.health.v1.Health/Check",
      requestStream: false,
      responseStream: false,
      requestSerialize: (value: Buffer) => value,
      requestDeserialize: (bytes: Buffer) => bytes,
      responseSerialize: (value: Buffer) => value,
      responseDeserialize: (bytes: Buffer) => bytes,
    },
  },
  implementation: {
    // HealthCheckResponse { ServingStatus status = 1 } in wire form.
    check: (_call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) =>
      callback(null, Buffer.from([0x08, status()])),
  },
});

describe("probe rewriting end to end: webhook patch → agent → app", () => {
  const facts = { ip: "127.0.0.1" };
  let appHealthy = true;
  let grpcStatus = SERVING;
  let tcp: TcpServer;
  let ports: { http: number; tcp: number; grpc: number; status: number };
  let app: Container;
  let proxyEnv: Record<string, string>;

  /** What the kubelet does for one of the app's probes, as the patched pod declares it: the HTTP status. */
  async function kubeletProbe(field: "readinessProbe" | "livenessProbe" | "startupProbe"): Promise<number> {
    const { httpGet } = app[field] as { httpGet: { path: string; port: number } };
    const response = await fetch(`http://${facts.ip}:${httpGet.port}${httpGet.path}`, {
      headers: { "User-Agent": "kube-probe/1.31" },
    });
    await response.arrayBuffer();
    return response.status;
  }

  before(async () => {
    // The app: HTTP that can be switched to failing, a TCP listener, a gRPC health server.
    const http = createServer((request, response) =>
      response.writeHead(request.url === "/healthz" && appHealthy ? 200 : 500).end(),
    );
    tcp = createTcpServer((socket) => socket.end());
    const grpc = await startGrpcServer([healthService(() => grpcStatus)]);
    onCleanup("the app's HTTP server", () => http.close());
    onCleanup("the app's TCP listener", () => tcp.close());
    ports = { http: await listen(http), tcp: await listen(tcp), grpc: grpc.port, status: await freePort() };

    // The pod as its author wrote it; the status port annotation puts the agent on an ephemeral port.
    const pod: PodJson = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "web-0",
        namespace: "shop",
        labels: { app: "web" },
        annotations: { "status.sidecar.istio.io/port": String(ports.status) },
      },
      spec: {
        serviceAccountName: "web",
        containers: [
          {
            name: "web",
            image: "shop/web:1",
            ports: [
              { name: "http", containerPort: ports.http },
              { name: "tcp", containerPort: ports.tcp },
              { name: "grpc", containerPort: ports.grpc },
            ],
            readinessProbe: { httpGet: { path: "/healthz", port: "http" }, timeoutSeconds: 2 },
            livenessProbe: { tcpSocket: { port: ports.tcp }, periodSeconds: 5 },
            startupProbe: { grpc: { port: ports.grpc }, failureThreshold: 30 },
          },
        ],
      },
    };
    const injected = injectPod(pod, { namespace: "shop" }, defaultInjectionConfig());
    assert.ok(injected.decision.inject, "the pod was not injected");
    const containers = (injected.pod.spec?.containers ?? []) as Container[];
    app = containers.find((container) => container.name === "web")!;
    const proxy = proxyContainer(injected.pod);
    const problems: string[] = [];
    proxyEnv = resolveEnv(proxy, podFacts(injected.pod, facts.ip), problems);
    assert.deepEqual(problems, []);

    // ca issues the agent's certificate for the pod's projected token.
    const work = mkdtempSync(join(tmpdir(), "sextant-probe-rewrite-"));
    writeFileSync(
      join(work, "tokens.json"),
      JSON.stringify({ [TOKEN]: { namespace: "shop", serviceAccount: "web" } }),
    );
    const nats = await startNatsServer();
    const caPort = await freePort();
    await startServiceProcess("ca", {
      NATS_URL: nats.url,
      GRPC_PORT: String(caPort),
      CA_CERTS_DIR: join(work, "cacerts"),
      BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
      CA_AUTHENTICATORS: "bootstrap-token",
    });

    // The container's "/": what its volumes hold, the agent's working directory (it runs from "/").
    const root = mkdtempSync(join(tmpdir(), "sextant-probe-pod-"));
    const rootCert = readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8");
    assert.deepEqual(mountProblems(injected.pod, proxy, root, { token: TOKEN, rootCert }), []);
    const envoyLog = join(work, "envoy.log");
    // Only what would collide on this shared machine moves: ca's address, Envoy's admin and the xDS proxy ports.
    // push is not run: the probes need neither Envoy's config nor its readiness.
    const proxyConfig = { ...JSON.parse(proxyEnv.PROXY_CONFIG!), proxyAdminPort: await freePort() };
    const agent = spawn(
      process.execPath,
      // tsx by its path: the agent's working directory is the pod's, outside the workspace.
      [
        "--conditions=@sextant/source",
        "--import",
        import.meta.resolve("tsx"),
        AGENT_MAIN,
        ...(proxy.args ?? []),
      ],
      {
        cwd: root,
        detached: true,
        env: {
          PATH: process.env.PATH,
          ...proxyEnv,
          CA_ADDR: `localhost:${caPort}`,
          PROXY_CONFIG: JSON.stringify(proxyConfig),
          XDS_PROXY_PORT: "0",
          OTEL_SDK_DISABLED: "true",
          ENVOY_BINARY: FAKE_ENVOY,
          FAKE_ENVOY_LOG: envoyLog,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const output = captureOutput(agent);
    // The whole group at once: the agent and the Envoy double it started (a test needs no drain).
    onCleanup("the agent and its Envoy", () => {
      try {
        process.kill(-agent.pid!, "SIGKILL");
      } catch {
        // Nothing of the group is left.
      }
    });
    // The agent is ready (its certificate, SDS, xDS proxy) and has started Envoy; or it died saying why.
    const gaveUp = new AbortController();
    const died = new Promise<never>((_, reject) =>
      agent.once("exit", (code) => reject(new Error(`the agent exited with ${code}`))),
    );
    await Promise.race([
      eventually(
        async () =>
          (await fetch(`http://${facts.ip}:${ports.status}/ready`).catch(() => undefined))?.ok &&
          existsSync(envoyLog) &&
          readFileSync(envoyLog, "utf8").includes('"event":"start"'),
        {
          message: "the agent did not become ready with Envoy started",
          timeoutMs: 30_000,
          signal: gaveUp.signal,
        },
      ),
      died,
    ]).catch((error) => {
      gaveUp.abort();
      throw new Error(`${error.message}\n${output()}`);
    });
  });

  test("the webhook points each probe at the agent's status port and hands it the originals", () => {
    for (const [field, suffix] of [
      ["readinessProbe", "readyz"],
      ["livenessProbe", "livez"],
      ["startupProbe", "startupz"],
    ] as const)
      assert.deepEqual(
        (app[field] as { httpGet: unknown }).httpGet,
        { path: `/app-health/web/${suffix}`, port: ports.status },
        field,
      );
    // The probes' own timings stay for the kubelet.
    assert.equal((app.livenessProbe as { periodSeconds: number }).periodSeconds, 5);
    assert.equal((app.startupProbe as { failureThreshold: number }).failureThreshold, 30);
    // The named port is resolved to the container's number: the agent cannot see the pod spec.
    assert.deepEqual(JSON.parse(proxyEnv.ISTIO_KUBE_APP_PROBERS!), {
      "/app-health/web/livez": { tcpSocket: { port: ports.tcp } },
      "/app-health/web/readyz": { httpGet: { path: "/healthz", port: ports.http }, timeoutSeconds: 2 },
      "/app-health/web/startupz": { grpc: { port: ports.grpc } },
    });
  });

  test("readiness (HTTP): 200 while the app answers 200, its 500 when it fails", async () => {
    assert.equal(await kubeletProbe("readinessProbe"), 200);
    appHealthy = false;
    assert.equal(await kubeletProbe("readinessProbe"), 500);
    appHealthy = true;
    assert.equal(await kubeletProbe("readinessProbe"), 200, "recovers with the app");
  });

  test("startup (gRPC): 200 while the app's health is SERVING, 500 when NOT_SERVING", async () => {
    assert.equal(await kubeletProbe("startupProbe"), 200);
    grpcStatus = NOT_SERVING;
    assert.equal(await kubeletProbe("startupProbe"), 500);
    grpcStatus = SERVING;
    assert.equal(await kubeletProbe("startupProbe"), 200, "recovers with the app");
  });

  test("liveness (TCP): 200 while the app listens, 500 once its listener is closed", async () => {
    assert.equal(await kubeletProbe("livenessProbe"), 200);
    await new Promise((resolve) => tcp.close(resolve));
    assert.equal(await kubeletProbe("livenessProbe"), 500);
  });
});
