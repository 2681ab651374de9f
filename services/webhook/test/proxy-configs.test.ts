// biome-ignore-all lint/suspicious/noExplicitAny: injected pods are untyped JSON here.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { checkGoldenDir } from "@sextant/testing";
import { parseAllDocuments, stringify } from "yaml";
import { admitInjection } from "../src/admission/inject.js";
import {
  defaultInjectionConfig,
  effectiveProxyConfig,
  injectPod,
  type PodJson,
  proxyConfigsOf,
} from "../src/inject/index.js";
import { imageOfType, mergeProxyConfig } from "../src/inject/proxy-configs.js";

const testdata = join(import.meta.dirname, "testdata", "inject-proxyconfig");
const config = defaultInjectionConfig();

const containerOf = (pod: any, name: string) =>
  [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c: any) => c.name === name);

describe("ProxyConfig in injection", () => {
  it("each case's ProxyConfigs and pod give the golden proxy image, env and PROXY_CONFIG", () => {
    checkGoldenDir(testdata, (testCase) => {
      const documents = parseAllDocuments(testCase.input).map((d) => d.toJSON());
      const pod = documents.find((d) => d.kind === "Pod") as PodJson;
      const namespace = pod.metadata?.namespace ?? "default";
      const proxyConfigs = proxyConfigsOf(documents, namespace);
      const injected = injectPod(pod, { namespace, proxyConfigs }, config).pod as any;
      const proxy = containerOf(injected, "istio-proxy");
      const proxyConfig = JSON.parse(proxy.env.find((e: any) => e.name === "PROXY_CONFIG").value);
      return {
        proxy: stringify({
          proxyImage: proxy.image,
          initImage: containerOf(injected, "istio-init")?.image ?? null,
          proxyConfig,
          // The template's variables end at TRUST_DOMAIN; what follows is the ProxyConfigs' and the injector's.
          proxyEnv: proxy.env.slice(proxy.env.findIndex((e: any) => e.name === "TRUST_DOMAIN") + 1),
          initEnv: containerOf(injected, "istio-init")?.env ?? null,
        }),
      };
    });
  });

  it("reaches the /inject answer: admitInjection passes the ProxyConfigs to the injector", () => {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "web-0", namespace: "shop", labels: { app: "web" } },
      spec: { containers: [{ name: "app", image: "example/web:1" }] },
    };
    const response = admitInjection(
      {
        uid: "u1",
        kind: { group: "", version: "v1", kind: "Pod" },
        namespace: "shop",
        operation: "CREATE",
        object: pod,
      } as any,
      config,
      {
        proxyConfigs: () => [
          {
            namespace: "shop",
            name: "pc",
            spec: { concurrency: 3, environmentVariables: {}, selector: undefined, image: undefined },
          },
        ],
      },
    );
    const patch = JSON.parse(Buffer.from(response.patch!, "base64").toString("utf8"));
    assert.match(JSON.stringify(patch), /\\"concurrency\\":3/);
  });

  it("an invalid ProxyConfig among the input documents is refused with its problems", () => {
    assert.throws(
      () =>
        proxyConfigsOf(
          [
            {
              apiVersion: "networking.istio.io/v1beta1",
              kind: "ProxyConfig",
              metadata: { name: "bad" },
              spec: { concurrency: -1 },
            },
          ],
          "shop",
        ),
      /ProxyConfig shop\/bad is invalid: spec.concurrency: concurrency must be greater than or equal to 0/,
    );
  });

  it("without ProxyConfigs the mesh defaults and the annotation stand", () => {
    const defaults = { discoveryAddress: "push:15012", statusPort: 15020 };
    assert.deepEqual(
      effectiveProxyConfig(defaults, undefined, { namespace: "shop", labels: {} }, undefined),
      defaults,
    );
    assert.deepEqual(
      effectiveProxyConfig(
        defaults,
        { rootNamespace: "istio-system", resources: [] },
        { namespace: "shop", labels: {} },
        {
          concurrency: 2,
        },
      ),
      { ...defaults, concurrency: 2 },
    );
  });

  it("merges proxyMetadata key by key and every other field whole, as Istio's MergeProxyConfig", () => {
    assert.deepEqual(
      mergeProxyConfig(
        { concurrency: 1, proxyMetadata: { A: "1", B: "1" }, image: { imageType: "debug" } },
        { proxyMetadata: { B: "2" }, image: {} },
      ),
      { concurrency: 1, proxyMetadata: { A: "1", B: "2" }, image: {} },
    );
  });

  it("suffixes the image's tag with its type as Istio's ProxyImage", () => {
    assert.equal(imageOfType("sextant/proxy:1.2", "distroless"), "sextant/proxy:1.2-distroless");
    assert.equal(imageOfType("sextant/proxy:1.2-debug", "distroless"), "sextant/proxy:1.2-distroless");
    assert.equal(imageOfType("sextant/proxy:1.2-distroless", "default"), "sextant/proxy:1.2");
    assert.equal(imageOfType("sextant/proxy:1.2", "default"), "sextant/proxy:1.2");
    assert.equal(imageOfType("sextant/proxy:1.2", ""), "sextant/proxy:1.2");
    assert.equal(imageOfType("sextant/proxy:1.2", undefined), "sextant/proxy:1.2");
    assert.equal(imageOfType("localhost:5000/proxy:1.2", "debug"), "localhost:5000/proxy:1.2-debug");
    // No tag to suffix: kept.
    assert.equal(imageOfType("localhost:5000/proxy", "debug"), "localhost:5000/proxy");
    assert.equal(imageOfType("sextant/proxy@sha256:abc", "debug"), "sextant/proxy@sha256:abc");
  });
});
