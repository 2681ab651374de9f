// The Gateway API conformance cases that apply without a live cluster. Each
// file under test/conformance/ is one upstream conformance test
// (kubernetes-sigs/gateway-api v1.5.1, conformance/tests/<name>.go) written
// as an equivalent: its manifests, then one `Expectations` document stating
// what the upstream test asserts: the status conditions of Gateways and
// routes, listeners' attachedRoutes, and where requests end up. The requests
// are answered by a small model of the data plane over the converted
// VirtualServices (matchRequest below), since no proxy runs here.
// CONFORMANCE.md lists the cases and the profiles and features Sextant
// claims; the last tests here check those claims against the upstream
// tests' feature lists.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { configKey, tlsKeyPairProblem } from "@sextant/model";
import { type ConfigResource, Protocol, Resolution, type Service } from "@sextant/proto";
import type { Gateway } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import {
  type Headers_HeaderOperations,
  type HTTPMatchRequest,
  HTTPRedirect_RedirectPortSelection,
  type HTTPRoute,
  type StringMatch,
  type VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { decodeSpec, findKindOf, parseDocuments, validateResource } from "@sextant/validation";
import {
  type ConvertedConfig,
  convertGatewayApi,
  type GatewayApiCondition,
  type GatewayApiInput,
  type GatewayApiOutput,
  type GatewayApiStatus,
  type RouteParentStatus,
} from "../src/index.js";

const CASES = new URL("./conformance/", import.meta.url);
const DOMAIN_SUFFIX = "cluster.local";
/** Where the upstream mesh tests' client (echo-v1's pod) runs. */
const MESH_NAMESPACE = "gateway-conformance-mesh";

// ---------------------------------------------------------------------------
// What a case file states.

/** A condition as a case writes it: `Type=Status` or `Type=Status/Reason`. */
type ConditionExpectation = string;

interface Expectations {
  /** The upstream test's ShortName. */
  test: string;
  /** The upstream features it needs (pkg/features names), as test/conformance/upstream-tests.json has them. */
  features: string[];
  /**
   * Why Sextant does not pass it yet. Such a case must still fail: once it
   * passes, the mark goes and CONFORMANCE.md counts it.
   */
  unsupported?: string;
  /** With `unsupported`: a piece of the failure's message, so that the case fails for that reason and no other. */
  failsWith?: string;
  gatewayClasses?: Array<{ name: string; conditions?: ConditionExpectation[]; observedGeneration?: number }>;
  gateways?: Array<{
    name: string;
    /** Every condition of the Gateway and its listeners was written for this generation. */
    observedGeneration?: number;
    conditions?: ConditionExpectation[];
    listeners?: Array<{
      name: string;
      attachedRoutes?: number;
      supportedKinds?: Array<{ group: string; kind: string }>;
      conditions?: ConditionExpectation[];
    }>;
  }>;
  routes?: Array<{
    kind?: string;
    name: string;
    /** Every condition of every parent was written for this generation. */
    observedGeneration?: number;
    /** Per parentRef (kind Gateway unless given): its conditions. */
    parents?: Array<{
      parentRef: { name: string; namespace?: string; kind?: string; sectionName?: string; port?: number };
      conditions: ConditionExpectation[];
    }>;
  }>;
  requests?: RequestExpectation[];
  /**
   * A second step of the upstream test: after deleting resources
   * (`Kind namespace/name`) and updating others (a new spec, the generation
   * bumped as the API server does), these hold.
   */
  then?: Omit<Expectations, "test" | "features" | "unsupported" | "failsWith" | "then"> & {
    delete?: string[];
    update?: Array<{ resource: string; spec: Record<string, unknown> }>;
  };
}

interface RequestExpectation {
  /** Through a Gateway (`namespace/name`) on a port (80 unless given)… */
  gateway?: string;
  port?: number;
  /** …or inside the mesh to a Service host (GAMMA). */
  mesh?: string;
  /** The namespace of the mesh client (gateway-conformance-mesh unless given). */
  from?: string;
  /** https for a request to an HTTPS listener. */
  scheme?: "http" | "https";
  host?: string;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** A TLS connection (TLSRoute) with this SNI, instead of an HTTP request. */
  sni?: string;
  /** A gRPC call: `/service/method`, POST, content-type application/grpc. */
  grpc?: { service: string; method: string };
  /** Where it must go: a backend Service (`namespace/name`)… */
  backend?: string;
  /** …or split between backends (`namespace/name` to weight; the ratios must match). */
  weights?: Record<string, number>;
  /** …or the status the proxy answers itself (404: no route; 500: no valid backend). */
  status?: number;
  /** A redirect: its status and the parts of its Location the upstream test checks. */
  redirect?: { status: number; scheme?: string; host?: string; port?: number; path?: string };
  /** Backends (`namespace/name`) that get a copy of the request (RequestMirror)… */
  mirroredTo?: string[];
  /** …and for those not mirrored every time, the percentage of requests that are. */
  mirrorPercent?: Record<string, number>;
  /** For a split request: headers each backend (`namespace/name`) sees, with its backendRef's own filters. */
  headersAtBackend?: Record<string, Record<string, string>>;
  /** What the backend sees (after rewrites and header filters). */
  backendRequest?: {
    path?: string;
    host?: string;
    headers?: Record<string, string>;
    absentHeaders?: string[];
  };
  /** Headers the backend answers with (the upstream echo server sets them on request)… */
  backendResponseHeaders?: Record<string, string>;
  /** …and those the client gets back (after ResponseHeaderModifier). */
  responseHeaders?: Record<string, string>;
  absentResponseHeaders?: string[];
}

// ---------------------------------------------------------------------------
// Loading a case: its manifests the way ingest stores them, the Services the
// way discovery publishes them.

interface Manifests {
  resources: ConfigResource[];
  services: Map<string, Service>;
  secrets: Set<string>;
  secretProblems: Map<string, string>;
  expectations: Expectations[];
}

interface KubeDocument {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

function load(file: string, into: Manifests): void {
  const parsed = parseDocuments(readFileSync(new URL(file, CASES)), { maxDocuments: 100 });
  assert.deepEqual(parsed.errors, [], `${file} is not valid YAML`);
  for (const { value } of parsed.documents) {
    const document = value as KubeDocument;
    const name = document.metadata?.name ?? "";
    const namespace = document.metadata?.namespace ?? "default";
    if (document.kind === "Expectations") {
      into.expectations.push(value as unknown as Expectations);
    } else if (document.apiVersion === "v1" && document.kind === "Namespace") {
      // The conversion reads no Namespace objects (Sextant's store has
      // none); their labels are what HTTPRouteCrossNamespace's selector needs.
    } else if (document.apiVersion === "v1" && document.kind === "Secret") {
      into.secrets.add(`${namespace}/${name}`);
      // A Secret written without data stands for one the upstream suite fills
      // with a certificate it generates; one with data is checked as istiod does.
      const pair = ["tls.crt", "tls.key"].map((field) => Buffer.from(document.data?.[field] ?? "", "base64"));
      const problem = document.data ? tlsKeyPairProblem(pair[0]!, pair[1]!) : undefined;
      if (problem) into.secretProblems.set(`${namespace}/${name}`, problem);
    } else if (document.apiVersion === "v1" && document.kind === "Service") {
      const service = registryService(namespace, name, document.spec as unknown as KubeServiceSpec);
      into.services.set(service.hostname, service);
    } else {
      into.resources.push(storedResource(file, document));
    }
  }
}

/** As ingest stores a document: validated with the upstream rules, the spec in its canonical JSON form. */
function storedResource(file: string, document: KubeDocument): ConfigResource {
  const validation = validateResource(document);
  assert.deepEqual(
    validation.errors,
    [],
    `${file}: ${document.kind} ${document.metadata?.name} does not pass ingest's validation`,
  );
  const kind = findKindOf(document.apiVersion, document.kind)!;
  const decoded = decodeSpec(kind.kind, document.spec ?? {});
  return {
    kind: kind.kind,
    apiVersion: document.apiVersion!,
    namespace: kind.clusterScoped ? "default" : (document.metadata?.namespace ?? "default"),
    name: document.metadata!.name!,
    labels: document.metadata?.labels ?? {},
    annotations: {},
    generation: 1,
    revision: 0,
    spec: kind.codec.toJSON(decoded.value) as Record<string, unknown>,
  };
}

interface KubeServiceSpec {
  ports: Array<{ name?: string; port: number; targetPort?: number; appProtocol?: string }>;
}

/** A Kubernetes Service as discovery publishes it (protocol from appProtocol, then the port name). */
function registryService(namespace: string, name: string, spec: KubeServiceSpec): Service {
  return {
    hostname: `${name}.${namespace}.svc.${DOMAIN_SUFFIX}`,
    namespace,
    name,
    addresses: [],
    ports: spec.ports.map((port) => ({
      name: port.name ?? "",
      number: port.port,
      targetPort: port.targetPort ?? port.port,
      protocol: portProtocol(port.appProtocol ?? port.name ?? ""),
    })),
    labels: {},
    selector: { app: name },
    exportTo: [],
    resolution: Resolution.RESOLUTION_STATIC,
    meshExternal: false,
    externalName: "",
    registry: "kubernetes",
  };
}

/**
 * The Services the automated deployment creates for Gateways without
 * spec.addresses (`<name>-<class>`, one port per listener port), as they
 * exist in the cluster the upstream suite runs against: a Gateway is
 * Programmed only once its Service is there.
 */
function deployedGatewayServices(resources: readonly ConfigResource[]): Service[] {
  return resources
    .filter((r) => r.kind === "KubernetesGateway" && !(r.spec?.addresses as unknown[] | undefined)?.length)
    .map((gateway) => {
      const listeners = (gateway.spec?.listeners ?? []) as Array<{ port: number }>;
      const ports = [...new Set(listeners.map((l) => l.port))].map((port) => ({
        port,
        name: `port-${port}`,
      }));
      return registryService(gateway.namespace, `${gateway.name}-${gateway.spec?.gatewayClassName}`, {
        ports,
      });
    });
}

function portProtocol(declared: string): Protocol {
  const value = declared.toLowerCase();
  if (value === "kubernetes.io/h2c") return Protocol.PROTOCOL_HTTP2;
  if (value === "kubernetes.io/ws" || value === "http" || value.startsWith("http-"))
    return Protocol.PROTOCOL_HTTP;
  if (value === "grpc" || value.startsWith("grpc-")) return Protocol.PROTOCOL_GRPC;
  return Protocol.PROTOCOL_UNSPECIFIED;
}

function loadCase(file: string): { input: GatewayApiInput; expectations: Expectations } {
  const manifests: Manifests = {
    resources: [],
    services: new Map(),
    secrets: new Set(),
    secretProblems: new Map(),
    expectations: [],
  };
  load("base.yaml", manifests);
  load(file, manifests);
  assert.equal(manifests.expectations.length, 1, `${file} has one Expectations document`);
  manifests.resources.sort((a, b) => configKey(a).localeCompare(configKey(b)));
  for (const service of deployedGatewayServices(manifests.resources))
    manifests.services.set(service.hostname, service);
  const input = {
    resources: manifests.resources,
    services: manifests.services,
    domainSuffix: DOMAIN_SUFFIX,
    secrets: manifests.secrets,
    secretProblems: manifests.secretProblems,
  };
  return { input, expectations: manifests.expectations[0]! };
}

// ---------------------------------------------------------------------------
// Statuses.

function conditionText(condition: GatewayApiCondition, withReason: boolean): string {
  return withReason
    ? `${condition.type}=${condition.status}/${condition.reason}`
    : `${condition.type}=${condition.status}`;
}

function assertConditions(
  actual: readonly GatewayApiCondition[],
  expected: readonly ConditionExpectation[],
  what: string,
): void {
  for (const expectation of expected) {
    const type = expectation.split("=")[0]!;
    const condition = actual.find((c) => c.type === type);
    assert.ok(
      condition,
      `${what}: no ${type} condition (has ${actual.map((c) => c.type).join(", ") || "none"})`,
    );
    const text = conditionText(condition, expectation.includes("/"));
    assert.equal(text, expectation, `${what}: ${text}, expected ${expectation}`);
  }
}

function assertGeneration(
  conditions: readonly GatewayApiCondition[],
  generation: number | undefined,
  what: string,
): void {
  if (generation === undefined) return;
  assert.ok(conditions.length > 0, `${what} has conditions`);
  for (const condition of conditions) {
    assert.equal(condition.observedGeneration, generation, `${what}: ${condition.type}'s observedGeneration`);
  }
}

function statusOf(
  output: GatewayApiOutput,
  kind: string,
  namespacedName: string,
): GatewayApiStatus | undefined {
  const [namespace, name] = splitName(namespacedName);
  return output.statuses.get(configKey({ kind, namespace, name }));
}

function assertStatuses(
  output: GatewayApiOutput,
  expectations: Omit<Expectations, "test" | "features">,
): void {
  for (const gatewayClass of expectations.gatewayClasses ?? []) {
    const found = statusOf(output, "GatewayClass", `default/${gatewayClass.name}`);
    assert.ok(found?.kind === "GatewayClass", `GatewayClass ${gatewayClass.name} has a status`);
    assertConditions(
      found.status.conditions,
      gatewayClass.conditions ?? [],
      `GatewayClass ${gatewayClass.name}`,
    );
    assertGeneration(
      found.status.conditions,
      gatewayClass.observedGeneration,
      `GatewayClass ${gatewayClass.name}`,
    );
  }
  for (const gateway of expectations.gateways ?? []) {
    const found = statusOf(output, "KubernetesGateway", gateway.name);
    assert.ok(found?.kind === "KubernetesGateway", `Gateway ${gateway.name} has a status`);
    const status = found.status;
    assertGeneration(
      [...status.conditions, ...status.listeners.flatMap((l) => l.conditions)],
      gateway.observedGeneration,
      `Gateway ${gateway.name}`,
    );
    assertConditions(status.conditions, gateway.conditions ?? [], `Gateway ${gateway.name}`);
    if (gateway.listeners) {
      // As upstream's GatewayStatusMustHaveListeners: the status has exactly these listeners.
      assert.deepEqual(
        status.listeners.map((l) => l.name).sort(),
        gateway.listeners.map((l) => l.name).sort(),
        `Gateway ${gateway.name} listeners`,
      );
    }
    for (const listener of gateway.listeners ?? []) {
      const actual = status.listeners.find((l) => l.name === listener.name);
      assert.ok(actual, `Gateway ${gateway.name} has a status for listener ${listener.name}`);
      if (listener.supportedKinds !== undefined) {
        // As the upstream suite compares them: an empty expectation means none; otherwise
        // each expected kind must be there, and an implementation may support more.
        const supported = actual.supportedKinds.map(({ group, kind }) => ({ group, kind }));
        const what = `Gateway ${gateway.name} listener ${listener.name} supportedKinds`;
        if (listener.supportedKinds.length === 0) assert.deepEqual(supported, [], what);
        for (const kind of listener.supportedKinds)
          assert.ok(
            supported.some((k) => k.group === kind.group && k.kind === kind.kind),
            `${what}: ${JSON.stringify(supported)} has ${kind.kind}`,
          );
      }
      if (listener.attachedRoutes !== undefined) {
        assert.equal(
          actual.attachedRoutes,
          listener.attachedRoutes,
          `Gateway ${gateway.name} listener ${listener.name} attachedRoutes`,
        );
      }
      assertConditions(
        actual.conditions,
        listener.conditions ?? [],
        `Gateway ${gateway.name} listener ${listener.name}`,
      );
    }
  }
  for (const route of expectations.routes ?? []) {
    const kind = route.kind ?? "HTTPRoute";
    const found = statusOf(output, kind, route.name);
    const parents = found && "parents" in found.status ? found.status.parents : [];
    assertGeneration(
      parents.flatMap((p) => p.conditions),
      route.observedGeneration,
      `${kind} ${route.name}`,
    );
    const [routeNamespace] = splitName(route.name);
    for (const expected of route.parents ?? []) {
      const ref = expected.parentRef;
      const parent = parents.find((p: RouteParentStatus) => sameParent(p, ref, routeNamespace));
      assert.ok(
        parent,
        `${kind} ${route.name} has a status for parent ${JSON.stringify(ref)} (has ${JSON.stringify(parents.map((p) => p.parentRef))})`,
      );
      assertConditions(parent.conditions, expected.conditions, `${kind} ${route.name} parent ${ref.name}`);
    }
  }
}

function sameParent(
  actual: RouteParentStatus,
  expected: { name: string; namespace?: string; kind?: string; sectionName?: string; port?: number },
  routeNamespace: string,
): boolean {
  const ref = actual.parentRef;
  return (
    ref.name === expected.name &&
    (ref.kind || "Gateway") === (expected.kind ?? "Gateway") &&
    (ref.namespace ?? routeNamespace) === (expected.namespace ?? routeNamespace) &&
    ref.sectionName === expected.sectionName &&
    ref.port === expected.port
  );
}

// ---------------------------------------------------------------------------
// A model of the data plane: which route of the converted VirtualServices a
// request takes, with Envoy's virtual host choice and Istio's match
// semantics for Gateway API routes.

interface Request {
  scheme: "http" | "https";
  host: string;
  /** The port the request was sent to (the Gateway listener's, or the Service's in the mesh). */
  port: number;
  path: string;
  query: Map<string, string>;
  method: string;
  /** Lower-case names. */
  headers: Map<string, string>;
}

interface Outcome {
  /** The proxy's own answer: 404 (no route), a direct response, or a redirect. */
  status?: number;
  redirect?: { scheme: string; host: string; port?: number; path: string };
  /** Backend host to weight. */
  weights?: Map<string, number>;
  /** Backend host to the request headers it sees. */
  headersAtBackend?: Map<string, Map<string, string>>;
  /** Mirror host to the percentage of requests it gets a copy of. */
  mirroredTo?: Map<string, number>;
  backendRequest?: Request;
  responseHeaders?: Map<string, string>;
}

function toRequest(expectation: RequestExpectation): Request {
  const rawPath = expectation.grpc
    ? `/${expectation.grpc.service}/${expectation.grpc.method}`
    : (expectation.path ?? "/");
  const [path, queryString] = rawPath.split("?", 2) as [string, string | undefined];
  const query = new Map<string, string>();
  for (const pair of queryString ? queryString.split("&") : []) {
    const [key, value = ""] = pair.split("=", 2);
    if (!query.has(key!)) query.set(decodeURIComponent(key!), decodeURIComponent(value));
  }
  const headers = lowerCaseHeaders(expectation.headers);
  if (expectation.grpc) headers.set("content-type", "application/grpc");
  const authority = expectation.host ?? expectation.mesh ?? "example.com";
  const scheme = expectation.scheme ?? "http";
  const explicitPort = /:(\d+)$/.exec(authority)?.[1];
  return {
    scheme,
    host: authority.replace(/:\d+$/, "").toLowerCase(),
    port:
      explicitPort !== undefined && expectation.mesh !== undefined
        ? Number(explicitPort)
        : (expectation.port ?? 80),
    path,
    query,
    method: expectation.method ?? (expectation.grpc ? "POST" : "GET"),
    headers,
  };
}

/** The VirtualServices (with the hosts they serve there) a request through a Gateway's port or in the mesh sees. */
function boundVirtualServices(
  output: GatewayApiOutput,
  expectation: RequestExpectation,
): Array<{ vs: VirtualService; hosts: string[]; namespace: string }> {
  if (expectation.mesh !== undefined) {
    const client = expectation.from ?? MESH_NAMESPACE;
    return output.virtualServices
      .filter(({ spec }) => spec.gateways.length === 0 || spec.gateways.includes("mesh"))
      .filter(({ spec, ref }) => visibleTo(spec.exportTo, ref.namespace, client))
      .map(({ spec, ref }) => ({ vs: spec, hosts: spec.hosts, namespace: ref.namespace }));
  }
  const [namespace, name] = splitName(expectation.gateway!);
  const port = expectation.port ?? 80;
  const internal = output.gateways.filter(
    (g: ConvertedConfig<Gateway>) =>
      g.source.kind === "KubernetesGateway" && g.source.namespace === namespace && g.source.name === name,
  );
  const bound: Array<{ vs: VirtualService; hosts: string[]; namespace: string }> = [];
  for (const gateway of internal) {
    const servers = gateway.spec.servers.filter((server) => server.port?.number === port);
    if (servers.length === 0) continue;
    const gatewayRef = `${gateway.ref.namespace}/${gateway.ref.name}`;
    for (const { spec: vs, ref } of output.virtualServices) {
      const names = vs.gateways.map((g) => (g.includes("/") ? g : `${ref.namespace}/${g}`));
      if (!names.includes(gatewayRef)) continue;
      const serverHosts = servers.flatMap((server) => hostsForNamespace(server.hosts, ref.namespace));
      const hosts = [
        ...new Set(vs.hosts.flatMap((host) => serverHosts.flatMap((server) => intersection(host, server)))),
      ];
      if (hosts.length > 0) bound.push({ vs, hosts, namespace: ref.namespace });
    }
  }
  return bound;
}

/** Whether a config exported to `exportTo` from `namespace` applies to a proxy in `client` (Istio's exportTo: "*", ".", names). */
function visibleTo(exportTo: readonly string[], namespace: string, client: string): boolean {
  if (exportTo.length === 0) return true;
  return exportTo.some((to) => to === "*" || to === client || (to === "." && namespace === client));
}

/** A server's hosts that a VirtualService of a namespace may bind to: `ns/host` in ns only, a `*` namespace in all of them, `~` in none. */
function hostsForNamespace(hosts: readonly string[], namespace: string): string[] {
  return hosts.flatMap((host) => {
    const slash = host.indexOf("/");
    if (slash < 0) return [host];
    const owner = host.slice(0, slash);
    return owner === "*" || owner === namespace ? [host.slice(slash + 1)] : [];
  });
}

/** The intersection of a VirtualService host and a server host, as Istio's host.Names.Intersection: the more specific of the two, if one covers the other. */
function intersection(a: string, b: string): string[] {
  if (domainMatches(b, a) || (a.startsWith("*") && b.startsWith("*") && a.endsWith(b.slice(1)))) return [a];
  if (domainMatches(a, b) || (a.startsWith("*") && b.startsWith("*") && b.endsWith(a.slice(1)))) return [b];
  return [];
}

/** Whether a domain (exact, `*.suffix` or `*`) matches a request host, as Envoy matches virtual host domains. */
function domainMatches(domain: string, host: string): boolean {
  if (domain === "*") return true;
  if (domain.startsWith("*")) return host.endsWith(domain.slice(1)) && host.length > domain.length - 1;
  return domain === host;
}

/** Envoy's virtual host precedence: an exact domain, then the longest wildcard suffix, then `*`. */
function domainRank(domain: string): number {
  if (domain === "*") return 0;
  if (domain.startsWith("*")) return domain.length;
  return Number.MAX_SAFE_INTEGER;
}

/**
 * A TLS connection through a Gateway: Envoy picks the filter chain whose
 * server names match the SNI most specifically; a route's SNI hosts are cut
 * to the listener's hostname as the VirtualService's hosts are.
 */
function matchConnection(output: GatewayApiOutput, expectation: RequestExpectation): Outcome {
  const sni = expectation.sni!.toLowerCase();
  const port = expectation.port ?? 443;
  let best: { rank: number; route: VirtualService["tls"][number] } | undefined;
  for (const { vs, hosts } of boundVirtualServices(output, expectation)) {
    for (const route of vs.tls ?? []) {
      for (const match of route.match ?? []) {
        if (match.port && match.port !== port) continue;
        const names = (match.sniHosts ?? []).flatMap((sniHost) =>
          hosts.flatMap((host) => intersection(sniHost, host)),
        );
        for (const name of names) {
          if (domainMatches(name, sni) && (!best || domainRank(name) > best.rank)) {
            best = { rank: domainRank(name), route };
          }
        }
      }
    }
  }
  // No filter chain for the name: the connection is refused (here, 404).
  return best ? { weights: destinationWeights(best.route.route) } : { status: 404 };
}

function destinationWeights(
  destinations: ReadonlyArray<{ destination: { host: string } | undefined; weight: number }>,
): Map<string, number> {
  const weights = new Map<string, number>();
  for (const { destination, weight } of destinations) {
    // A lone destination without a weight takes everything, as in Istio.
    const effective = destinations.length === 1 && weight === 0 ? 1 : weight;
    const host = destination?.host ?? "";
    if (effective > 0) weights.set(host, (weights.get(host) ?? 0) + effective);
  }
  return weights;
}

function matchRequest(
  output: GatewayApiOutput,
  services: ReadonlyMap<string, Service>,
  expectation: RequestExpectation,
): Outcome {
  if (expectation.sni !== undefined) return matchConnection(output, expectation);
  const request = toRequest(expectation);
  const host = request.host;
  const inMesh = expectation.mesh !== undefined;
  const bound = inMesh
    ? meshRoutes(
        boundVirtualServices(output, expectation),
        services,
        request,
        expectation.from ?? MESH_NAMESPACE,
      )
    : boundVirtualServices(output, expectation);
  let best = -1;
  for (const { hosts } of bound) {
    for (const domain of hosts) {
      if (hostMatches(domain, host, inMesh)) best = Math.max(best, domainRank(domain));
    }
  }
  // A sidecar builds one route table per port: a route whose every match
  // names another port is not in it.
  const routes = bound
    .filter(({ hosts }) => hosts.some((d) => hostMatches(d, host, inMesh) && domainRank(d) === best))
    .flatMap(({ vs }) => vs.http ?? [])
    .filter((r) => r.match.length === 0 || r.match.some((m) => !m.port || m.port === request.port));
  if (routes.length === 0) {
    // In the mesh, a Service no route applies to is reached as it is
    // (its default route); through a Gateway, nothing answers.
    const service = inMesh ? meshService(services, host, request.port) : undefined;
    if (!service) return { status: 404 };
    return outcomeOf(defaultRoute(service), request, services, expectation.backendResponseHeaders);
  }
  const route = routes.find((r) => r.match.length === 0 || r.match.some((m) => matches(m, request)));
  if (!route) return { status: 404 };
  return outcomeOf(route, request, services, expectation.backendResponseHeaders);
}

/**
 * The mesh routes a client's proxy uses for a host, as Istio (and push's
 * virtualServiceFor) pick them: a Gateway API route applies in its own
 * namespace (the consumer's, which wins) and in the Service's (the
 * producer's), nowhere else.
 */
function meshRoutes(
  bound: Array<{ vs: VirtualService; hosts: string[]; namespace: string }>,
  services: ReadonlyMap<string, Service>,
  request: Request,
  client: string,
): Array<{ vs: VirtualService; hosts: string[]; namespace: string }> {
  const serviceNamespace = meshService(services, request.host, request.port)?.namespace;
  const forHost = bound.filter(
    (b) =>
      b.hosts.some((h) => hostMatches(h, request.host, true)) &&
      (b.namespace === client || b.namespace === serviceNamespace),
  );
  const consumer = forHost.filter((b) => b.namespace === client && client !== serviceNamespace);
  return consumer.length > 0 ? consumer : forHost;
}

/** The Service a mesh client in the mesh namespace calls by a short name, if it has that port. */
function meshService(
  services: ReadonlyMap<string, Service>,
  host: string,
  port: number,
): Service | undefined {
  return [...services.values()].find(
    (service) =>
      (service.hostname === host || service.hostname.startsWith(`${host}.`)) &&
      service.ports.some((p) => p.number === port),
  );
}

function defaultRoute(service: Service): HTTPRoute {
  return {
    match: [],
    route: [
      { destination: { host: service.hostname, subset: "", port: undefined }, weight: 0, headers: undefined },
    ],
    mirrors: [],
  } as unknown as HTTPRoute;
}

/** In the mesh a Service is also called by its short and namespace-qualified names. */
function hostMatches(domain: string, host: string, inMesh: boolean): boolean {
  if (domainMatches(domain, host)) return true;
  if (!inMesh) return false;
  return domain.startsWith(`${host}.`) && domain.endsWith(`.svc.${DOMAIN_SUFFIX}`);
}

function stringMatches(match: StringMatch | undefined, value: string | undefined): boolean {
  if (!match) return true;
  if (value === undefined) return false;
  if (match.exact !== undefined) return value === match.exact;
  if (match.prefix !== undefined) return value.startsWith(match.prefix);
  if (match.regex !== undefined) return new RegExp(`^(?:${match.regex})$`).test(value);
  return true;
}

/** Istio's Gateway API prefixes match whole path segments (Envoy's path_separated_prefix), except "/". */
function pathMatches(match: StringMatch | undefined, path: string): boolean {
  if (match?.prefix === undefined || match.prefix.endsWith("/")) return stringMatches(match, path);
  return path === match.prefix || path.startsWith(`${match.prefix}/`);
}

function matches(match: HTTPMatchRequest, request: Request): boolean {
  return (
    (!match.port || match.port === request.port) &&
    pathMatches(match.uri, request.path) &&
    stringMatches(match.method, request.method) &&
    stringMatches(match.authority, request.host) &&
    Object.entries(match.headers ?? {}).every(([name, m]) =>
      stringMatches(m, request.headers.get(name.toLowerCase())),
    ) &&
    Object.entries(match.queryParams ?? {}).every(([name, m]) => stringMatches(m, request.query.get(name))) &&
    Object.entries(match.withoutHeaders ?? {}).every(
      ([name, m]) => !stringMatches(m, request.headers.get(name.toLowerCase())),
    )
  );
}

function durationMs(duration: { seconds: number; nanos: number } | undefined): number {
  return duration ? Number(duration.seconds) * 1000 + duration.nanos / 1e6 : 0;
}

/** A Go duration as the echo server reads `delay` ("1s", "500ms"). */
function goDurationMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  for (const [, value, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g))
    total += Number(value) * units[unit!]!;
  return total;
}

/** Envoy's header rewriting as Istio configures it: set overwrites, add appends (joined with a comma, as the echo server reports repeated headers), remove drops. */
function applyHeaderOperations(
  headers: Map<string, string>,
  ops: Headers_HeaderOperations | undefined,
): void {
  for (const [name, value] of Object.entries(ops?.set ?? {})) headers.set(name.toLowerCase(), value);
  for (const [name, value] of Object.entries(ops?.add ?? {})) {
    const existing = headers.get(name.toLowerCase());
    headers.set(name.toLowerCase(), existing === undefined ? value : `${existing},${value}`);
  }
  for (const name of ops?.remove ?? []) headers.delete(name.toLowerCase());
}

function lowerCaseHeaders(headers: Record<string, string> | undefined): Map<string, string> {
  return new Map(Object.entries(headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
}

function outcomeOf(
  route: HTTPRoute,
  request: Request,
  services: ReadonlyMap<string, Service>,
  backendResponseHeaders?: Record<string, string>,
): Outcome {
  if (route.redirect) return redirectOf(route, request);
  if (route.directResponse) return { status: route.directResponse.status };
  const backendRequest: Request = { ...request, headers: new Map(request.headers) };
  if (route.rewrite?.authority) backendRequest.host = route.rewrite.authority;
  const regexRewrite = route.rewrite?.uriRegexRewrite;
  if (regexRewrite) {
    backendRequest.path = request.path.replace(
      new RegExp(regexRewrite.match, "g"),
      regexRewrite.rewrite.replace(/\\(\d)/g, "$$$1"),
    );
  } else if (route.rewrite?.uri) {
    backendRequest.path = replacePrefix(route, request, route.rewrite.uri);
  }
  applyHeaderOperations(backendRequest.headers, route.headers?.request);
  const responseHeaders = lowerCaseHeaders(backendResponseHeaders);
  applyHeaderOperations(responseHeaders, route.headers?.response);
  // The upstream echo server waits for `?delay=`; Envoy answers 504 when the
  // route's timeout, or the per-try timeout, passes first (0: none).
  const delay = goDurationMs(request.query.get("delay") ?? "0s");
  const limits = [route.timeout, route.retries?.perTryTimeout].map(durationMs).filter((ms) => ms > 0);
  if (limits.some((ms) => delay > ms)) return { status: 504 };
  const weights = destinationWeights(route.route);
  // A backendRef's own filters (HTTPRouteDestination headers) apply after the
  // rule's, to the requests that go to it.
  const headersAtBackend = new Map<string, Map<string, string>>();
  for (const destination of route.route) {
    const headers = new Map(backendRequest.headers);
    applyHeaderOperations(headers, destination.headers?.request);
    headersAtBackend.set(destination.destination?.host ?? "", headers);
  }
  const lone = route.route.filter((d) => d.weight > 0 || route.route.length === 1);
  if (lone.length === 1) {
    applyHeaderOperations(backendRequest.headers, lone[0]!.headers?.request);
    applyHeaderOperations(responseHeaders, lone[0]!.headers?.response);
  }
  // No backend to send to, or none that exists: Istio sets Envoy's
  // cluster_not_found_response_code to 500 for Gateway API routes.
  if (![...weights.keys()].some((host) => services.has(host))) return { status: 500 };
  const mirroredTo = new Map<string, number>();
  if (route.mirror) mirroredTo.set(route.mirror.host, route.mirrorPercentage?.value ?? 100);
  for (const mirror of route.mirrors ?? []) {
    mirroredTo.set(mirror.destination?.host ?? "", mirror.percentage?.value ?? 100);
  }
  return { weights, backendRequest, responseHeaders, mirroredTo, headersAtBackend };
}

/**
 * A prefix rewrite (or prefix redirect) replaces the prefix the request
 * matched and keeps the rest; "/" removes the prefix, keeping one slash
 * (Istio's regex rewrite for Gateway API routes).
 */
function replacePrefix(route: HTTPRoute, request: Request, replacement: string): string {
  const prefix = route.match.find((m) => m.uri?.prefix !== undefined && pathMatches(m.uri, request.path))?.uri
    ?.prefix;
  if (prefix === undefined) return replacement;
  const rest = request.path.slice(prefix.length);
  if (rest === "") return replacement;
  if (replacement.endsWith("/") && rest.startsWith("/")) return replacement + rest.slice(1);
  return replacement + rest;
}

function redirectOf(route: HTTPRoute, request: Request): Outcome {
  const redirect = route.redirect!;
  const path =
    redirect.uri ||
    (redirect.prefixRewrite ? replacePrefix(route, request, redirect.prefixRewrite) : request.path);
  const scheme = redirect.scheme || request.scheme;
  // Istio's ApplyRedirect: an explicit port, or the port the route table
  // serves (FROM_REQUEST_PORT), and none for the scheme's default port.
  let port =
    redirect.port ??
    (redirect.derivePort === HTTPRedirect_RedirectPortSelection.FROM_REQUEST_PORT ? request.port : undefined);
  if ((port === 80 && scheme === "http") || (port === 443 && scheme === "https")) port = undefined;
  return {
    status: redirect.redirectCode || 301,
    redirect: { scheme, host: redirect.authority || request.host, ...(port ? { port } : {}), path },
  };
}

function serviceHost(namespacedName: string): string {
  const [namespace, name] = splitName(namespacedName);
  return `${name}.${namespace}.svc.${DOMAIN_SUFFIX}`;
}

function assertRequest(
  output: GatewayApiOutput,
  services: ReadonlyMap<string, Service>,
  expectation: RequestExpectation,
  index: number,
): void {
  const outcome = matchRequest(output, services, expectation);
  const what = `request ${index} (${JSON.stringify(expectation)})`;
  if (expectation.status !== undefined) assert.equal(outcome.status, expectation.status, what);
  if (expectation.redirect) {
    const { status, port, ...location } = expectation.redirect;
    assert.equal(outcome.status, status, `${what}: redirect status`);
    assert.ok(outcome.redirect, `${what}: redirects`);
    for (const [part, value] of Object.entries(location)) {
      assert.equal(outcome.redirect[part as keyof typeof location], value, `${what}: Location ${part}`);
    }
    // As upstream: no port expected means the scheme's default, left out of the Location.
    assert.equal(outcome.redirect.port, port, `${what}: Location port`);
  }
  const expectedWeights = expectation.backend ? { [expectation.backend]: 1 } : expectation.weights;
  if (expectedWeights) {
    assert.ok(outcome.weights, `${what}: reaches a backend, got status ${outcome.status}`);
    assert.deepEqual(
      shares(outcome.weights),
      shares(new Map(Object.entries(expectedWeights).map(([k, v]) => [serviceHost(k), v]))),
      what,
    );
  }
  for (const [backend, headers] of Object.entries(expectation.headersAtBackend ?? {})) {
    const seen = outcome.headersAtBackend?.get(serviceHost(backend));
    assert.ok(seen, `${what}: goes to ${backend}`);
    for (const [name, value] of Object.entries(headers)) {
      assert.equal(seen.get(name.toLowerCase()), value, `${what}: header ${name} at ${backend}`);
    }
  }
  if (expectation.mirroredTo) {
    const expected = new Map(
      expectation.mirroredTo.map((backend) => [
        serviceHost(backend),
        expectation.mirrorPercent?.[backend] ?? 100,
      ]),
    );
    assert.deepEqual(outcome.mirroredTo, expected, `${what}: mirrored to`);
  }
  const backendRequest = expectation.backendRequest;
  if (backendRequest) {
    const seen = outcome.backendRequest;
    assert.ok(seen, `${what}: reaches a backend`);
    if (backendRequest.path !== undefined)
      assert.equal(seen.path, backendRequest.path, `${what}: backend path`);
    if (backendRequest.host !== undefined)
      assert.equal(seen.host, backendRequest.host, `${what}: backend host`);
    for (const [name, value] of Object.entries(backendRequest.headers ?? {})) {
      assert.equal(seen.headers.get(name.toLowerCase()), value, `${what}: backend header ${name}`);
    }
    for (const name of backendRequest.absentHeaders ?? []) {
      assert.equal(seen.headers.has(name.toLowerCase()), false, `${what}: backend header ${name} is removed`);
    }
  }
  for (const [name, value] of Object.entries(expectation.responseHeaders ?? {})) {
    assert.equal(outcome.responseHeaders?.get(name.toLowerCase()), value, `${what}: response header ${name}`);
  }
  for (const name of expectation.absentResponseHeaders ?? []) {
    assert.ok(outcome.responseHeaders, `${what}: reaches a backend`);
    assert.equal(
      outcome.responseHeaders.has(name.toLowerCase()),
      false,
      `${what}: response header ${name} is removed`,
    );
  }
}

/** Weights as shares of the whole (rounded), with zero shares left out. */
function shares(weights: ReadonlyMap<string, number>): Record<string, number> {
  const total = [...weights.values()].reduce((a, b) => a + b, 0);
  return Object.fromEntries(
    [...weights]
      .filter(([, weight]) => weight > 0)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([host, weight]) => [host, Math.round((weight / total) * 1000) / 1000]),
  );
}

/** A resource as `then` names it: `Kind namespace/name`, the kind as manifests write it. */
function resourceName(resource: ConfigResource): string {
  return `${apiKind(resource.kind)} ${resource.namespace}/${resource.name}`;
}

/** The kind as manifests write it (Gateway for a stored KubernetesGateway). */
function apiKind(kind: string): string {
  return kind === "KubernetesGateway" ? "Gateway" : kind;
}

function splitName(namespacedName: string): [string, string] {
  const slash = namespacedName.indexOf("/");
  assert.ok(slash > 0, `${namespacedName} is namespace/name`);
  return [namespacedName.slice(0, slash), namespacedName.slice(slash + 1)];
}

// ---------------------------------------------------------------------------

const caseFiles = readdirSync(CASES)
  .filter((file) => file.endsWith(".yaml") && file !== "base.yaml")
  .sort();

test("every case names its upstream test", () => {
  assert.ok(caseFiles.length > 0);
  for (const file of caseFiles) {
    const { expectations } = loadCase(file);
    assert.match(expectations.test, /^[A-Z][A-Za-z0-9]+$/, file);
    const header = readFileSync(new URL(file, CASES), "utf8").split("\n", 1)[0];
    assert.equal(header?.startsWith(`# Upstream: ${expectations.test} (conformance/tests/`), true, file);
  }
});

for (const file of caseFiles) {
  const { input, expectations } = loadCase(file);
  const run = () => {
    const output = convertGatewayApi(input);
    if (process.env.DUMP === file)
      console.log(
        JSON.stringify({
          gw: output.gateways.map((g) => [g.ref.name, g.spec.servers.map((s) => [s.port?.number, s.hosts])]),
          vs: output.virtualServices.map((v) => [
            v.ref.name,
            v.spec.hosts,
            v.spec.gateways,
            v.spec.http.map((h) => [
              JSON.stringify(h.match),
              JSON.stringify(h.route),
              h.directResponse,
              h.redirect,
            ]),
          ]),
        }),
      );
    assertStatuses(output, expectations);
    (expectations.requests ?? []).forEach((request, index) => {
      assertRequest(output, input.services, request, index);
    });
    const then = expectations.then;
    if (then) {
      const deleted = new Set(then.delete ?? []);
      const updates = new Map((then.update ?? []).map((u) => [u.resource, u.spec]));
      const remaining = input.resources
        .filter((r) => !deleted.has(resourceName(r)))
        .map((r) => {
          const spec = updates.get(resourceName(r));
          if (!spec) return r;
          const updated = storedResource(file, {
            apiVersion: r.apiVersion,
            kind: apiKind(r.kind),
            metadata: { name: r.name, namespace: r.namespace, labels: r.labels },
            spec,
          });
          return { ...updated, generation: r.generation + 1 };
        });
      assert.equal(
        remaining.length,
        input.resources.length - deleted.size,
        `${file}: then.delete names resources of the case`,
      );
      assert.equal(
        [...updates.keys()].filter((name) => !input.resources.some((r) => resourceName(r) === name)).length,
        0,
        `${file}: then.update names resources of the case`,
      );
      // The automated deployment follows the Gateways' listeners.
      const services = new Map(input.services);
      for (const service of deployedGatewayServices(remaining)) services.set(service.hostname, service);
      const after = convertGatewayApi({ ...input, resources: remaining, services });
      assertStatuses(after, then);
      (then.requests ?? []).forEach((request, index) => {
        assertRequest(after, services, request, index);
      });
    }
  };
  if (expectations.unsupported === undefined) {
    test(`${expectations.test} (${file})`, run);
  } else {
    test(`${expectations.test} (${file}) fails as CONFORMANCE.md says: ${expectations.unsupported}`, () => {
      assert.ok(expectations.failsWith, `${file}: an unsupported case says where it fails (failsWith)`);
      assert.throws(
        run,
        (error: Error) => error.message.includes(expectations.failsWith!),
        `${file} passes now: drop "unsupported" and claim its features in CONFORMANCE.md`,
      );
    });
  }
}

/**
 * The upstream tests (kubernetes-sigs/gateway-api v1.5.1, conformance/tests)
 * by ShortName, with the features each needs: the suite runs a test when
 * every feature it needs is claimed.
 */
const UPSTREAM_TESTS: Readonly<Record<string, readonly string[]>> = JSON.parse(
  readFileSync(new URL("upstream-tests.json", CASES), "utf8"),
);

/** The core features of each conformance profile (conformance/utils/suite/profiles.go). */
const PROFILE_CORE: Readonly<Record<string, readonly string[]>> = {
  "GATEWAY-HTTP": ["Gateway", "ReferenceGrant", "HTTPRoute"],
  "GATEWAY-GRPC": ["Gateway", "ReferenceGrant", "GRPCRoute"],
  "GATEWAY-TLS": ["Gateway", "ReferenceGrant", "TLSRoute"],
  "MESH-HTTP": ["Mesh", "HTTPRoute"],
  "MESH-GRPC": ["Mesh", "GRPCRoute"],
};

test("each case needs the features its upstream test needs", () => {
  for (const file of caseFiles) {
    const { expectations } = loadCase(file);
    const upstream = UPSTREAM_TESTS[expectations.test];
    assert.ok(upstream, `${file}: ${expectations.test} is an upstream test`);
    assert.deepEqual([...expectations.features].sort(), [...upstream].sort(), file);
  }
});

test("every core test of the five profiles has its case here", () => {
  const here = new Set(caseFiles.map((file) => loadCase(file).expectations.test));
  for (const [profile, core] of Object.entries(PROFILE_CORE)) {
    const missing = Object.entries(UPSTREAM_TESTS)
      .filter(([name, needs]) => needs.every((f) => core.includes(f)) && !here.has(name))
      .map(([name]) => name);
    assert.deepEqual(missing, [], `${profile}: core tests without a case`);
  }
});

test("CONFORMANCE.md claims a profile's features only when every upstream test they enable passes here", () => {
  const passing = new Set<string>();
  for (const file of caseFiles) {
    const { expectations } = loadCase(file);
    if (expectations.unsupported === undefined) passing.add(expectations.test);
  }
  const document = readFileSync(new URL("../CONFORMANCE.md", import.meta.url), "utf8");
  const section = /## Claimed\n([\s\S]*?)\n## /.exec(document)?.[1] ?? "";
  const claims = [...section.matchAll(/^- ([A-Z-]+): (.*)$/gm)];
  assert.ok(claims.length > 0, "CONFORMANCE.md has a Claimed section with one line per profile");
  for (const [, profile, list] of claims) {
    const claimed = new Set([...list!.matchAll(/`([A-Za-z0-9]+)`/g)].map((m) => m[1]!));
    for (const feature of PROFILE_CORE[profile!] ?? ["(unknown profile)"]) {
      assert.ok(claimed.has(feature), `${profile} claims its core feature ${feature}`);
    }
    const enabled = Object.entries(UPSTREAM_TESTS)
      .filter(([, features]) => features.every((feature) => claimed.has(feature)))
      .map(([name]) => name);
    assert.deepEqual(
      enabled.filter((name) => !passing.has(name)),
      [],
      `${profile}: the upstream tests its claimed features enable all pass here`,
    );
  }
});

test("the GATEWAY-HTTP extended features CONFORMANCE.md says pass have every test they add (with the core and each other) passing here", () => {
  const passing = new Set(
    caseFiles
      .map((file) => loadCase(file).expectations)
      .filter((e) => e.unsupported === undefined)
      .map((e) => e.test),
  );
  const document = readFileSync(new URL("../CONFORMANCE.md", import.meta.url), "utf8");
  const paragraph = /Passing here but not claimable[\s\S]*?\n\n/.exec(document)?.[0] ?? "";
  const features = [...paragraph.matchAll(/`([A-Za-z0-9]+)`/g)].map((m) => m[1]!);
  assert.ok(features.length > 0);
  const core = PROFILE_CORE["GATEWAY-HTTP"]!;
  for (const feature of features) {
    const added = Object.entries(UPSTREAM_TESTS)
      .filter(
        ([, needs]) =>
          needs.includes(feature) && needs.every((f) => features.includes(f) || core.includes(f)),
      )
      .map(([name]) => name);
    assert.ok(added.length > 0, `${feature} adds GATEWAY-HTTP tests`);
    assert.deepEqual(
      added.filter((name) => !passing.has(name)),
      [],
      `${feature}: the tests it adds all pass here`,
    );
  }
});

test("the data-plane model routes as Envoy does with Istio's Gateway API semantics", () => {
  const ref = (kind: string, name: string) => ({ kind, namespace: "infra", name });
  const destination = (host: string, weight = 0) => ({
    destination: { host, subset: "", port: undefined },
    weight,
    headers: undefined,
  });
  const route = (match: Partial<HTTPMatchRequest>[], extra: Partial<HTTPRoute>): HTTPRoute =>
    ({ name: "", match, route: [], mirrors: [], ...extra }) as HTTPRoute;
  const output: GatewayApiOutput = {
    gateways: [
      {
        ref: ref("Gateway", "gw-istio-autogenerated-k8s-gateway-http"),
        source: ref("KubernetesGateway", "gw"),
        generation: 1,
        spec: {
          servers: [
            { port: { number: 80, protocol: "HTTP", name: "http", targetPort: 0 }, hosts: ["infra/*"] },
          ],
        } as unknown as Gateway,
      },
    ],
    virtualServices: [
      {
        ref: ref("VirtualService", "wildcard"),
        source: ref("HTTPRoute", "a"),
        generation: 1,
        spec: {
          hosts: ["*.example.com"],
          gateways: ["infra/gw-istio-autogenerated-k8s-gateway-http"],
          http: [route([], { route: [destination("wild.infra.svc.cluster.local")] })],
          tls: [],
          tcp: [],
          exportTo: [],
        },
      },
      {
        ref: ref("VirtualService", "exact"),
        source: ref("HTTPRoute", "b"),
        generation: 1,
        spec: {
          hosts: ["a.example.com"],
          gateways: ["infra/gw-istio-autogenerated-k8s-gateway-http"],
          http: [
            route([{ uri: { prefix: "/v2" }, headers: { version: { exact: "two" } } }], {
              route: [
                destination("v2.infra.svc.cluster.local", 3),
                destination("v1.infra.svc.cluster.local", 1),
              ],
            }),
            route([{ uri: { prefix: "/old" } }], {
              redirect: {
                uri: "",
                authority: "new.example.com",
                scheme: "https",
                redirectCode: 302,
                prefixRewrite: "",
              },
            }),
            route([{ uri: { prefix: "/strip" } }], {
              rewrite: { uri: "/", authority: "", uriRegexRewrite: undefined },
              route: [destination("v1.infra.svc.cluster.local")],
            }),
          ],
          tls: [],
          tcp: [],
          exportTo: [],
        },
      },
    ],
    destinationRules: [],
    statuses: new Map(),
  };
  const services = new Map(
    ["wild", "v1", "v2"].map((name) => [
      `${name}.infra.svc.cluster.local`,
      registryService("infra", name, { ports: [{ port: 8080 }] }),
    ]),
  );
  const at = (request: Omit<RequestExpectation, "gateway">) =>
    matchRequest(output, services, { gateway: "infra/gw", ...request });
  assert.deepEqual(
    shares(at({ host: "a.example.com", path: "/v2/x", headers: { Version: "two" } }).weights!),
    {
      "v1.infra.svc.cluster.local": 0.25,
      "v2.infra.svc.cluster.local": 0.75,
    },
  );
  // Segment prefix: /v2x is not under /v2; the exact host's virtual host has no other route.
  assert.equal(at({ host: "a.example.com", path: "/v2x", headers: { version: "two" } }).status, 404);
  assert.deepEqual(
    [...at({ host: "b.example.com:8080", path: "/v2x" }).weights!.keys()],
    ["wild.infra.svc.cluster.local"],
  );
  assert.equal(at({ host: "example.com" }).status, 404);
  assert.equal(
    at({ host: "a.example.com", port: 443, path: "/v2", headers: { version: "two" } }).status,
    404,
  );
  assert.deepEqual(at({ host: "a.example.com", path: "/old/page" }).redirect, {
    scheme: "https",
    host: "new.example.com",
    path: "/old/page",
  });
  assert.equal(at({ host: "a.example.com", path: "/strip/me" }).backendRequest?.path, "/me");
  assert.equal(at({ host: "a.example.com", path: "/strip" }).backendRequest?.path, "/");
  // A backend the registry does not have: Envoy's cluster_not_found_response_code, 500.
  services.delete("v1.infra.svc.cluster.local");
  assert.equal(at({ host: "a.example.com", path: "/strip" }).status, 500);
});
