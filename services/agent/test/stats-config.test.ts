import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { statsConfig } from "../src/bootstrap/stats-config.js";

type Patterns = Array<{ prefix?: string; suffix?: string; safe_regex?: { regex: string } }>;
const patterns = (config: ReturnType<typeof statsConfig>) =>
  (config.stats_matcher as { inclusion_list: { patterns: Patterns } }).inclusion_list.patterns;
const tagNames = (config: ReturnType<typeof statsConfig>) =>
  (config.stats_tags as Array<{ tag_name: string }>).map((tag) => tag.tag_name);

describe("stats config (Istio's getStatsOptions)", () => {
  test("a pod that asks for nothing keeps Istio's required stats only", () => {
    const config = statsConfig({ annotations: {}, proxyConfig: {}, instanceIps: ["10.0.0.1"] });
    assert.deepEqual(patterns(config), [
      { prefix: "reporter=" },
      { prefix: "cluster_manager" },
      { prefix: "listener_manager" },
      { prefix: "server" },
      { prefix: "cluster.xds-grpc" },
      { prefix: "wasm" },
      { suffix: "rbac.allowed" },
      { suffix: "rbac.denied" },
      { suffix: "shadow_allowed" },
      { suffix: "shadow_denied" },
      { safe_regex: { regex: "vhost\\..*\\.route\\..*" } },
      { prefix: "component" },
      { prefix: "istio" },
    ]);
    assert.ok(!tagNames(config).includes("request_host"));
  });

  test("ProxyConfig.proxyStatsMatcher is used when the annotation is not set; the annotation replaces it", () => {
    const proxyConfig = {
      proxyStatsMatcher: {
        inclusionPrefixes: ["upstream_rq"],
        inclusionSuffixes: ["_cx_total"],
        inclusionRegexps: ["a.*"],
      },
    };
    const fromConfig = patterns(statsConfig({ annotations: {}, proxyConfig, instanceIps: ["10.0.0.1"] }));
    assert.deepEqual(fromConfig.slice(1, 3), [{ prefix: "upstream_rq" }, { prefix: "cluster_manager" }]);
    assert.ok(fromConfig.some((pattern) => pattern.suffix === "_cx_total"));
    assert.ok(fromConfig.some((pattern) => pattern.safe_regex?.regex === "a.*"));
    const annotated = patterns(
      statsConfig({
        annotations: { "sidecar.istio.io/statsInclusionPrefixes": "http.{pod_ip}_,tcp" },
        proxyConfig,
        instanceIps: ["10.0.0.1", "fd00::1"],
      }),
    );
    // {pod_ip} becomes each of the pod's IPs; the ProxyConfig prefixes are not merged in.
    assert.deepEqual(annotated.slice(1, 5), [
      { prefix: "http.10.0.0.1_" },
      { prefix: "http.fd00::1_" },
      { prefix: "tcp" },
      { prefix: "cluster_manager" },
    ]);
    assert.ok(!annotated.some((pattern) => pattern.prefix === "upstream_rq"));
  });

  test("extra stat tags from ProxyConfig and the annotation, once each, between mongo_prefix and cache", () => {
    const config = statsConfig({
      annotations: { "sidecar.istio.io/extraStatTags": "request_host,destination_port" },
      proxyConfig: { extraStatTags: ["destination_port", ""] },
      instanceIps: ["10.0.0.1"],
    });
    const names = tagNames(config);
    const mongo = names.indexOf("mongo_prefix");
    assert.deepEqual(names.slice(mongo, mongo + 4), [
      "mongo_prefix",
      "destination_port",
      "request_host",
      "cache",
    ]);
    assert.deepEqual(
      (config.stats_tags as Array<{ regex: string }>)[mongo + 1]?.regex,
      "(destination_port=\\.=(.*?);\\.;)",
    );
  });
});
