// Inputs shared by the rule and mesh tests: routes as stored, a registry.
import type { ConfigResource, Service } from "@sextant/proto";
import { ReferenceGrants } from "../src/index.js";
import type { RuleContext } from "../src/rules/index.js";

export function route(kind: string, spec: object, name = "web", namespace = "shop"): ConfigResource {
  return {
    kind,
    apiVersion: "gateway.networking.k8s.io/v1",
    namespace,
    name,
    labels: {},
    annotations: {},
    generation: 3,
    revision: 0,
    spec: spec as ConfigResource["spec"],
  };
}

/** A rule of an HTTPRoute, alone in its route. */
export const httpRoute = (rule: object, name?: string) => route("HTTPRoute", { rules: [rule] }, name);

function service(hostname: string): Service {
  const [name = "", namespace = ""] = hostname.split(".");
  return {
    hostname,
    namespace,
    name,
    addresses: [],
    ports: [],
    labels: {},
    selector: {},
    exportTo: [],
    resolution: 0,
    meshExternal: false,
    externalName: "",
    registry: "Kubernetes",
  };
}

export function context(
  options: { grants?: ConfigResource[]; serviceEntries?: ConfigResource[] } = {},
): RuleContext {
  const hosts = [
    "cart.shop.svc.cluster.local",
    "cart-v2.shop.svc.cluster.local",
    "mirror.shop.svc.cluster.local",
    "ledger.billing.svc.cluster.local",
    "api.example.com",
  ];
  return {
    domainSuffix: "cluster.local",
    services: new Map(hosts.map((host) => [host, service(host)])),
    grants: new ReferenceGrants(options.grants ?? []),
    ...(options.serviceEntries ? { serviceEntries: options.serviceEntries } : {}),
  };
}

/** The destination Istio writes for `host:port`. */
export const dest = (host: string, port: number) => ({ host, subset: "", port: { number: port } });
