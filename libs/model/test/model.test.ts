import assert from "node:assert/strict";
import { describe, it, test } from "node:test";
import { selfSignedKeyPair } from "@sextant/testing";
import {
  configKey,
  configKindFilter,
  credentialResourceName,
  destinationRuleCredentialNames,
  gatewayCredentialNames,
  headlessDnsNames,
  hostMatches,
  parseConfigKey,
  parseSecretResourceName,
  registrationIdentityMismatch,
  resolveHost,
  tlsKeyPairProblem,
} from "../src/index.js";

describe("hosts", () => {
  it("expands dot-less names in the given namespace and leaves the rest", () => {
    assert.equal(resolveHost("reviews", "default"), "reviews.default.svc.cluster.local");
    assert.equal(resolveHost("reviews", "prod", "corp.example"), "reviews.prod.svc.corp.example");
    assert.equal(
      resolveHost("reviews.default.svc.cluster.local", "prod"),
      "reviews.default.svc.cluster.local",
    );
    assert.equal(resolveHost("www.google.com", "default"), "www.google.com");
    assert.equal(resolveHost("*", "default"), "*");
    assert.equal(resolveHost("*.example.com", "default"), "*.example.com");
  });

  it("matches wildcard patterns by suffix only", () => {
    assert.equal(hostMatches("*", "a.b"), true);
    assert.equal(hostMatches("*.example.com", "a.example.com"), true);
    assert.equal(hostMatches("*.example.com", "b.a.example.com"), true);
    assert.equal(hostMatches("*.example.com", "example.com"), false);
    assert.equal(hostMatches("a.example.com", "b.example.com"), false);
  });
});

describe("config keys", () => {
  it("round-trips names with dots and filters by kind", () => {
    const ref = { kind: "ServiceEntry", namespace: "default", name: "external.svc.example" };
    assert.deepEqual(parseConfigKey(configKey(ref)), ref);
    assert.equal(configKindFilter("ServiceEntry"), "ServiceEntry.>");
    assert.throws(() => parseConfigKey("VirtualService.default"), /not a config key/);
  });
});

describe("registrationIdentityMismatch", () => {
  const group = { namespace: "vms", name: "reviews", serviceAccount: "reviews" };
  it("accepts the group's namespace and its template's service account", () => {
    assert.equal(
      registrationIdentityMismatch({ namespace: "vms", serviceAccount: "reviews" }, group),
      undefined,
    );
  });
  it("accepts any service account of the namespace when the template names none", () => {
    const open = { namespace: "vms", name: "reviews" };
    assert.equal(
      registrationIdentityMismatch({ namespace: "vms", serviceAccount: "other" }, open),
      undefined,
    );
  });
  it("refuses another namespace, then another service account", () => {
    assert.equal(
      registrationIdentityMismatch({ namespace: "evil", serviceAccount: "reviews" }, group)?.reason,
      "namespace",
    );
    assert.equal(
      registrationIdentityMismatch({ namespace: "vms", serviceAccount: "other" }, group)?.reason,
      "service_account",
    );
  });
});

describe("headless DNS names (Istio's pkg/dns/server/name_table.go BuildNameTable)", () => {
  const service = { hostname: "db.ops.svc.cluster.local", headless: true, hasPorts: true };
  const endpoints = [
    { address: "10.1.1.1", healthy: true, hostname: "db-0", subdomain: "db" },
    { address: "10.1.1.2", healthy: false, hostname: "primary", subdomain: "db" },
    { address: "10.1.1.3", healthy: true },
    { address: "10.1.1.3", healthy: true },
    { address: "db.example.com", healthy: true },
  ];

  it("answers the service name with every ready IP, and each pod with a subdomain by its own name", () => {
    assert.deepEqual(Object.fromEntries(headlessDnsNames(service, endpoints)), {
      "db.ops.svc.cluster.local": ["10.1.1.1", "10.1.1.3"],
      "db-0.db.ops.svc.cluster.local": ["10.1.1.1"],
    });
  });

  it("includes not-ready endpoints when the service publishes them", () => {
    const names = headlessDnsNames({ ...service, publishNotReadyAddresses: true }, endpoints);
    assert.deepEqual(names.get("primary.db.ops.svc.cluster.local"), ["10.1.1.2"]);
    assert.deepEqual(names.get("db.ops.svc.cluster.local"), ["10.1.1.1", "10.1.1.2", "10.1.1.3"]);
  });

  it("gives nothing for a service with a VIP or without ports", () => {
    assert.equal(headlessDnsNames({ ...service, headless: false }, endpoints).size, 0);
    assert.equal(headlessDnsNames({ ...service, hasPorts: false }, endpoints).size, 0);
  });
});

describe("credential names, as istiod's ToResourceName and ParseResourceName", () => {
  it("turns a credentialName into its SDS resource name; builtin:// and other types are no Kubernetes Secret", () => {
    assert.equal(credentialResourceName("web-cred"), "kubernetes://web-cred");
    assert.equal(credentialResourceName("shop/web-cred"), "kubernetes://shop/web-cred");
    assert.equal(credentialResourceName("kubernetes://web-cred"), "kubernetes://web-cred");
    assert.equal(credentialResourceName("builtin://"), undefined);
    assert.equal(credentialResourceName("kubernetes-gateway://shop/web"), undefined);
    assert.equal(credentialResourceName(""), undefined);
  });

  it("reads a kubernetes:// name in the proxy's namespace unless it names one", () => {
    assert.deepEqual(parseSecretResourceName("kubernetes://web-cred", "istio-system"), {
      namespace: "istio-system",
      name: "web-cred",
    });
    assert.deepEqual(parseSecretResourceName("kubernetes://shop/web-cred-cacert", "istio-system"), {
      namespace: "shop",
      name: "web-cred-cacert",
    });
    assert.equal(parseSecretResourceName("kubernetes://", "istio-system"), undefined);
    assert.equal(parseSecretResourceName("default", "istio-system"), undefined);
  });

  it("lists the credentialNames of Gateway servers and of DestinationRule policies, port levels and subsets", () => {
    assert.deepEqual(
      gatewayCredentialNames({
        servers: [
          { tls: { credentialName: "a" } },
          {},
          { tls: { credentialName: "" } },
          {
            tls: { credentialName: "", credentialNames: ["rsa", "ecdsa"], caCertCredentialName: "ca-cacert" },
          },
        ],
      }),
      ["a", "rsa", "ecdsa", "ca-cacert"],
    );
    assert.deepEqual(
      destinationRuleCredentialNames({
        trafficPolicy: {
          tls: { credentialName: "top" },
          portLevelSettings: [{ tls: { credentialName: "port" } }],
        },
        subsets: [
          { trafficPolicy: { portLevelSettings: [] } },
          { trafficPolicy: { tls: { credentialName: "sub" }, portLevelSettings: [] } },
        ],
      }),
      ["top", "port", "sub"],
    );
  });
});

test("tlsKeyPairProblem accepts a certificate with its own key and names what is wrong otherwise", async () => {
  const pair = await selfSignedKeyPair("a.example.com");
  const other = await selfSignedKeyPair("b.example.com");
  assert.equal(tlsKeyPairProblem(Buffer.from(pair.certificate), Buffer.from(pair.privateKey)), undefined);
  assert.equal(
    tlsKeyPairProblem(Buffer.from("not a certificate\n"), Buffer.from(pair.privateKey)),
    "the certificate is not a PEM certificate",
  );
  assert.equal(
    tlsKeyPairProblem(Buffer.from(pair.certificate), Buffer.from("not a key\n")),
    "the private key is not a PEM private key",
  );
  assert.equal(
    tlsKeyPairProblem(Buffer.from(pair.certificate), Buffer.from(other.privateKey)),
    "the private key does not match the certificate",
  );
});
