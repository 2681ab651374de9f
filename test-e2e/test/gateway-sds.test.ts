// Gateway certificates over SDS end to end (issue 20 §2): real nats-server,
// ingest, discovery (reading a fake kube-apiserver's Secrets) and push
// processes; a raw ADS client as the ingress gateway's router proxy.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  type DiscoveryResponse,
  Secret,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import {
  eventually,
  type FakeKubeApiServer,
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startFakeKubeApiServer,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

const GATEWAY = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bookinfo-gateway, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers:
    - port: {number: 443, name: https, protocol: HTTPS}
      hosts: ["bookinfo.example.com"]
      tls: {mode: SIMPLE, credentialName: bookinfo-cred}
`;

function tlsSecret(chain: string, key: string) {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace: "istio-system", name: "bookinfo-cred" },
    type: "kubernetes.io/tls",
    data: {
      "tls.crt": Buffer.from(chain).toString("base64"),
      "tls.key": Buffer.from(key).toString("base64"),
    },
  };
}

/** The ingress gateway's ADS stream subscribed to its certificate, ACKing as Envoy does; `chain` is the latest. */
function watchSecret(xdsPort: number, name: string) {
  const client = new AggregatedDiscoveryServiceClient(
    `127.0.0.1:${xdsPort}`,
    grpc.credentials.createInsecure(),
  );
  const stream = client.streamAggregatedResources();
  let chain: string | undefined;
  const request = (versionInfo: string, responseNonce: string) => ({
    versionInfo,
    node: Node.fromPartial({
      id: "router~10.9.0.7~istio-ingressgateway-0.istio-system~istio-system.svc.cluster.local",
      metadata: { NAMESPACE: "istio-system", LABELS: { istio: "ingressgateway" } },
      userAgentName: "envoy",
    }),
    resourceNames: [name],
    resourceLocators: [],
    typeUrl: TypeUrl.Secret,
    responseNonce,
    errorDetail: undefined,
  });
  stream.on("data", (response: DiscoveryResponse) => {
    for (const resource of response.resources) {
      const secret = Secret.decode(resource.value);
      if (secret.name === name)
        chain = Buffer.from(secret.tlsCertificate?.certificateChain?.inlineBytes ?? []).toString();
    }
    stream.write(request(response.versionInfo, response.nonce));
  });
  stream.on("error", () => {});
  stream.write(request("", ""));
  return {
    chain: () => chain,
    close() {
      stream.cancel();
      client.close();
    },
  };
}

describe("gateway certificates end to end: a Secret named by a Gateway reaches the router, and its rotation too", () => {
  let nats: NatsServerFixture;
  let kube: FakeKubeApiServer;
  let ingest: ServiceProcess;
  let discovery: ServiceProcess;
  let push: ServiceProcess;
  let xdsPort: number;
  let watch: ReturnType<typeof watchSecret> | undefined;

  before(async () => {
    nats = await startNatsServer();
    kube = await startFakeKubeApiServer({ bookmarkIntervalMs: 500 });
    kube.apply(tlsSecret("CHAIN-1", "KEY-1"));
    const kubeconfig = join(mkdtempSync(join(tmpdir(), "sextant-gwsds-e2e-")), "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    ingest = await startServiceProcess("ingest", { NATS_URL: nats.url, API_AUTH: "none" });
    discovery = await startServiceProcess("discovery", {
      NATS_URL: nats.url,
      KUBERNETES: "on",
      KUBECONFIG: kubeconfig,
    });
    xdsPort = await freePort();
    push = await startServiceProcess("push", {
      NATS_URL: nats.url,
      XDS_PLAINTEXT_ENABLED: "true",
      XDS_PORT: String(xdsPort),
      XDS_TLS_ENABLED: "false",
      PUSH_DEBOUNCE_AFTER: "50",
    });
    const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
      method: "POST",
      body: GATEWAY,
    });
    assert.equal(response.status, 200, await response.text());
  });
  after(async () => {
    watch?.close();
    await push?.stop();
    await discovery?.stop();
    await ingest?.stop();
    await kube?.close();
    await nats?.dispose();
  });

  it("serves kubernetes://bookinfo-cred from the gateway's namespace, then the rotated chain", async () => {
    watch = watchSecret(xdsPort, "kubernetes://bookinfo-cred");
    await eventually(async () => watch?.chain() === "CHAIN-1", {
      timeoutMs: 30_000,
      message: "the router never received the Secret's chain",
    });
    kube.apply(tlsSecret("CHAIN-2", "KEY-2"));
    await eventually(async () => watch?.chain() === "CHAIN-2", {
      timeoutMs: 30_000,
      message: "the rotated chain never reached the router",
    });
  });
});
