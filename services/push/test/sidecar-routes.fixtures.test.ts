/**
 * Fixtures for the sidecar LDS/RDS unit tests (no tests of its own): a
 * Bookinfo-like registry built as ingest and discovery store it, and
 * sidecar proxies.
 */
import { type Any, EndpointShard, Service, unpackAny } from "@sextant/proto";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { type ConfigItem, storedConfig } from "./stored-config.js";

/** A Bookinfo-like registry: reviews, ratings and productpage in default, each with a VIP and an HTTP port 9080. */
export function bookinfo(config: ConfigItem[]) {
  const service = (name: string, vip: string, protocol = "PROTOCOL_HTTP", port = 9080) =>
    Service.fromJSON({
      hostname: `${name}.default.svc.cluster.local`,
      namespace: "default",
      name,
      addresses: [vip],
      ports: [{ name: protocol === "PROTOCOL_HTTP" ? "http" : "tcp", number: port, protocol }],
      selector: { app: name },
      registry: "kubernetes",
    });
  const services = new Map(
    [
      service("reviews", "10.96.0.10"),
      service("ratings", "10.96.0.11"),
      service("productpage", "10.96.0.12"),
      service("mongodb", "10.96.0.13", "PROTOCOL_TCP", 27017),
    ].map((s) => [`default/${s.hostname}`, s]),
  );
  const endpoint = (address: string, app: string, version: string, port = 9080, portName = "http") => ({
    address,
    ports: { [portName]: port },
    labels: { app, version },
    serviceAccount: `bookinfo-${app}`,
    namespace: "default",
    health: "HEALTH_STATUS_HEALTHY",
  });
  const shards = new Map(
    [
      [
        "reviews.default.svc.cluster.local",
        [endpoint("10.1.0.1", "reviews", "v1"), endpoint("10.1.0.2", "reviews", "v2")],
      ],
      ["ratings.default.svc.cluster.local", [endpoint("10.1.0.3", "ratings", "v1")]],
      ["productpage.default.svc.cluster.local", [endpoint("10.1.0.4", "productpage", "v1")]],
      ["mongodb.default.svc.cluster.local", [endpoint("10.1.0.5", "mongodb", "v1", 27017, "tcp")]],
    ].map(([hostname, endpoints]) => [
      hostname as string,
      { hostname: hostname as string, endpoints: EndpointShard.fromJSON({ endpoints }).endpoints },
    ]),
  );
  return PushContext.build({
    config: storedConfig(config),
    services,
    endpointShards: shards,
    domainSuffix: "cluster.local",
  });
}

/** A sidecar proxy of pod `<pod>` at ip in default, with labels. */
export function sidecarProxy(ip: string, labels: Record<string, string>) {
  return parseProxy({
    id: `sidecar~${ip}~${labels.app ?? "pod"}-xyz.default~default.svc.cluster.local`,
    metadata: { NAMESPACE: "default", LABELS: labels, INSTANCE_IPS: ip },
  } as never);
}

export function decode<T>(
  any: Any,
  typeUrl: string,
  codec: { decode(bytes: Uint8Array): T; toJSON(m: T): unknown },
) {
  // biome-ignore lint/suspicious/noExplicitAny: decoded JSON, checked by the assertions
  return codec.toJSON(unpackAny(any, typeUrl, codec as never)) as Record<string, any>;
}
