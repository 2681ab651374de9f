// biome-ignore-all lint/suspicious/noExplicitAny: admission responses and pods are untyped JSON here.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startService } from "@sextant/runtime";
import {
  eventually,
  type FakeKubeApiServer,
  freePort,
  type NatsServerFixture,
  startFakeKubeApiServer,
  startNatsServer,
} from "@sextant/testing";
import { webhookService } from "../src/main.js";
import { podAdmissionReview, post, selfSignedCert } from "./helpers.js";

const node = (name: string, kubeletVersion: string) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name },
  status: { nodeInfo: { kubeletVersion } },
});

const review = (uid: string) =>
  JSON.stringify(
    podAdmissionReview(uid, "default", {
      metadata: { name: uid },
      spec: { containers: [{ name: "app", image: "app" }] },
    }),
  );

describe("ENABLE_NATIVE_SIDECARS=auto in the server (the nodes' kubelet versions)", () => {
  let nats: NatsServerFixture;
  let kube: FakeKubeApiServer;

  before(async () => {
    nats = await startNatsServer();
    kube = await startFakeKubeApiServer();
    kube.apply(node("a", "v1.33.1"));
    kube.apply(node("b", "v1.34.0"));
  });
  after(async () => {
    await kube?.close();
    await nats?.dispose();
  });

  it("injects native sidecars while every node runs 1.33+, classic ones once an older node joins", async () => {
    const tls = selfSignedCert();
    const kubeconfig = join(tls.dir, "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    const httpsPort = await freePort();
    const service = await startService(webhookService, {
      NATS_URL: nats.url,
      HTTP_PORT: "0",
      HTTPS_PORT: String(httpsPort),
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      KUBECONFIG: kubeconfig,
      NODE_RESYNC_INTERVAL_MS: "100",
      LOG_LEVEL: "silent",
      OTEL_SDK_DISABLED: "true",
    });
    const patchOf = async (uid: string) => {
      const answer = (await post(httpsPort, "/inject", review(uid), tls.cert)).json();
      return JSON.parse(Buffer.from(answer.response.patch, "base64").toString("utf8")) as any[];
    };
    const nativeProxy = (patch: any[]) =>
      patch.some(
        (op) =>
          op.path.startsWith("/spec/initContainers") &&
          JSON.stringify(op.value).includes('"name":"istio-proxy"') &&
          JSON.stringify(op.value).includes('"restartPolicy":"Always"'),
      );
    try {
      assert.equal(nativeProxy(await patchOf("first")), true);
      kube.apply(node("c", "v1.32.4"));
      await eventually(async () => !nativeProxy(await patchOf("later")));
    } finally {
      await service.stop();
    }
  });
});
