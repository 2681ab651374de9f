import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Buckets, type Bus, encodeKey } from "@sextant/bus";
import { credentialKey } from "@sextant/model";
import { Credential, Service } from "@sextant/proto";
import { type DiscoveryResponse, Secret, TypeUrl } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import {
  DEBUG_HEADERS,
  eventually,
  metricValue,
  type NatsServerFixture,
  startNatsServer,
} from "@sextant/testing";
import { credentialSecretConfig } from "../src/translate/sidecar/cluster-tls.js";
import { formatViolation, validateResource } from "./envoy-validate.js";
import { AdsTestClient, type PushFixture, putConfig, startPush, testBus } from "./harness.js";

/** A gateway pod's node, as the agent's `proxy router` announces it. */
function routerNode(namespace: string, labels: Record<string, string>, pod = "ingress-1") {
  return Node.fromPartial({
    id: `router~10.0.0.5~${pod}.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, LABELS: labels },
  });
}

function sidecarNode(namespace: string, labels: Record<string, string>) {
  return Node.fromPartial({
    id: `sidecar~10.0.0.6~app-1.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, LABELS: labels },
  });
}

const INGRESS = { istio: "ingressgateway" };

/** The response's secrets by name; each must pass Envoy's proto validation rules. */
function secretsOf(response: DiscoveryResponse): Map<string, Secret> {
  assert.equal(response.typeUrl, TypeUrl.Secret);
  return new Map(
    response.resources.map((any) => {
      assert.deepEqual(validateResource(TypeUrl.Secret, any.value).map(formatViolation), []);
      const secret = Secret.decode(any.value);
      return [secret.name, secret];
    }),
  );
}

const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString();

describe("SDS: credentialName Secrets served by name, to the proxies config entitles", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let push: PushFixture;
  const clients: AdsTestClient[] = [];
  const connect = () => {
    const client = new AdsTestClient(push.xdsAddress);
    clients.push(client);
    return client;
  };
  const putCredential = async (namespace: string, name: string, fields: Partial<Credential>) =>
    (await bus.bucket(Buckets.credentials)).put(
      credentialKey({ namespace, name }),
      Credential.fromPartial({ namespace, name, secretType: "kubernetes.io/tls", ...fields }),
    );
  const errors = async () =>
    metricValue(await (await fetch(`${push.httpUrl}/metrics`)).text(), "pilot_sds_certificate_errors_total");
  const ask = async (client: AdsTestClient, node: Node | undefined, names: string[]) => {
    client.send({ ...(node ? { node } : {}), typeUrl: TypeUrl.Secret, resourceNames: names });
    return client.next();
  };

  before(async () => {
    nats = await startNatsServer();
    bus = await testBus(nats.url);
    await putCredential("istio-system", "web-cred", {
      certificateChain: Buffer.from("CHAIN-1"),
      privateKey: Buffer.from("KEY-1"),
    });
    await putCredential("istio-system", "web-cred-cacert", { caCertificate: Buffer.from("CLIENT-CA") });
    await putCredential("istio-system", "web-ecdsa", {
      certificateChain: Buffer.from("ECDSA-CHAIN"),
      privateKey: Buffer.from("ECDSA-KEY"),
    });
    await putCredential("istio-system", "unnamed-here", {
      certificateChain: Buffer.from("X"),
      privateKey: Buffer.from("Y"),
    });
    await putCredential("default", "web-cred", {
      certificateChain: Buffer.from("DEFAULT-CHAIN"),
      privateKey: Buffer.from("DEFAULT-KEY"),
    });
    await putCredential("default", "client-cred", {
      certificateChain: Buffer.from("CLIENT-CHAIN"),
      privateKey: Buffer.from("CLIENT-KEY"),
      caCertificate: Buffer.from("SERVER-CA"),
    });
    // A Gateway in default selecting the ingress gateway of istio-system: its
    // plain credentialName is read from the gateway's namespace, as istiod does.
    await putConfig(bus, {
      kind: "Gateway",
      namespace: "default",
      name: "web",
      spec: {
        selector: INGRESS,
        servers: [
          {
            port: { number: 443, name: "https", protocol: "HTTPS" },
            hosts: ["web.example.com"],
            tls: { mode: "MUTUAL", credentialName: "web-cred" },
          },
          {
            port: { number: 8443, name: "https-other", protocol: "HTTPS" },
            hosts: ["other.example.com"],
            tls: { mode: "SIMPLE", credentialName: "default/client-cred" },
          },
          {
            port: { number: 9443, name: "https-dual", protocol: "HTTPS" },
            hosts: ["dual.example.com"],
            tls: { mode: "SIMPLE", credentialNames: ["web-cred", "web-ecdsa"] },
          },
        ],
      },
    });
    await putConfig(bus, {
      kind: "DestinationRule",
      namespace: "default",
      name: "origination",
      spec: {
        host: "api.example.com",
        workloadSelector: { matchLabels: { app: "app" } },
        trafficPolicy: { tls: { mode: "MUTUAL", credentialName: "client-cred" } },
      },
    });
    // A Gateway API Gateway in apps: its internal Gateway applies to the
    // routers behind its Service web-istio (no selector), which may read its Secret.
    await putCredential("apps", "gw-cert", {
      certificateChain: Buffer.from("GW-CHAIN"),
      privateKey: Buffer.from("GW-KEY"),
    });
    await (await bus.bucket(Buckets.services)).put(
      encodeKey("apps", "web-istio.apps.svc.cluster.local"),
      Service.fromPartial({
        hostname: "web-istio.apps.svc.cluster.local",
        namespace: "apps",
        name: "web-istio",
        ports: [{ name: "https", number: 443, targetPort: 443 }],
        selector: { "gateway.networking.k8s.io/gateway-name": "web" },
      }),
    );
    await putConfig(bus, {
      kind: "KubernetesGateway",
      apiVersion: "gateway.networking.k8s.io/v1",
      namespace: "apps",
      name: "web",
      spec: {
        gatewayClassName: "istio",
        listeners: [
          {
            name: "https",
            port: 443,
            protocol: "HTTPS",
            tls: { mode: "Terminate", certificateRefs: [{ name: "gw-cert" }] },
          },
          {
            name: "shared",
            hostname: "shared.example.com",
            port: 443,
            protocol: "HTTPS",
            tls: { mode: "Terminate", certificateRefs: [{ name: "shared-cert", namespace: "certs" }] },
          },
          {
            name: "ungranted",
            hostname: "ungranted.example.com",
            port: 443,
            protocol: "HTTPS",
            tls: { mode: "Terminate", certificateRefs: [{ name: "private-cert", namespace: "private" }] },
          },
        ],
      },
    });
    // certs grants Gateways of apps its Secrets; private grants nothing.
    await putCredential("certs", "shared-cert", {
      certificateChain: Buffer.from("SHARED-CHAIN"),
      privateKey: Buffer.from("SHARED-KEY"),
    });
    await putCredential("private", "private-cert", {
      certificateChain: Buffer.from("PRIVATE-CHAIN"),
      privateKey: Buffer.from("PRIVATE-KEY"),
    });
    await putConfig(bus, {
      kind: "ReferenceGrant",
      apiVersion: "gateway.networking.k8s.io/v1",
      namespace: "certs",
      name: "gateways-of-apps",
      spec: {
        from: [{ group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "apps" }],
        to: [{ group: "", kind: "Secret" }],
      },
    });
    push = await startPush(nats.url);
  });
  after(async () => {
    for (const client of clients) client.close();
    await push?.stop();
    await bus?.close();
    await nats?.dispose();
  });

  it("serves a router the certificate and CA bundle its Gateway names, as kubernetes://<name>", async () => {
    const response = await ask(connect(), routerNode("istio-system", INGRESS), [
      "kubernetes://web-cred",
      "kubernetes://web-cred-cacert",
    ]);
    const secrets = secretsOf(response);
    assert.deepEqual([...secrets.keys()], ["kubernetes://web-cred", "kubernetes://web-cred-cacert"]);
    const certificate = secrets.get("kubernetes://web-cred")?.tlsCertificate;
    assert.equal(
      text(certificate?.certificateChain?.inlineBytes),
      "CHAIN-1",
      "the gateway namespace's Secret",
    );
    assert.equal(text(certificate?.privateKey?.inlineBytes), "KEY-1");
    const validation = secrets.get("kubernetes://web-cred-cacert")?.validationContext;
    assert.equal(text(validation?.trustedCa?.inlineBytes), "CLIENT-CA", "from the -cacert Secret");
  });

  it("serves each Secret of a server's credentialNames (an RSA and an ECDSA certificate)", async () => {
    const response = await ask(connect(), routerNode("istio-system", INGRESS), ["kubernetes://web-ecdsa"]);
    const certificate = secretsOf(response).get("kubernetes://web-ecdsa")?.tlsCertificate;
    assert.equal(text(certificate?.certificateChain?.inlineBytes), "ECDSA-CHAIN");
  });

  it("shows the secrets in /debug/config_dump without the private key", async () => {
    const node = routerNode("istio-system", INGRESS, "ingress-dump");
    await ask(connect(), node, ["kubernetes://web-cred"]);
    const dump = (await (
      await fetch(`${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(node.id)}`, {
        headers: DEBUG_HEADERS,
      })
    ).json()) as { configs: Array<{ typeUrl: string; resources: unknown[] }> };
    const [secret] = dump.configs.find((config) => config.typeUrl === TypeUrl.Secret)?.resources ?? [];
    const certificate = (secret as { tlsCertificate?: Record<string, Record<string, string>> })
      .tlsCertificate;
    assert.ok(certificate?.certificateChain?.inlineBytes, "the chain is shown");
    assert.deepEqual(certificate?.privateKey, { inlineString: "[redacted]" });
  });

  it("pushes a rotated Secret to the router that holds it", async () => {
    const client = connect();
    const first = await ask(client, routerNode("istio-system", INGRESS), ["kubernetes://web-cred"]);
    client.send({
      typeUrl: TypeUrl.Secret,
      resourceNames: ["kubernetes://web-cred"],
      versionInfo: first.versionInfo,
      responseNonce: first.nonce,
    });
    await putCredential("istio-system", "web-cred", {
      certificateChain: Buffer.from("CHAIN-2"),
      privateKey: Buffer.from("KEY-2"),
    });
    const rotated = secretsOf(await client.next()).get("kubernetes://web-cred")?.tlsCertificate;
    assert.equal(text(rotated?.certificateChain?.inlineBytes), "CHAIN-2");
    assert.equal(text(rotated?.privateKey?.inlineBytes), "KEY-2");
  });

  it("refuses another namespace's Secret, even one its Gateway names, and an unnamed one; counts them", async () => {
    const before = await errors();
    const response = await ask(connect(), routerNode("istio-system", INGRESS), [
      "kubernetes://default/client-cred",
      "kubernetes://default/web-cred",
      "kubernetes://unnamed-here",
      "kubernetes://web-cred",
    ]);
    assert.deepEqual([...secretsOf(response).keys()], ["kubernetes://web-cred"]);
    assert.equal((await errors()) - before, 3);
  });

  it("serves a Gateway API Gateway's certificateRef to the routers behind its Service, not to others of its namespace", async () => {
    const behind = await ask(
      connect(),
      routerNode("apps", { "gateway.networking.k8s.io/gateway-name": "web" }, "web-1"),
      ["kubernetes://apps/gw-cert"],
    );
    assert.equal(
      text(secretsOf(behind).get("kubernetes://apps/gw-cert")?.tlsCertificate?.certificateChain?.inlineBytes),
      "GW-CHAIN",
    );
    const other = await ask(
      connect(),
      routerNode("apps", { "gateway.networking.k8s.io/gateway-name": "other" }, "other-1"),
      ["kubernetes://apps/gw-cert"],
    );
    assert.deepEqual([...secretsOf(other).keys()], []);
  });

  it("serves a Gateway API Gateway's routers another namespace's Secret only through a ReferenceGrant", async () => {
    const behind = await ask(
      connect(),
      routerNode("apps", { "gateway.networking.k8s.io/gateway-name": "web" }, "web-2"),
      [
        "kubernetes://certs/shared-cert",
        "kubernetes://private/private-cert",
        "kubernetes://certs/shared-cert-cacert",
      ],
    );
    const secrets = secretsOf(behind);
    assert.deepEqual([...secrets.keys()], ["kubernetes://certs/shared-cert"]);
    assert.equal(
      text(secrets.get("kubernetes://certs/shared-cert")?.tlsCertificate?.certificateChain?.inlineBytes),
      "SHARED-CHAIN",
    );
    const other = await ask(
      connect(),
      routerNode("apps", { "gateway.networking.k8s.io/gateway-name": "other" }, "other-2"),
      ["kubernetes://certs/shared-cert"],
    );
    assert.deepEqual([...secretsOf(other).keys()], [], "a router no Gateway naming it applies to");
  });

  it("refuses a router no Gateway naming the Secret selects", async () => {
    const response = await ask(
      connect(),
      routerNode("istio-system", { istio: "egressgateway" }, "egress-1"),
      ["kubernetes://web-cred", "kubernetes://web-cred-cacert"],
    );
    assert.deepEqual(
      [...secretsOf(response).keys()],
      ["kubernetes://web-cred-cacert"],
      "only the CA bundle, public as in istiod",
    );
  });

  it("serves a sidecar the client certificate a DestinationRule of its namespace selecting it names", async () => {
    const response = await ask(connect(), sidecarNode("default", { app: "app" }), [
      "kubernetes://client-cred",
      "kubernetes://client-cred-cacert",
      "kubernetes://web-cred",
    ]);
    const secrets = secretsOf(response);
    assert.deepEqual([...secrets.keys()], ["kubernetes://client-cred", "kubernetes://client-cred-cacert"]);
    assert.equal(
      text(secrets.get("kubernetes://client-cred-cacert")?.validationContext?.trustedCa?.inlineBytes),
      "SERVER-CA",
      "no -cacert Secret: the credential's own ca.crt",
    );
    const unselected = await ask(connect(), sidecarNode("default", { app: "other" }), [
      "kubernetes://client-cred",
    ]);
    assert.equal(unselected.resources.length, 0, "the rule selects another workload");
  });

  it("serves an egress router the client certificate of a selector-less rule exported to its namespace, not of one kept private", async () => {
    await putCredential("istio-system", "origination-cred", {
      certificateChain: Buffer.from("ORIGIN-CHAIN"),
      privateKey: Buffer.from("ORIGIN-KEY"),
    });
    await putCredential("istio-system", "private-cred", {
      certificateChain: Buffer.from("P"),
      privateKey: Buffer.from("K"),
    });
    await putConfig(bus, {
      kind: "DestinationRule",
      namespace: "default",
      name: "egress-origination",
      spec: {
        host: "api.example.com",
        trafficPolicy: { tls: { mode: "MUTUAL", credentialName: "origination-cred" } },
      },
    });
    await putConfig(bus, {
      kind: "DestinationRule",
      namespace: "default",
      name: "private",
      spec: {
        host: "private.example.com",
        exportTo: ["."],
        trafficPolicy: { tls: { mode: "MUTUAL", credentialName: "private-cred" } },
      },
    });
    const egress = routerNode("istio-system", { istio: "egressgateway" }, "egress-2");
    const names = ["kubernetes://origination-cred", "kubernetes://private-cred"];
    // The rules reach push's snapshot after its debounce: ask until the exported one is served.
    let served: string[] = [];
    await eventually(async () => {
      served = [...secretsOf(await ask(connect(), egress, names)).keys()];
      return served.length > 0;
    });
    assert.deepEqual(served, ["kubernetes://origination-cred"]);
  });
});

describe("credentialSecretConfig: the SDS secret a credentialName names (istiod's ConstructSdsSecretConfigForCredential)", () => {
  it("names kubernetes://<name> over ADS, keeping an explicit kubernetes:// name", () => {
    for (const [name, expected] of [
      ["ratings-client", "kubernetes://ratings-client"],
      ["ratings-client-cacert", "kubernetes://ratings-client-cacert"],
      ["kubernetes://shop/ratings-client", "kubernetes://shop/ratings-client"],
    ] as const) {
      const config = credentialSecretConfig(name);
      assert.equal(config.name, expected);
      assert.deepEqual(config.sdsConfig?.ads, {}, "over the proxy's ADS stream");
      assert.equal(
        config.sdsConfig?.initialFetchTimeout,
        undefined,
        "Envoy's default timeout: never wait for ever",
      );
    }
  });

  it("maps builtin:// to the workload's own default and ROOTCA from the agent", () => {
    assert.equal(credentialSecretConfig("builtin://").name, "default");
    assert.equal(credentialSecretConfig("builtin://-cacert").name, "ROOTCA");
    assert.equal(credentialSecretConfig("builtin://").sdsConfig?.ads, undefined);
  });
});
