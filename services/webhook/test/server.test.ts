// biome-ignore-all lint/suspicious/noExplicitAny: admission responses and pods are untyped JSON here.
import assert from "node:assert/strict";
import { copyFileSync, rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { createLogger, createMetricsRegistry, ReadinessGate } from "@sextant/observability";
import { eventually } from "@sextant/testing";
import { loadInvalidCorpus, loadValidCorpus } from "@sextant/validation/corpus";
import { WebhookMetrics } from "../src/admission/metrics.js";
import { defaultInjectionConfig, injectPod, type PodJson } from "../src/inject/index.js";
import { createAdmissionApp } from "../src/server/app.js";
import { HttpsServerRunner } from "../src/server/https-runner.js";
import { bookinfoDeployments, podCreateReview } from "./bookinfo.js";
import { post, selfSignedCert } from "./helpers.js";

const logger = createLogger({ service: "webhook-test", level: "silent" });
const injection = defaultInjectionConfig();

function validationReview(resource: any, operation = "CREATE", uid = "u1") {
  const [group, version] = String(resource?.apiVersion ?? "networking.istio.io/v1").split("/");
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind: { group, version, kind: String(resource?.kind ?? "VirtualService") },
      namespace: "default",
      operation,
      object: resource,
    },
  };
}

describe("admission over HTTPS", () => {
  const tls = selfSignedCert();
  const readiness = new ReadinessGate();
  let runner: HttpsServerRunner;
  const send = (path: string, body: unknown) =>
    post(
      runner.port,
      path,
      typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body),
      tls.cert,
    );

  before(async () => {
    runner = new HttpsServerRunner({
      port: 0,
      host: "127.0.0.1",
      certFile: tls.certFile,
      keyFile: tls.keyFile,
      reloadIntervalMs: 50,
      handler: () =>
        createAdmissionApp({
          injection,
          metrics: new WebhookMetrics(createMetricsRegistry("webhook-test")),
          logger,
          maxBodyBytes: 64 * 1024,
        }),
      logger,
      readiness,
    });
    await runner.start();
    assert.equal(readiness.ready, true);
  });
  after(async () => {
    await runner.close();
    rmSync(tls.dir, { recursive: true, force: true });
  });

  it("denies every invalid corpus case with the same field paths", async () => {
    const corpus = loadInvalidCorpus();
    assert.ok(corpus.length > 0);
    for (const c of corpus) {
      const res = await send("/validate", validationReview(c.resource, "CREATE", `uid-${c.name}`));
      assert.equal(res.status, 200, c.name);
      const { response } = res.json();
      assert.equal(response.uid, `uid-${c.name}`);
      assert.equal(response.allowed, false, c.name);
      const fields = response.status.details.causes.map((cause: any) => cause.field).sort();
      assert.deepEqual(fields, [...c.errors].sort(), `${c.name}: ${response.status.message}`);
      for (const path of c.errors.filter(Boolean)) assert.ok(response.status.message.includes(path), c.name);
    }
  });

  it("allows every valid corpus case, on CREATE and UPDATE", async () => {
    for (const c of loadValidCorpus()) {
      for (const op of ["CREATE", "UPDATE"]) {
        const { response } = (await send("/validate", validationReview(c.resource, op))).json();
        assert.equal(response.allowed, true, `${c.name}: ${response.status?.message}`);
        if (response.warnings) assert.ok(response.warnings.every((w: unknown) => typeof w === "string"));
      }
    }
  });

  it("allows DELETE without looking at the object", async () => {
    const { response } = (
      await send("/validate", validationReview({ kind: "VirtualService" }, "DELETE"))
    ).json();
    assert.equal(response.allowed, true);
  });

  it("injects a Bookinfo pod over HTTPS with the pure function's patch", async () => {
    const d = bookinfoDeployments()[0]!;
    const review = podCreateReview(d);
    const { response } = (await send("/inject", review)).json();
    assert.equal(response.allowed, true);
    assert.equal(response.patchType, "JSONPatch");
    const patch = JSON.parse(Buffer.from(response.patch, "base64").toString());
    assert.deepEqual(
      patch,
      injectPod(review.request.object as PodJson, { namespace: "default" }, injection).patch,
    );
  });

  it("answers bad input with 400 or allowed: false, and keeps serving", async () => {
    const cases: Array<[string, string, unknown, (r: Awaited<ReturnType<typeof send>>) => void]> = [
      ["not JSON", "/validate", "{not json", (r) => assert.equal(r.status, 400)],
      ["JSON but not an object", "/inject", "[1,2]", (r) => assert.equal(r.status, 400)],
      ["empty object", "/validate", {}, (r) => assert.equal(r.status, 400)],
      [
        "wrong apiVersion",
        "/validate",
        { ...validationReview({}), apiVersion: "admission.k8s.io/v1beta1" },
        (r) => {
          assert.equal(r.status, 200);
          assert.equal(r.json().response.allowed, false);
          assert.match(r.json().response.status.message, /apiVersion/);
        },
      ],
      [
        "no uid",
        "/inject",
        { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { operation: "CREATE" } },
        (r) => {
          assert.equal(r.status, 400);
          assert.match(r.text, /uid/);
        },
      ],
      [
        "unexpected kind on /validate",
        "/validate",
        validationReview({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x" } }),
        (r) => {
          assert.equal(r.json().response.allowed, false);
          assert.match(r.json().response.status.message, /unexpected kind/);
        },
      ],
      [
        "unexpected kind on /inject",
        "/inject",
        validationReview({ apiVersion: "networking.istio.io/v1", kind: "VirtualService" }),
        (r) => {
          assert.equal(r.json().response.allowed, false);
          assert.match(r.json().response.status.message, /unexpected kind/);
        },
      ],
      [
        "object not an object",
        "/validate",
        validationReview("hello"),
        (r) => assert.equal(r.json().response.allowed, false),
      ],
      [
        "huge body",
        "/validate",
        Buffer.alloc(200 * 1024, "a"),
        (r) => {
          assert.equal(r.status, 400);
          assert.match(r.text, /larger than/);
        },
      ],
      [
        "invalid injection annotation",
        "/inject",
        (() => {
          const review = podCreateReview(bookinfoDeployments()[0]!);
          (review.request.object.metadata as any).annotations = {
            "traffic.sidecar.istio.io/excludeOutboundPorts": "x",
          };
          return review;
        })(),
        (r) => {
          assert.equal(r.json().response.allowed, false);
          assert.match(r.json().response.status.message, /excludeOutboundPorts/);
        },
      ],
    ];
    for (const [name, path, body, check] of cases) {
      const res = await send(path, body);
      try {
        check(res);
      } catch (error) {
        throw new Error(`${name}: ${(error as Error).message} (got ${res.status} ${res.text.slice(0, 200)})`);
      }
    }
    const { response } = (
      await send("/validate", validationReview({ kind: "VirtualService" }, "DELETE"))
    ).json();
    assert.equal(response.allowed, true, "still serving");
  });

  it("serves a rotated certificate without a restart", async () => {
    const before = (await send("/validate", validationReview({}, "DELETE"))).peerFingerprint;
    const next = selfSignedCert();
    copyFileSync(next.keyFile, tls.keyFile);
    copyFileSync(next.certFile, tls.certFile);
    tls.cert = next.cert;
    await eventually(async () => {
      const res = await send("/validate", validationReview({}, "DELETE"));
      assert.notEqual(res.peerFingerprint, before);
      return true;
    });
    rmSync(next.dir, { recursive: true, force: true });
  });
});
