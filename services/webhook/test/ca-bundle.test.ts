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
import { caBundleOf } from "../src/cabundle/ca-bundle-patcher.js";
import { webhookService } from "../src/main.js";
import { selfSignedCert } from "./helpers.js";

const webhookConfig = (
  kind: "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
  name: string,
) => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind,
  metadata: { name },
  webhooks: ["a", "b"].map((hook) => ({
    name: `${hook}.sidecar-injector.istio.io`,
    admissionReviewVersions: ["v1"],
    sideEffects: "None",
    clientConfig: {
      service: { name: "sextant-webhook", namespace: "istio-system", path: "/inject", port: 443 },
    },
  })),
});

describe("caBundle of the webhook configurations", () => {
  let nats: NatsServerFixture;
  let kube: FakeKubeApiServer;
  const bundles = (kind: string, name: string) =>
    (
      kube.get({ apiVersion: "admissionregistration.k8s.io/v1", kind, name }) as
        | { webhooks: Array<{ clientConfig: { caBundle?: string } }> }
        | undefined
    )?.webhooks.map((webhook) => webhook.clientConfig.caBundle);

  before(async () => {
    nats = await startNatsServer();
    kube = await startFakeKubeApiServer();
    kube.apply(webhookConfig("MutatingWebhookConfiguration", "istio-sidecar-injector"));
    kube.apply(webhookConfig("ValidatingWebhookConfiguration", "istio-validator-istio-system"));
  });
  after(async () => {
    await kube?.close();
    await nats?.dispose();
  });

  it("patches both configurations with the serving CA, and follows a rotation", async () => {
    const tls = selfSignedCert();
    const kubeconfig = join(tls.dir, "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    const service = await startService(webhookService, {
      NATS_URL: nats.url,
      HTTP_PORT: "0",
      HTTPS_PORT: String(await freePort()),
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      TLS_RELOAD_INTERVAL_MS: "100",
      KUBECONFIG: kubeconfig,
      INJECTOR_WEBHOOK_CONFIG_NAME: "istio-sidecar-injector",
      VALIDATION_WEBHOOK_CONFIG_NAME: "istio-validator-istio-system",
      LOG_LEVEL: "silent",
      OTEL_SDK_DISABLED: "true",
    });
    try {
      const expected = caBundleOf(tls.cert);
      assert.deepEqual(bundles("MutatingWebhookConfiguration", "istio-sidecar-injector"), [
        expected,
        expected,
      ]);
      assert.deepEqual(bundles("ValidatingWebhookConfiguration", "istio-validator-istio-system"), [
        expected,
        expected,
      ]);
      const writes = kube.requestCount({ verb: "update" });

      const rotated = selfSignedCert(tls.dir);
      const next = caBundleOf(rotated.cert);
      assert.notEqual(next, expected);
      await eventually(() => bundles("MutatingWebhookConfiguration", "istio-sidecar-injector")?.[1] === next);
      await eventually(
        () => bundles("ValidatingWebhookConfiguration", "istio-validator-istio-system")?.[0] === next,
      );
      // One write per configuration for the rotation; unchanged bundles are not rewritten.
      await new Promise((resolve) => setTimeout(resolve, 400));
      assert.equal(kube.requestCount({ verb: "update" }) - writes, 2);
    } finally {
      await service.stop();
    }
  });

  it("takes the last certificate of a chain as the CA", () => {
    const leaf = selfSignedCert().cert.trim();
    const root = selfSignedCert().cert.trim();
    assert.equal(caBundleOf(`${leaf}\n${root}\n`), Buffer.from(`${root}\n`).toString("base64"));
    assert.throws(() => caBundleOf("not a certificate"), /no PEM certificate/);
  });
});
