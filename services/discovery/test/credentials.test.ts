import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Buckets } from "@sextant/bus";
import { credentialKey } from "@sextant/model";
import { Credential, type CredentialPresence } from "@sextant/proto";
import {
  eventually,
  type FakeKubeApiServer,
  selfSignedKeyPair,
  startFakeKubeApiServer,
} from "@sextant/testing";
import { credentialOf, presenceOf } from "../src/credentials/credential.js";
import { CredentialReferences } from "../src/credentials/references.js";
import {
  type DiscoveryFixture,
  NODES,
  podOf,
  sliceOf,
  startDiscovery,
  startIngest,
  startNatsWithClient,
  writeKubeconfig,
} from "./harness.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");

function secret(namespace: string, name: string, type: string, data: Record<string, string>) {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { namespace, name },
    type,
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, b64(value)])),
  };
}

describe("credential references", () => {
  it("covers a plain name in every namespace, a namespace/name in one, and each one's -cacert companion", () => {
    const refs = new CredentialReferences(["gw-cred", "kubernetes://edge/edge-cred", "builtin://", ""]);
    assert.ok(refs.covers("istio-system", "gw-cred"));
    assert.ok(refs.covers("default", "gw-cred"));
    assert.ok(refs.covers("istio-system", "gw-cred-cacert"));
    assert.ok(refs.covers("edge", "edge-cred"));
    assert.ok(refs.covers("edge", "edge-cred-cacert"));
    assert.ok(!refs.covers("default", "edge-cred"), "a namespaced reference names one namespace");
    assert.ok(!refs.covers("default", "other"));
    assert.ok(!refs.covers("default", "cacert"));
    assert.equal(refs.size, 2, "builtin:// and empty names are no Secrets");
  });
});

describe("credentialOf: the keys istiod reads", () => {
  it("reads kubernetes.io/tls's tls.crt, tls.key and ca.crt", () => {
    const c = credentialOf(
      secret("ns", "a", "kubernetes.io/tls", { "tls.crt": "CHAIN", "tls.key": "KEY", "ca.crt": "CA" }),
    );
    assert.deepEqual(
      [c.namespace, c.name, c.secretType, `${c.certificateChain}`, `${c.privateKey}`, `${c.caCertificate}`],
      ["ns", "a", "kubernetes.io/tls", "CHAIN", "KEY", "CA"],
    );
  });

  it("prefers a generic Secret's cert/key/cacert over the tls.* keys", () => {
    const c = credentialOf(
      secret("ns", "a", "Opaque", {
        cert: "G-CHAIN",
        key: "G-KEY",
        cacert: "G-CA",
        "tls.crt": "T-CHAIN",
        "tls.key": "T-KEY",
        "ca.crt": "T-CA",
      }),
    );
    assert.deepEqual(
      [`${c.certificateChain}`, `${c.privateKey}`, `${c.caCertificate}`],
      ["G-CHAIN", "G-KEY", "G-CA"],
    );
  });

  it("never takes the CA's own layout (cacerts: ca-key.pem and friends)", () => {
    const c = credentialOf(
      secret("istio-system", "cacerts", "Opaque", {
        "ca-cert.pem": "CA-CERT",
        "ca-key.pem": "CA-KEY",
        "root-cert.pem": "ROOT",
        "cert-chain.pem": "CHAIN",
      }),
    );
    assert.deepEqual([c.certificateChain.length, c.privateKey.length, c.caCertificate.length], [0, 0, 0]);
  });

  it("takes no half pair: a cert without its key leaves chain and key empty", () => {
    const c = credentialOf(secret("ns", "a", "Opaque", { cert: "CHAIN", "ca.crt": "CA" }));
    assert.deepEqual([c.certificateChain.length, c.privateKey.length, `${c.caCertificate}`], [0, 0, "CA"]);
  });
});

async function apply(ingestUrl: string, yaml: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/apply`, { method: "POST", body: yaml });
  assert.equal(response.status, 200, await response.text());
}

async function remove(ingestUrl: string, kind: string, namespace: string, name: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/config/${kind}/${namespace}/${name}`, { method: "DELETE" });
  assert.equal(response.status, 200, await response.text());
}

const GATEWAY = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: web
  namespace: default
spec:
  selector:
    istio: ingressgateway
  servers:
    - port: { number: 443, name: https, protocol: HTTPS }
      hosts: ["web.example.com"]
      tls:
        mode: SIMPLE
        credentialName: web-cred
`;

const RULE = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: origination
  namespace: default
spec:
  host: api.example.com
  trafficPolicy:
    tls:
      mode: MUTUAL
      credentialName: client-cred
`;

describe("discovery publishes the Secrets that config names, to sextant-credentials", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: Awaited<ReturnType<typeof startIngest>>;
  let kube: FakeKubeApiServer;
  let discovery: DiscoveryFixture;

  const published = async () =>
    new Map(
      (
        (await (await client.bus.bucket(Buckets.credentials)).list()) as Array<{
          key: string;
          value: Credential;
        }>
      ).map((entry) => [entry.key, entry.value]),
    );
  const key = (namespace: string, name: string) => credentialKey({ namespace, name });

  before(async () => {
    client = await startNatsWithClient();
    ingest = await startIngest(client.nats.url, { ANALYSIS_DEBOUNCE_MS: "20", API_AUTH: "none" });
    kube = await startFakeKubeApiServer({ bookmarkIntervalMs: 500 });
    kube.apply(
      secret("istio-system", "web-cred", "kubernetes.io/tls", { "tls.crt": "CHAIN-1", "tls.key": "KEY-1" }),
    );
    kube.apply(secret("istio-system", "web-cred-cacert", "Opaque", { cacert: "CLIENT-CA" }));
    kube.apply(secret("istio-system", "unrelated", "kubernetes.io/tls", { "tls.crt": "X", "tls.key": "Y" }));
    kube.apply(secret("default", "client-cred", "Opaque", { cert: "C", key: "K", cacert: "CA" }));
    await apply(ingest.url, GATEWAY);
    await apply(ingest.url, RULE);
    discovery = await startDiscovery(client.nats.url, {
      KUBERNETES: "on",
      KUBECONFIG: writeKubeconfig(kube),
    });
  });
  after(async () => {
    await discovery?.stop();
    await kube?.close();
    await ingest?.stop();
    await client?.close();
  });

  it("publishes the named Secrets and their -cacert companions, and no other", async () => {
    await eventually(async () => (await published()).size === 3, { message: "three credentials published" });
    const credentials = await published();
    assert.deepEqual(
      [...credentials.keys()].sort(),
      [
        key("default", "client-cred"),
        key("istio-system", "web-cred"),
        key("istio-system", "web-cred-cacert"),
      ].sort(),
    );
    const web = credentials.get(key("istio-system", "web-cred"));
    assert.equal(`${web?.certificateChain}`, "CHAIN-1");
    assert.equal(`${web?.privateKey}`, "KEY-1");
    assert.equal(`${credentials.get(key("istio-system", "web-cred-cacert"))?.caCertificate}`, "CLIENT-CA");
    assert.equal(`${credentials.get(key("default", "client-cred"))?.privateKey}`, "K");
  });

  it("follows a rotated Secret", async () => {
    kube.apply(
      secret("istio-system", "web-cred", "kubernetes.io/tls", { "tls.crt": "CHAIN-2", "tls.key": "KEY-2" }),
    );
    await eventually(
      async () =>
        `${(await published()).get(key("istio-system", "web-cred"))?.certificateChain}` === "CHAIN-2",
      { message: "the rotated chain is published" },
    );
    assert.equal(`${(await published()).get(key("istio-system", "web-cred"))?.privateKey}`, "KEY-2");
  });

  it("deletes a deleted Secret, and the Secrets a removed Gateway named", async () => {
    kube.delete({ apiVersion: "v1", kind: "Secret", namespace: "default", name: "client-cred" });
    await eventually(async () => !(await published()).has(key("default", "client-cred")), {
      message: "the deleted Secret is unpublished",
    });
    await remove(ingest.url, "Gateway", "default", "web");
    await eventually(async () => (await published()).size === 0, {
      message: "nothing named, nothing published",
    });
  });

  it("publishes a Secret again once config names it again", async () => {
    await apply(ingest.url, GATEWAY);
    await eventually(async () => (await published()).has(key("istio-system", "web-cred")), {
      message: "a new reference publishes the Secret",
    });
  });

  it("publishes a Gateway API Gateway's certificateRefs of its own namespace, and another namespace's only with a ReferenceGrant", async () => {
    kube.apply(
      secret("apps", "gw-cert", "kubernetes.io/tls", { "tls.crt": "GW-CHAIN", "tls.key": "GW-KEY" }),
    );
    kube.apply(secret("certs", "shared", "kubernetes.io/tls", { "tls.crt": "S", "tls.key": "K" }));
    await apply(
      ingest.url,
      `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: apps}
spec:
  gatewayClassName: istio
  listeners:
    - name: https
      port: 443
      protocol: HTTPS
      tls: {certificateRefs: [{name: gw-cert}, {name: shared, namespace: certs}]}
`,
    );
    await eventually(async () => (await published()).has(key("apps", "gw-cert")), {
      message: "the certificateRef's Secret is published",
    });
    assert.equal(`${(await published()).get(key("apps", "gw-cert"))?.certificateChain}`, "GW-CHAIN");
    assert.equal((await published()).has(key("certs", "shared")), false);
    // A ReferenceGrant in certs for Gateways of apps makes the other namespace's Secret a reference too.
    await apply(
      ingest.url,
      `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways-of-apps, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: apps}]
  to: [{group: "", kind: Secret}]
`,
    );
    await eventually(async () => (await published()).has(key("certs", "shared")), {
      message: "the granted Secret of another namespace is published",
    });
  });
});

describe("presenceOf: the index's booleans", () => {
  it("says whether a complete pair and a CA are there, and carries no bytes", () => {
    const full = presenceOf(
      credentialOf(
        secret("ns", "a", "kubernetes.io/tls", { "tls.crt": "C", "tls.key": "K", "ca.crt": "CA" }),
      ),
    );
    assert.deepEqual(full, {
      namespace: "ns",
      name: "a",
      hasCertificate: true,
      hasCaCertificate: true,
      certificateProblem: "the certificate is not a PEM certificate",
    });
    const half = presenceOf(credentialOf(secret("ns", "b", "Opaque", { cert: "C" })));
    assert.deepEqual(half, {
      namespace: "ns",
      name: "b",
      hasCertificate: false,
      hasCaCertificate: false,
      certificateProblem: "",
    });
  });

  it("says nothing against a certificate with its own key", async () => {
    const pair = await selfSignedKeyPair();
    const presence = presenceOf(
      credentialOf(
        secret("ns", "c", "kubernetes.io/tls", { "tls.crt": pair.certificate, "tls.key": pair.privateKey }),
      ),
    );
    assert.equal(presence.hasCertificate, true);
    assert.equal(presence.certificateProblem, "");
  });
});

/** Istio's ingress gateway running in istio-system: a pod, its Service and EndpointSlice, as the cluster would hold them. */
function ingressGatewayObjects() {
  const deployment = {
    metadata: { name: "istio-ingressgateway", namespace: "istio-system" },
    spec: {
      template: {
        metadata: { labels: { app: "istio-ingressgateway", istio: "ingressgateway" } },
        spec: { serviceAccountName: "istio-ingressgateway" },
      },
    },
  };
  const pod = podOf(deployment, 0, "10.244.1.20", "node-a");
  const service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "istio-ingressgateway", namespace: "istio-system" },
    spec: {
      clusterIP: "10.96.0.50",
      selector: { istio: "ingressgateway" },
      ports: [{ name: "https", port: 443, targetPort: 8443, protocol: "TCP" }],
    },
  };
  return [...NODES, pod, service, sliceOf(service, [pod])];
}

describe("discovery indexes the Secrets that config names, in sextant-credential-index", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: Awaited<ReturnType<typeof startIngest>>;
  let kube: FakeKubeApiServer;
  let discovery: DiscoveryFixture;
  const key = (namespace: string, name: string) => credentialKey({ namespace, name });
  const entries = async () =>
    (await (await client.bus.bucket(Buckets.credentialIndex)).list()) as Array<{
      key: string;
      value: CredentialPresence;
    }>;
  const indexed = async () => new Map((await entries()).map((entry) => [entry.key, entry.value]));

  before(async () => {
    client = await startNatsWithClient();
    ingest = await startIngest(client.nats.url, { ANALYSIS_DEBOUNCE_MS: "20", API_AUTH: "none" });
    kube = await startFakeKubeApiServer({ bookmarkIntervalMs: 500 });
    kube.apply(
      secret("istio-system", "web-cred", "kubernetes.io/tls", {
        "tls.crt": "SECRET-CHAIN",
        "tls.key": "SECRET-KEY",
      }),
    );
    kube.apply(secret("istio-system", "unrelated", "kubernetes.io/tls", { "tls.crt": "X", "tls.key": "Y" }));
    kube.apply(secret("default", "client-cred", "Opaque", { cacert: "SECRET-CA" }));
    for (const object of ingressGatewayObjects()) kube.apply(object);
    await apply(ingest.url, GATEWAY);
    await apply(ingest.url, RULE);
    discovery = await startDiscovery(client.nats.url, {
      KUBERNETES: "on",
      KUBECONFIG: writeKubeconfig(kube),
    });
  });
  after(async () => {
    await discovery?.stop();
    await kube?.close();
    await ingest?.stop();
    await client?.close();
  });

  it("has an entry per named Secret saying which parts it holds, and none for others", async () => {
    await eventually(async () => (await indexed()).size === 2, { message: "two Secrets indexed" });
    const index = await indexed();
    assert.deepEqual(index.get(key("istio-system", "web-cred")), {
      namespace: "istio-system",
      name: "web-cred",
      hasCertificate: true,
      hasCaCertificate: false,
      // The fixture's bytes are placeholders, not PEM.
      certificateProblem: "the certificate is not a PEM certificate",
    });
    assert.deepEqual(index.get(key("default", "client-cred")), {
      namespace: "default",
      name: "client-cred",
      hasCertificate: false,
      hasCaCertificate: true,
      certificateProblem: "",
    });
  });

  it("never holds key material", async () => {
    const stored = await entries();
    assert.ok(stored.length > 0);
    const bucket = await client.bus.bucket(Buckets.credentialIndex);
    for (const { key: entryKey } of stored) {
      const raw = (await bucket.get(entryKey))?.raw;
      assert.ok(raw, "the bucket's stored bytes");
      const bytes = Buffer.from(raw).toString("latin1");
      assert.ok(!/SECRET-/.test(bytes), `${entryKey} carries no certificate, key or CA bytes`);
    }
  });

  it("flips when a Secret is deleted, then created again", async () => {
    kube.delete({ apiVersion: "v1", kind: "Secret", namespace: "istio-system", name: "web-cred" });
    await eventually(async () => !(await indexed()).has(key("istio-system", "web-cred")), {
      message: "the deleted Secret leaves the index",
    });
    kube.apply(secret("istio-system", "web-cred-cacert", "Opaque", { "ca.crt": "SECRET-CA" }));
    kube.apply(
      secret("istio-system", "web-cred", "kubernetes.io/tls", {
        "tls.crt": "SECRET-C",
        "tls.key": "SECRET-K",
      }),
    );
    await eventually(async () => (await indexed()).has(key("istio-system", "web-cred")), {
      message: "the created Secret is indexed again",
    });
    await eventually(
      async () => (await indexed()).get(key("istio-system", "web-cred-cacert"))?.hasCaCertificate === true,
      { message: "the -cacert companion is indexed with its CA" },
    );
  });

  it("drives ingest's analysis: the Gateway's credentialName is reported while its Secret is missing", async () => {
    const credentialMessage = async () => {
      const response = await fetch(`${ingest.url}/v1/analyze`);
      const { messages } = (await response.json()) as { messages: Array<Record<string, string>> };
      return messages.find((m) => m.kind === "Gateway" && m.name === "web");
    };
    await eventually(async () => (await indexed()).has(key("istio-system", "web-cred")), {
      message: "the Secret is indexed",
    });
    await eventually(async () => (await credentialMessage()) === undefined, {
      message: "nothing to report while the gateway's Secret exists",
    });
    kube.delete({ apiVersion: "v1", kind: "Secret", namespace: "istio-system", name: "web-cred" });
    const message = await eventually(credentialMessage, { message: "the missing Secret is reported" });
    assert.deepEqual(
      [message.code, message.field, message.message],
      ["IST0101", "spec.servers[0].tls.credentialName", 'Referenced credentialName not found: "web-cred"'],
    );
    kube.apply(
      secret("istio-system", "web-cred", "kubernetes.io/tls", {
        "tls.crt": "SECRET-C",
        "tls.key": "SECRET-K",
      }),
    );
    await eventually(async () => (await credentialMessage()) === undefined, {
      message: "the message clears once the Secret is back",
    });
  });
});

describe("discovery without Kubernetes", () => {
  it("knows no Secret, so the leader empties sextant-credentials (a leftover of an earlier run goes)", async () => {
    const client = await startNatsWithClient();
    const bucket = await client.bus.bucket(Buckets.credentials);
    const key = credentialKey({ namespace: "istio-system", name: "stale" });
    await bucket.put(key, Credential.fromPartial({ namespace: "istio-system", name: "stale" }));
    const discovery = await startDiscovery(client.nats.url);
    try {
      await eventually(async () => (await bucket.get(key)) === undefined, {
        message: "the leftover is deleted",
      });
    } finally {
      await discovery.stop();
      await client.close();
    }
  });
});
