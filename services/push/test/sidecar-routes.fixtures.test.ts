/**
 * Fixtures for the sidecar LDS/RDS unit tests (no tests of its own): a
 * Bookinfo-like registry built as ingest and discovery store it, and
 * sidecar proxies.
 */
import assert from "node:assert/strict";
import { type Any, EndpointShard, Service, unpackAny } from "@sextant/proto";
import { RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { generateSidecarRoutes } from "../src/translate/sidecar/routes.js";
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

/** A VirtualService for ratings with these HTTP routes. */
export const ratingsVirtualService = (http: unknown[]): ConfigItem => ({
  kind: "VirtualService",
  name: "ratings",
  spec: { hosts: ["ratings"], http },
});

/** The route configuration 9080 productpage's sidecar (v1 unless labels say otherwise) gets, and its JSON. */
export function productpageRoutes(
  push: PushContext,
  labels: Record<string, string> = { app: "productpage", version: "v1" },
) {
  const proxy = sidecarProxy("10.1.0.4", labels);
  const generated = generateSidecarRoutes({ push, proxy, cache: new XdsCache() }, new Set(["9080"]));
  assert.equal(generated.length, 1);
  const json = decode(generated[0]!.resource, TypeUrl.RouteConfiguration, RouteConfiguration);
  return { generated: generated[0]!, json };
}

export function decode<T>(
  any: Any,
  typeUrl: string,
  codec: { decode(bytes: Uint8Array): T; toJSON(m: T): unknown },
) {
  // biome-ignore lint/suspicious/noExplicitAny: decoded JSON, checked by the assertions
  return codec.toJSON(unpackAny(any, typeUrl, codec as never)) as Record<string, any>;
}
