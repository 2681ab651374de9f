import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { agentSettings } from "../src/settings.js";

const parse = (env: Record<string, string>) => parseSettings(agentSettings, env);

describe("agent settings", () => {
  test("default to Istio's names, ports and ./-relative paths", () => {
    const settings = parse({ INSTANCE_IP: "10.0.0.5" });
    assert.equal(settings.HTTP_PORT, 15020);
    assert.equal(settings.CA_ADDR, "localhost:8060");
    assert.equal(settings.XDS_ADDR, "localhost:15012");
    assert.deepEqual(settings.XDS_SERVER_SPIFFE_ID, {
      trustDomain: "cluster.local",
      namespace: "istio-system",
      serviceAccount: "sextant-push",
    });
    assert.equal(settings.CA_ROOT_CERT, "./var/run/secrets/istio/root-cert.pem");
    assert.equal(settings.TOKEN_FILE, "./var/run/secrets/tokens/istio-token");
    assert.equal(settings.SDS_SOCKET, "./var/run/secrets/workload-spiffe-uds/socket");
    assert.equal(settings.XDS_SOCKET, "./etc/istio/proxy/XDS");
    assert.equal(settings.OUTPUT_CERTS, "./var/lib/istio/data");
    assert.equal(settings.GRPC_XDS_BOOTSTRAP, undefined);
    assert.equal(settings.XDS_PROXY_PORT, 15010);
    assert.equal(settings.SECRET_TTL, 86_400);
    assert.equal(settings.SECRET_GRACE_PERIOD_RATIO, 0.5);
    assert.equal(settings.SECRET_GRACE_PERIOD_RATIO_JITTER, 0.01);
    assert.equal(settings.TRUST_DOMAIN, "cluster.local");
    assert.equal(settings.POD_NAMESPACE, "default");
    assert.equal(settings.SERVICE_ACCOUNT, "default");
  });

  test("accept push in the workload's trust domain unless told otherwise", () => {
    assert.deepEqual(parse({ TRUST_DOMAIN: "example.org" }).XDS_SERVER_SPIFFE_ID, {
      trustDomain: "example.org",
      namespace: "istio-system",
      serviceAccount: "sextant-push",
    });
    assert.deepEqual(
      parse({ TRUST_DOMAIN: "example.org", XDS_SERVER_SPIFFE_ID: "spiffe://mesh.example/ns/cp/sa/xds" })
        .XDS_SERVER_SPIFFE_ID,
      { trustDomain: "mesh.example", namespace: "cp", serviceAccount: "xds" },
    );
  });

  test("detect the instance IP when INSTANCE_IP is unset", () => {
    assert.ok(parse({}).INSTANCE_IP.length > 0);
  });

  test("an empty OUTPUT_CERTS turns the certificate files off", () => {
    assert.equal(parse({ OUTPUT_CERTS: "" }).OUTPUT_CERTS, undefined);
  });

  test("a bad value names its variable and what it had", () => {
    assert.throws(
      () =>
        parse({
          SECRET_TTL: "forever",
          SECRET_GRACE_PERIOD_RATIO: "1.5",
          INSTANCE_IP: "not-an-ip",
          XDS_SERVER_SPIFFE_ID: "https://push.istio-system",
          XDS_PROXY_PORT: "70000",
          ISTIO_METAJSON_LABELS: "{app: web}",
        }),
      (error: unknown) => {
        assert.ok(error instanceof SettingsError);
        for (const name of [
          'SECRET_TTL: must be a positive duration such as 3600, 90s, 24h or 90d (got "forever")',
          "SECRET_GRACE_PERIOD_RATIO",
          'INSTANCE_IP: must be an IPv4 or IPv6 address (got "not-an-ip")',
          "XDS_SERVER_SPIFFE_ID: must be a SPIFFE ID",
          "XDS_PROXY_PORT",
          "ISTIO_METAJSON_LABELS: must be a JSON object",
        ])
          assert.ok(error.message.includes(name), `${name} in:\n${error.message}`);
        return true;
      },
    );
  });

  test("labels must be strings", () => {
    assert.throws(
      () => parse({ ISTIO_METAJSON_LABELS: '{"replicas": 3}' }),
      /ISTIO_METAJSON_LABELS: label values must be strings \(label "replicas"/,
    );
  });

  test("ISTIO_META_* and ISTIO_METAJSON_* become node metadata, as in Istio", () => {
    const settings = parse({
      INSTANCE_IP: "10.0.0.5",
      ISTIO_META_CLUSTER_ID: "east",
      ISTIO_META_NETWORK: "net-1",
      ISTIO_METAJSON_LABELS: '{"app":"web","version":"v2"}',
      ISTIO_METAJSON_ANNOTATIONS: '{"NETWORK":"from-json"}',
      PATH: "/usr/bin",
    });
    assert.deepEqual(settings.LABELS, { app: "web", version: "v2" });
    assert.deepEqual(settings.NODE_METADATA, {
      // Istio merges every ISTIO_METAJSON_* object at the top level...
      app: "web",
      version: "v2",
      // ... and an explicit ISTIO_META_* wins over a merged key.
      NETWORK: "net-1",
      CLUSTER_ID: "east",
    });
    assert.equal((settings as Record<string, unknown>).PATH, undefined, "other variables are not kept");
    assert.equal((settings as Record<string, unknown>).ISTIO_META_CLUSTER_ID, undefined);
  });
});
