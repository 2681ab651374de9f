import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  containerOf,
  deploymentOf,
  envValue,
  find,
  type KubeObject,
  NAMESPACE,
  ofKind,
  render,
  type ServiceObject,
} from "./helpers.js";

interface Selector {
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

interface Webhook {
  name: string;
  clientConfig: {
    service: { name: string; namespace: string; path: string; port: number };
    caBundle?: string;
  };
  rules: Array<{ operations: string[]; apiGroups: string[]; resources: string[] }>;
  namespaceSelector?: Selector;
  objectSelector?: Selector;
  sideEffects: string;
  admissionReviewVersions: string[];
  failurePolicy: string;
}

type WebhookConfiguration = KubeObject & { webhooks: Webhook[] };

/** The values a selector compares the revision label with. */
const revisionValues = (selector: Selector | undefined) =>
  (selector?.matchExpressions ?? []).filter((e) => e.key === "istio.io/rev").flatMap((e) => e.values ?? []);

describe("the webhook configurations", () => {
  const objects = render("overlays/production");
  const webhook = containerOf(deploymentOf(objects, "webhook"));
  const revision = envValue(webhook, "REVISION");
  const mutating = find<WebhookConfiguration>(
    objects,
    "MutatingWebhookConfiguration",
    envValue(webhook, "INJECTOR_WEBHOOK_CONFIG_NAME"),
  );
  const validating = find<WebhookConfiguration>(
    objects,
    "ValidatingWebhookConfiguration",
    envValue(webhook, "VALIDATION_WEBHOOK_CONFIG_NAME"),
  );

  it("are the ones the webhook keeps the caBundle of, and the only ones", () => {
    assert.equal(ofKind(objects, "MutatingWebhookConfiguration").length, 1);
    assert.equal(ofKind(objects, "ValidatingWebhookConfiguration").length, 1);
    for (const configuration of [mutating, validating]) {
      for (const hook of configuration.webhooks) {
        // Empty: the webhook writes its serving certificate's CA in.
        assert.equal(hook.clientConfig.caBundle, undefined, hook.name);
      }
    }
  });

  it("carry the webhook's revision as istio.io/rev, and select by it", () => {
    assert.equal(mutating.metadata.labels?.["istio.io/rev"], revision);
    assert.equal(validating.metadata.labels?.["istio.io/rev"], revision);
    assert.equal(deploymentOf(objects, "webhook").spec.template.metadata.labels["istio.io/rev"], revision);
    const selected = [...mutating.webhooks, ...validating.webhooks].flatMap((hook) => [
      ...revisionValues(hook.namespaceSelector),
      ...revisionValues(hook.objectSelector),
    ]);
    assert.ok(selected.length > 0);
    assert.deepEqual([...new Set(selected)], [revision]);
  });

  it("inject on pod creation in namespaces labelled istio-injection=enabled or with the revision, and opt-in pods", () => {
    const expressions = (selector: Selector | undefined) =>
      (selector?.matchExpressions ?? []).map((e) =>
        `${e.key} ${e.operator} ${(e.values ?? []).join(",")}`.trim(),
      );
    const byName = new Map(
      mutating.webhooks.map((hook) => [
        hook.name,
        { namespace: expressions(hook.namespaceSelector), object: expressions(hook.objectSelector) },
      ]),
    );
    assert.deepEqual(byName.get("namespace.sidecar-injector.istio.io")?.namespace, [
      "istio-injection In enabled",
    ]);
    assert.deepEqual(byName.get("rev.namespace.sidecar-injector.istio.io")?.namespace, [
      `istio.io/rev In ${revision}`,
      "istio-injection DoesNotExist",
    ]);
    assert.deepEqual(byName.get("rev.object.sidecar-injector.istio.io")?.object, [
      "sidecar.istio.io/inject NotIn false",
      `istio.io/rev In ${revision}`,
    ]);
    assert.deepEqual(byName.get("object.sidecar-injector.istio.io")?.object, [
      "sidecar.istio.io/inject In true",
      "istio.io/rev DoesNotExist",
    ]);
    for (const hook of mutating.webhooks) {
      assert.deepEqual(hook.rules, [
        { operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] },
      ]);
      assert.equal(hook.clientConfig.service.path, "/inject");
    }
    for (const hook of validating.webhooks) assert.equal(hook.clientConfig.service.path, "/validate");
  });

  it("call the webhook's Service, on a port it exposes, with AdmissionReview v1 and no side effects", () => {
    const service = find<ServiceObject>(objects, "Service", "sextant-webhook");
    for (const hook of [...mutating.webhooks, ...validating.webhooks]) {
      const { name, namespace, port } = hook.clientConfig.service;
      assert.equal(name, service.metadata.name);
      assert.equal(namespace, NAMESPACE);
      assert.ok(service.spec.ports.some((p) => p.port === port && p.targetPort === "https-webhook"));
      assert.deepEqual(hook.admissionReviewVersions, ["v1"]);
      assert.equal(hook.sideEffects, "None");
    }
    // An unreachable validator must not block config (ingest validates again); injection fails closed, as Istio's.
    assert.ok(validating.webhooks.every((hook) => hook.failurePolicy === "Ignore"));
    assert.ok(mutating.webhooks.every((hook) => hook.failurePolicy === "Fail"));
  });
});
