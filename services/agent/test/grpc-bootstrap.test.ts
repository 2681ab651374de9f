import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { validateBootstrapConfig } from "@grpc/grpc-js-xds/build/src/xds-bootstrap.js";
import { expectGolden } from "@sextant/testing";
import { bootstrapText } from "../src/bootstrap/from-settings.js";
import { grpcBootstrap, refreshIntervalSeconds } from "../src/bootstrap/grpc-bootstrap.js";
import { proxyNode } from "../src/node/proxy-node.js";
import { REVIEWS_POD } from "./helpers/fixtures.js";

const testdata = join(import.meta.dirname, "testdata");

const bootstrap = (options: { serverUri?: string; certificateDir?: string | undefined; ttl?: number } = {}) =>
  grpcBootstrap({
    node: proxyNode(REVIEWS_POD, "grpc"),
    serverUri: options.serverUri ?? "127.0.0.1:15010",
    certificateDir: "certificateDir" in options ? options.certificateDir : "/var/lib/istio/data",
    certificateTtlSeconds: options.ttl ?? 86_400,
  });

describe("gRPC xDS bootstrap", () => {
  test("matches the golden file", () => {
    expectGolden(join(testdata, "grpc-bootstrap.golden.json"), bootstrapText(bootstrap()));
  });

  test("@grpc/grpc-js-xds accepts it, with its certificate provider and listener template", () => {
    // A round trip through JSON: the app reads the file, not the object.
    const info = validateBootstrapConfig(JSON.parse(bootstrapText(bootstrap())));
    assert.equal(info.xdsServers[0]?.server_uri, "127.0.0.1:15010");
    assert.deepEqual(info.xdsServers[0]?.server_features, ["xds_v3"]);
    assert.equal(
      info.node.id,
      "sidecar~10.244.1.17~reviews-v1-7d9c8b4b7f-x2x9q.bookinfo~bookinfo.svc.cluster.local",
    );
    assert.deepEqual(info.node.locality, { region: "us-east1", zone: "us-east1-b", sub_zone: "rack-7" });
    assert.deepEqual(info.certificateProviders.default, {
      pluginName: "file_watcher",
      config: {
        certificateFile: "/var/lib/istio/data/cert-chain.pem",
        privateKeyFile: "/var/lib/istio/data/key.pem",
        caCertificateFile: "/var/lib/istio/data/root-cert.pem",
        refreshIntervalMs: 900_000,
      },
    });
    assert.equal(info.serverListenerResourceNameTemplate, "xds.istio.io/grpc/lds/inbound/%s");
  });

  test("announces a proxyless node to push (GENERATOR=grpc)", () => {
    const node = bootstrap().node as { metadata: Record<string, unknown> };
    assert.equal(node.metadata.GENERATOR, "grpc");
    assert.equal(node.metadata.ENVOY_STATUS_PORT, undefined);
  });

  test("names the Unix socket when the TCP port is off, and accepts no certificate directory", () => {
    const info = validateBootstrapConfig(
      JSON.parse(
        bootstrapText(bootstrap({ serverUri: "unix:///etc/istio/proxy/XDS", certificateDir: undefined })),
      ),
    );
    assert.equal(info.xdsServers[0]?.server_uri, "unix:///etc/istio/proxy/XDS");
    assert.deepEqual(info.certificateProviders, {});
  });

  test("re-reads the files at most every quarter of the certificate lifetime", () => {
    assert.equal(refreshIntervalSeconds(86_400), 900, "Istio's 900 s for a day-long certificate");
    assert.equal(refreshIntervalSeconds(3600), 900);
    assert.equal(refreshIntervalSeconds(600), 150);
    assert.equal(refreshIntervalSeconds(2), 1, "never below one second");
    const short = validateBootstrapConfig(JSON.parse(bootstrapText(bootstrap({ ttl: 600 }))));
    assert.equal(short.certificateProviders.default?.config.refreshIntervalMs, 150_000);
  });
});
