import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ConfigResource,
  IstioCertificateRequest,
  IstioCertificateResponse,
  packAny,
  Struct,
  unpackAny,
} from "@sextant/proto";
import { Cluster, ClusterLoadAssignment, TypeUrl } from "@sextant/proto/envoy";
import { Cluster_DiscoveryType, Cluster_LbPolicy } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";

describe("Envoy types in google.protobuf.Any", () => {
  const cluster = Cluster.fromPartial({
    name: "outbound|9080|v1|reviews.default.svc.cluster.local",
    type: Cluster_DiscoveryType.EDS,
    lbPolicy: Cluster_LbPolicy.RING_HASH,
    connectTimeout: { seconds: 10, nanos: 0 },
    edsClusterConfig: {
      serviceName: "outbound|9080|v1|reviews.default.svc.cluster.local",
      edsConfig: { ads: {} },
    },
    circuitBreakers: { thresholds: [{ maxConnections: 100, maxRequests: 1024 }] },
  });

  it("packs a Cluster and decodes it back equal", () => {
    const any = packAny(TypeUrl.Cluster, Cluster, cluster);
    assert.equal(any.typeUrl, "type.googleapis.com/envoy.config.cluster.v3.Cluster");
    assert.ok(any.value.length > 0);
    const decoded = unpackAny(any, TypeUrl.Cluster, Cluster);
    assert.deepEqual(decoded, cluster);
    assert.equal(decoded.circuitBreakers?.thresholds[0]?.maxRequests, 1024);
  });

  it("refuses to unpack an Any of another type", () => {
    const any = packAny(TypeUrl.Cluster, Cluster, cluster);
    assert.throws(
      () => unpackAny(any, TypeUrl.ClusterLoadAssignment, ClusterLoadAssignment),
      /expected an Any of type.googleapis.com\/envoy.config.endpoint.v3.ClusterLoadAssignment, got .*Cluster/,
    );
  });
});

describe("Istio CA API", () => {
  it("encodes and decodes a CreateCertificate request", () => {
    const request = IstioCertificateRequest.fromPartial({
      csr: "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
      validityDuration: 86_400,
      metadata: Struct.fromPartial({ fields: { ImpersonatedIdentity: { stringValue: "spiffe://x" } } }),
    });
    const bytes = IstioCertificateRequest.encode(request).finish();
    assert.deepEqual(IstioCertificateRequest.decode(bytes), request);
  });

  it("keeps Istio's field numbers on the wire", () => {
    // csr is field 1 (tag 0x0a) and validity_duration field 3 (varint, tag 0x18).
    const bytes = IstioCertificateRequest.encode({
      csr: "x",
      validityDuration: 60,
      metadata: undefined,
    }).finish();
    assert.deepEqual([...bytes], [0x0a, 0x01, 0x78, 0x18, 60]);
  });

  it("encodes and decodes a response chain in order", () => {
    const response = { certChain: ["leaf", "intermediate", "root"] };
    const decoded = IstioCertificateResponse.decode(IstioCertificateResponse.encode(response).finish());
    assert.deepEqual(decoded.certChain, ["leaf", "intermediate", "root"]);
  });
});

describe("mesh model", () => {
  it("round-trips a ConfigResource with a Struct spec", () => {
    const resource = ConfigResource.fromPartial({
      kind: "VirtualService",
      apiVersion: "networking.istio.io/v1",
      namespace: "default",
      name: "reviews",
      generation: 3,
      spec: { hosts: ["reviews"], http: [{ route: [{ destination: { host: "reviews" } }] }] },
    });
    const decoded = ConfigResource.decode(ConfigResource.encode(resource).finish());
    // ts-proto maps google.protobuf.Struct to a plain JSON object.
    assert.deepEqual(decoded.spec, {
      hosts: ["reviews"],
      http: [{ route: [{ destination: { host: "reviews" } }] }],
    });
    assert.equal(decoded.generation, 3);
  });
});
