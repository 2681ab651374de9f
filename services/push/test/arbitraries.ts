// fast-check arbitraries for the property tests (issue 18): a random registry
// (what discovery writes) and random Istio config over it that
// @sextant/validation accepts. Each arbitrary is built to respect the rule its
// comment names (libs/validation/src/rules/*.ts, which follow Istio's
// pilot/pkg/config/validation), so that a case is never rejected by ingest:
// everything the generators get is config a user can apply.
import { headerNameProblem, headerValueProblem, hostsOverlap, MAX_HEADER_BYTES } from "@sextant/validation";
import fc from "fast-check";

/** The namespaces of workloads and config; istio-system is the root namespace (mesh-wide policy). */
export const NAMESPACES = ["default", "ns1", "ns2"] as const;
export const ROOT_NAMESPACE = "istio-system";

/** A config resource as a user writes it. */
export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
}

/** A registry service (sextant.mesh.v1.Service as JSON). */
export interface RegistryService {
  hostname: string;
  namespace: string;
  name: string;
  addresses: string[];
  ports: Array<{ name: string; number: number; targetPort: number; protocol: string }>;
  labels: Record<string, string>;
  selector: Record<string, string>;
  resolution: string;
  meshExternal?: boolean;
  /** For an ExternalName Service (resolution ALIAS): the host it is another name for. */
  externalName?: string;
  registry: string;
}

/** A workload (pod) of the registry: an endpoint of its services, and a possible proxy. */
export interface Workload {
  ip: string;
  pod: string;
  namespace: string;
  labels: Record<string, string>;
  serviceAccount: string;
  locality: { region: string; zone: string; subzone: string };
}

/** The registry of a case: services, their endpoint shards, and the pods. */
export interface Registry {
  services: RegistryService[];
  endpoints: Array<{ hostname: string; endpoints: Array<Record<string, unknown>> }>;
  workloads: Workload[];
  /** The ServiceEntries the ServiceEntry services came from (as config, so a case shows them). */
  serviceEntries: Resource[];
}

/** One case: registry, config, and the proxy that asks. */
export interface Scenario {
  registry: Registry;
  config: Resource[];
  /** Index into registry.workloads. */
  proxy: number;
  kind: "sidecar" | "grpc" | "router";
}

const DOMAIN = "cluster.local";

// ---------------------------------------------------------------- registry

/**
 * Service port kinds: the name prefix Istio infers the protocol from, and the
 * protocol discovery writes for it. "" is an unnamed port (protocol sniffed);
 * "web" has no known prefix (sniffed too).
 */
const PORT_KINDS: ReadonlyArray<{ prefix: string; protocol: string }> = [
  { prefix: "", protocol: "PROTOCOL_UNSPECIFIED" },
  { prefix: "web", protocol: "PROTOCOL_UNSPECIFIED" },
  { prefix: "http", protocol: "PROTOCOL_HTTP" },
  { prefix: "http2", protocol: "PROTOCOL_HTTP2" },
  { prefix: "grpc", protocol: "PROTOCOL_GRPC" },
  { prefix: "grpc-web", protocol: "PROTOCOL_GRPC_WEB" },
  { prefix: "https", protocol: "PROTOCOL_HTTPS" },
  { prefix: "tls", protocol: "PROTOCOL_TLS" },
  { prefix: "tcp", protocol: "PROTOCOL_TCP" },
  { prefix: "mongo", protocol: "PROTOCOL_MONGO" },
  { prefix: "redis", protocol: "PROTOCOL_REDIS" },
  { prefix: "mysql", protocol: "PROTOCOL_MYSQL" },
];

/**
 * Port numbers: common ones, and (rarely) the ports Istio reserves for the
 * sidecar itself (15001 outbound, 15006 inbound, 15021 health, 15090
 * Prometheus), which Kubernetes lets a Service use anyway.
 */
const portNumber = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(80, 443, 3306, 8080, 9080, 9090, 27017, 6379, 31400) },
  { weight: 1, arbitrary: fc.constantFrom(15001, 15006, 15021, 15090) },
);

/**
 * A Kubernetes Service's ports: distinct numbers; a single port may be
 * unnamed, several must have distinct names (Kubernetes' rule), which
 * `<prefix>-<number>` gives, still carrying the protocol prefix.
 */
const servicePorts = fc
  .uniqueArray(
    fc.record({ number: portNumber, kind: fc.constantFrom(...PORT_KINDS), target: fc.option(portNumber) }),
    {
      minLength: 1,
      maxLength: 3,
      selector: (p) => p.number,
    },
  )
  .map((ports) =>
    ports.map(({ number, kind, target }) => ({
      name:
        ports.length === 1 ? kind.prefix : kind.prefix === "" ? `port${number}` : `${kind.prefix}-${number}`,
      number,
      targetPort: target ?? number,
      protocol: kind.protocol,
    })),
  );

/** The port of a Service drawn with none that must have one. */
const defaultPorts = [{ name: "http", number: 80, targetPort: 8080, protocol: "PROTOCOL_HTTP" }];

/** Node localities: two regions, zones within them, sometimes a subzone. */
const locality = fc.record({
  region: fc.constantFrom("us-east1", "us-west1"),
  zone: fc.constantFrom("b", "c"),
  subzone: fc.constantFrom("", "", "rack1"),
});

/** A pod of a service: its version label, whether it is injected (tlsMode label), its locality. */
const podShape = fc.record({
  version: fc.constantFrom("v1", "v2", "v3"),
  injected: fc.boolean(),
  locality,
  ownAccount: fc.boolean(),
});

/**
 * What an ExternalName Service may alias: a ServiceEntry host, another
 * Kubernetes Service's FQDN, a host nobody serves, or a bare IP (which
 * Kubernetes allows, as a name, though DNS cannot resolve it as a CNAME).
 */
const EXTERNAL_NAMES = [
  "api.example.com",
  `beta.ns1.svc.cluster.local`,
  "unknown.example.net",
  "search.external.test",
  "203.0.113.7",
];

/**
 * A Kubernetes Service: ClusterIP (single-stack or dual-stack, so two VIPs),
 * headless (no VIP, PASSTHROUGH), or ExternalName (discovery's
 * serviceFromKube: resolution ALIAS of the external name, no VIP, no
 * selector, no endpoints, mesh-external; its ports are optional), and its pods.
 */
const kubeServiceShape = fc.record({
  namespace: fc.constantFrom(...NAMESPACES),
  type: fc.constantFrom("ClusterIP", "ClusterIP", "DualStack", "Headless", "Headless", "ExternalName"),
  externalName: fc.constantFrom(...EXTERNAL_NAMES),
  ports: fc.oneof(
    { weight: 9, arbitrary: servicePorts },
    { weight: 1, arbitrary: servicePorts.map(() => [] as typeof defaultPorts) },
  ),
  pods: fc.array(podShape, { maxLength: 3 }),
});

/** Hosts ServiceEntries may name: FQDNs, a wildcard, a name in a cluster domain. */
const SERVICE_ENTRY_HOSTS = [
  "api.example.com",
  "db.example.org",
  "*.wild.example.com",
  "search.external.test",
  "legacy.ns1.svc.cluster.local",
];

/**
 * ServiceEntry ports: names are required, DNS labels and distinct
 * (service_entry.ts), so each is `<prefix>-<number>` or a bare prefix.
 */
const serviceEntryPorts = fc
  .uniqueArray(
    fc.record({
      number: portNumber,
      kind: fc.constantFrom(...PORT_KINDS.filter((k) => k.prefix !== "")),
    }),
    { minLength: 1, maxLength: 2, selector: (p) => p.number },
  )
  .map((ports) =>
    ports.map(({ number, kind }) => ({
      name: `${kind.prefix}-${number}`,
      number,
      protocol: kind.prefix === "web" ? "" : kind.prefix.toUpperCase(),
    })),
  );

/** ServiceEntry port protocols that can serve several hosts (HTTP's authority, TLS's SNI). */
const MULTI_HOST_PROTOCOLS = new Set(["HTTP", "HTTP2", "GRPC", "GRPC-WEB", "HTTPS", "TLS"]);

/**
 * A ServiceEntry that service_entry.ts accepts: CIDR addresses only with
 * NONE or STATIC; STATIC has IP endpoints; DNS resolves a wildcard host only
 * through endpoints; DNS_ROUND_ROBIN has at most one endpoint; endpoint port
 * names are the entry's.
 */
const serviceEntryShape = fc
  .record({
    namespace: fc.constantFrom(...NAMESPACES),
    hosts: fc.uniqueArray(fc.constantFrom(...SERVICE_ENTRY_HOSTS), { minLength: 1, maxLength: 2 }),
    resolution: fc.constantFrom("NONE", "STATIC", "DNS", "DNS_ROUND_ROBIN"),
    location: fc.constantFrom("MESH_EXTERNAL", "MESH_INTERNAL"),
    addressKind: fc.constantFrom("none", "ip", "cidr"),
    ports: serviceEntryPorts,
    endpointCount: fc.integer({ min: 0, max: 2 }),
    dnsEndpoint: fc.constantFrom("ip", "name"),
    endpointLocality: locality,
  })
  .map((se) => {
    let addressKind = se.addressKind;
    if (addressKind === "cidr" && se.resolution !== "NONE" && se.resolution !== "STATIC") addressKind = "ip";
    let count = se.endpointCount;
    if (se.resolution === "NONE") count = 0;
    if (se.resolution === "STATIC") count = Math.max(1, count);
    if (se.resolution.startsWith("DNS") && se.hosts.some((h) => h.includes("*"))) count = Math.max(1, count);
    if (se.resolution === "DNS_ROUND_ROBIN") count = Math.min(1, count);
    // Several hosts need HTTP or TLS ports (plain TCP cannot tell them apart) unless resolution is NONE.
    const portsTellHostsApart = se.ports.every((p) => MULTI_HOST_PROTOCOLS.has(p.protocol));
    const hosts = se.resolution === "NONE" || portsTellHostsApart ? se.hosts : se.hosts.slice(0, 1);
    return { ...se, hosts, addressKind, endpointCount: count };
  });

const registryShape = fc.record({
  // Service names are distinct, so hostnames (name.namespace) are too and no two Services share a VIP.
  kube: fc
    .uniqueArray(fc.constantFrom("alpha", "beta", "gamma", "delta", "echo"), { minLength: 1, maxLength: 4 })
    .chain((names) =>
      fc.tuple(...names.map((name) => kubeServiceShape.map((shape) => ({ name, ...shape })))),
    ),
  serviceEntries: fc.array(serviceEntryShape, { maxLength: 2 }),
});

const RESOLUTION_OF: Record<string, string> = {
  NONE: "RESOLUTION_PASSTHROUGH",
  STATIC: "RESOLUTION_STATIC",
  DNS: "RESOLUTION_DNS",
  DNS_ROUND_ROBIN: "RESOLUTION_DNS_ROUND_ROBIN",
};

const PROTOCOL_OF: Record<string, string> = Object.fromEntries(
  PORT_KINDS.map((k) => [k.prefix.toUpperCase(), k.protocol]),
);

/** A random registry: Kubernetes Services (ClusterIP, dual-stack, headless, ExternalName) with pods, and ServiceEntry services. */
export const registryArb: fc.Arbitrary<Registry> = registryShape.map(({ kube, serviceEntries }) => {
  const registry: Registry = { services: [], endpoints: [], workloads: [], serviceEntries: [] };
  kube.forEach((shape, i) => {
    // The first service holds the case's proxy, so it is never an ExternalName one (which has no pods);
    // only an ExternalName Service may have no ports (Kubernetes' rule).
    const type = i === 0 && shape.type === "ExternalName" ? "ClusterIP" : shape.type;
    const svc = {
      ...shape,
      type,
      ports: (type !== "ExternalName" && shape.ports.length === 0
        ? defaultPorts
        : shape.ports) as typeof defaultPorts,
    };
    const hostname = `${svc.name}.${svc.namespace}.svc.${DOMAIN}`;
    if (type === "ExternalName") {
      registry.services.push({
        hostname,
        namespace: svc.namespace,
        name: svc.name,
        addresses: [],
        ports: svc.ports,
        labels: { app: svc.name },
        selector: {},
        resolution: "RESOLUTION_ALIAS",
        meshExternal: true,
        externalName: svc.externalName,
        registry: "kubernetes",
      });
      return;
    }
    registry.services.push({
      hostname,
      namespace: svc.namespace,
      name: svc.name,
      addresses:
        type === "Headless"
          ? []
          : type === "DualStack"
            ? [`10.96.0.${10 + i}`, `fd00:10:96::${(10 + i).toString(16)}`]
            : [`10.96.0.${10 + i}`],
      ports: svc.ports,
      labels: { app: svc.name },
      selector: { app: svc.name },
      resolution: type === "Headless" ? "RESOLUTION_PASSTHROUGH" : "RESOLUTION_STATIC",
      registry: "kubernetes",
    });
    // Every case has a pod to be its proxy: the first service always has one.
    const pods =
      i === 0 && svc.pods.length === 0
        ? [
            {
              version: "v1",
              injected: true,
              locality: { region: "us-east1", zone: "b", subzone: "" },
              ownAccount: true,
            },
          ]
        : svc.pods;
    const endpoints = pods.map((pod, j) => {
      const labels: Record<string, string> = { app: svc.name, version: pod.version };
      if (pod.injected) labels["security.istio.io/tlsMode"] = "istio";
      const workload: Workload = {
        ip: `10.244.${i}.${10 + j}`,
        pod: `${svc.name}-${pod.version}-${j}`,
        namespace: svc.namespace,
        labels,
        serviceAccount: pod.ownAccount ? svc.name : "default",
        locality: { ...pod.locality, zone: `${pod.locality.region}-${pod.locality.zone}` },
      };
      registry.workloads.push(workload);
      return {
        address: workload.ip,
        ports: Object.fromEntries(svc.ports.map((p) => [p.name, p.targetPort])),
        labels,
        serviceAccount: workload.serviceAccount,
        workloadName: `${svc.name}-${pod.version}`,
        namespace: svc.namespace,
        locality: workload.locality,
      };
    });
    registry.endpoints.push({ hostname, endpoints });
  });
  serviceEntries.forEach((se, i) => {
    const name = `external-${i}`;
    const addresses =
      se.addressKind === "ip"
        ? [`240.240.0.${10 + i}`]
        : se.addressKind === "cidr"
          ? [`192.168.${i}.0/24`]
          : [];
    const endpoints = Array.from({ length: se.endpointCount }, (_, j) => ({
      address:
        se.resolution === "STATIC" || se.dnsEndpoint === "ip"
          ? `203.0.113.${10 * i + j + 1}`
          : `node${j}.example.net`,
      locality: `${se.endpointLocality.region}/${se.endpointLocality.region}-${se.endpointLocality.zone}`,
      labels: { version: j === 0 ? "v1" : "v2" },
    }));
    registry.serviceEntries.push({
      apiVersion: "networking.istio.io/v1",
      kind: "ServiceEntry",
      metadata: { name, namespace: se.namespace },
      spec: {
        hosts: se.hosts,
        ...(addresses.length > 0 ? { addresses } : {}),
        ports: se.ports.map((p) => ({
          name: p.name,
          number: p.number,
          ...(p.protocol ? { protocol: p.protocol } : {}),
        })),
        location: se.location,
        resolution: se.resolution,
        ...(endpoints.length > 0 ? { endpoints } : {}),
      },
    });
    // As discovery's translateServiceEntry: a service per host, the entry's endpoints (or, for DNS
    // without endpoints, the host itself) in each host's shard.
    for (const hostname of se.hosts) {
      if (registry.services.some((s) => s.hostname === hostname)) continue;
      registry.services.push({
        hostname,
        namespace: se.namespace,
        name,
        addresses,
        ports: se.ports.map((p) => ({
          name: p.name,
          number: p.number,
          targetPort: 0,
          protocol: PROTOCOL_OF[p.protocol] ?? "PROTOCOL_UNSPECIFIED",
        })),
        labels: {},
        selector: {},
        resolution: RESOLUTION_OF[se.resolution]!,
        meshExternal: se.location === "MESH_EXTERNAL",
        registry: "serviceentry",
      });
      const shard =
        endpoints.length === 0 && se.resolution.startsWith("DNS")
          ? [
              {
                address: hostname,
                ports: Object.fromEntries(se.ports.map((p) => [p.name, p.number])),
                namespace: se.namespace,
              },
            ]
          : endpoints.map((ep) => {
              const [region = "", zone = ""] = ep.locality.split("/");
              return {
                address: ep.address,
                ports: Object.fromEntries(se.ports.map((p) => [p.name, p.number])),
                labels: ep.labels,
                namespace: se.namespace,
                locality: { region, zone },
              };
            });
      if (shard.length > 0) registry.endpoints.push({ hostname, endpoints: shard });
    }
  });
  return registry;
});

// ---------------------------------------------------------------- config

/** What the config arbitraries know of the registry: its hosts, ports and namespaces. */
interface Known {
  services: RegistryService[];
}

/**
 * A host a rule names: a registry host as FQDN, short name or name.namespace
 * (completed with the rule's namespace, as Istio does), a wildcard, or a host
 * nobody serves. All pass hostProblem (common.ts): a wildcard only in the
 * first label.
 */
function hostArb(known: Known, { wildcards = true } = {}): fc.Arbitrary<string> {
  const fromRegistry = fc
    .constantFrom(...known.services)
    .chain((s) =>
      s.registry === "kubernetes"
        ? fc.constantFrom(s.hostname, s.name, `${s.name}.${s.namespace}`)
        : fc.constant(s.hostname),
    );
  const others = wildcards
    ? fc.constantFrom("*.example.com", "*.wild.example.com", `*.ns1.svc.${DOMAIN}`, "unknown.example.com")
    : fc.constantFrom("unknown.example.com", `nothing.ns2.svc.${DOMAIN}`);
  return fc.oneof({ weight: 5, arbitrary: fromRegistry }, { weight: 1, arbitrary: others });
}

/** A service's port number, or any port (a route may name a port the service lacks). */
function portOf(known: Known, host: string): fc.Arbitrary<number> {
  const service = known.services.find((s) => s.hostname === host || s.name === host.split(".")[0]);
  return service && service.ports.length > 0
    ? fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...service.ports.map((p) => p.number)) },
        { weight: 1, arbitrary: portNumber },
      )
    : portNumber;
}

/** A destination (checkDestination): a host other than "*", a DNS-label subset, a port in 1..65535. */
function destinationArb(known: Known): fc.Arbitrary<Record<string, unknown>> {
  return hostArb(known, { wildcards: false }).chain((host) =>
    fc.record(
      {
        host: fc.constant(host),
        subset: fc.constantFrom("v1", "v2", "v3"),
        port: portOf(known, host).map((number) => ({ number })),
      },
      { requiredKeys: ["host"] },
    ),
  );
}

/**
 * Weighted destinations (checkWeightedDestinations): weights are
 * non-negative and not all 0; they are made to add up to 100 as users write
 * them (a single destination may omit its weight).
 */
function weightedArb(known: Known, max = 3): fc.Arbitrary<Array<Record<string, unknown>>> {
  return fc
    .tuple(
      fc.array(destinationArb(known), { minLength: 1, maxLength: max }),
      fc.array(fc.integer({ min: 0, max: 100 }), { minLength: max, maxLength: max }),
    )
    .map(([destinations, cuts]) => {
      if (destinations.length === 1) return [{ destination: destinations[0] }];
      const points = [0, ...cuts.slice(0, destinations.length - 1).sort((a, b) => a - b), 100];
      return destinations.map((destination, i) => ({ destination, weight: points[i + 1]! - points[i]! }));
    });
}

/** RE2 expressions (checkRegex), from the trivial to ones with classes and groups. */
const regexArb = fc.constantFrom(
  ".*",
  "/api/.*",
  "^/v[0-9]+/.*$",
  "/(a|b)/c",
  "[a-z]+",
  "\\d{3}",
  "(?i)/admin.*",
);

/**
 * A StringMatch (checkStringMatch): exact, prefix or a valid RE2 regex; an
 * empty exact or prefix only where `emptyIn` names it, as Istio accepts ""
 * (an empty exact in uri, headers and query params; an empty prefix only in uri).
 */
function stringMatchArb(
  values: fc.Arbitrary<string>,
  emptyIn: ReadonlyArray<"exact" | "prefix">,
): fc.Arbitrary<Record<string, string>> {
  const valueFor = (kind: "exact" | "prefix") =>
    emptyIn.includes(kind) ? fc.oneof(values, fc.constant("")) : values;
  return fc.oneof(
    valueFor("exact").map((exact) => ({ exact })),
    valueFor("prefix").map((prefix) => ({ prefix })),
    regexArb.map((regex) => ({ regex })),
  );
}

/**
 * Header names a route may add, set, remove or match: common lower-case
 * ones, and tokens in mixed case or with the rarer token characters, which
 * Envoy takes as they are (HTTP_HEADER_NAME, and lower-cases when it adds).
 * Names validation refuses (empty, not a token) are drawn too and filtered
 * out by its own rule (headerNameProblem), so that the generator follows
 * validation and never hands push a name ingest would refuse.
 */
const headerName = fc
  .oneof(
    {
      weight: 6,
      arbitrary: fc.constantFrom(
        "x-user",
        "end-user",
        "x-request-id",
        "cookie",
        "x-b3-traceid",
        "user-agent",
      ),
    },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "X-Custom-Header",
        "x_under_score",
        "x.dotted",
        "x~tilde!#$&'*+^`|",
        "X-USER",
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom("", "x a", "x:colon", "x\ny", "é") },
  )
  .filter((name) => headerNameProblem(name) === undefined);

/** Match header names beyond the operation ones (Istio's ValidateHTTPHeaderNameOrJwtClaimRoute): pseudo-headers and JWT claims. */
const matchHeaderName = fc.oneof(
  { weight: 6, arbitrary: headerName },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      ":method",
      ":authority",
      ":path",
      ":scheme",
      "@request.auth.claims.group",
      "@request.auth.claims[nested][key]",
    ),
  },
);

/**
 * Pieces of a header value: plain text (spaces, tabs, non-ASCII, JSON,
 * punctuation), `%%` escapes, the substitution commands Envoy knows (with
 * arguments and a length), and pieces validation refuses: a lone `%`,
 * lower-case or unknown-syntax commands, control characters.
 */
const headerValuePiece = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom("v", "sextant", "a b", "\ttab", "é ü ✓", '{"k":"v"}', "a,b;c=d", "=", " "),
  },
  { weight: 2, arbitrary: fc.constant("%%") },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "%DOWNSTREAM_REMOTE_ADDRESS%",
      "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
      "%DOWNSTREAM_LOCAL_ADDRESS%",
      "%UPSTREAM_REMOTE_ADDRESS%",
      "%HOSTNAME%",
      "%PROTOCOL%",
      "%START_TIME%",
      "%START_TIME(%s.%3f)%",
      "%REQ(x-user)%",
      "%REQ(:authority)%",
      "%REQ:10%",
      "%REQ(user-agent):5%",
      '%UPSTREAM_METADATA(["istio", "canonical_name"])%',
      "%UPSTREAM_METADATA(istio:canonical_name)%",
      "%FILTER_STATE(key)%",
      "%ENVIRONMENT(HOME)%",
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom("%", "%hostname%", "%A B%", "\n", "\r", "\u0000", "\u007f") },
);

/**
 * A header value for set/add: pieces joined, or (rarely) a value at or just
 * over Envoy's 16 KiB limit; filtered by validation's own rule, as ingest
 * would refuse the rest.
 */
const headerValue: fc.Arbitrary<string> = fc
  .oneof(
    { weight: 40, arbitrary: fc.array(headerValuePiece, { maxLength: 3 }).map((pieces) => pieces.join("")) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(MAX_HEADER_BYTES - 1, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1)
        .map((n) => "%%".padEnd(n, "x")),
    },
  )
  .filter((value) => headerValueProblem(value) === undefined);

/**
 * An HTTP match (checkHttpMatch): uri/method/authority/scheme matches,
 * header and query matches, withoutHeaders with the bare "*" regex that
 * means "present" only there, a port in range, source labels.
 */
function httpMatchArb(known: Known, host: string): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      name: fc.constantFrom("m1", "m2"),
      uri: stringMatchArb(fc.constantFrom("/", "/api", "/productpage", "/static/"), ["exact", "prefix"]),
      method: fc.constantFrom("GET", "POST", "PUT", "DELETE").map((exact) => ({ exact })),
      authority: stringMatchArb(fc.constantFrom("example.com", "alpha"), []),
      scheme: fc.constantFrom("http", "https").map((exact) => ({ exact })),
      headers: fc.dictionary(
        matchHeaderName,
        stringMatchArb(fc.constantFrom("jason", "v1", "Mozilla"), ["exact"]),
        { maxKeys: 2 },
      ),
      withoutHeaders: fc.dictionary(
        matchHeaderName,
        fc.oneof(fc.constant({ regex: "*" }), stringMatchArb(fc.constantFrom("bot"), ["exact"])),
        { maxKeys: 1 },
      ),
      queryParams: fc.dictionary(
        fc.constantFrom("page", "debug", "id"),
        stringMatchArb(fc.constantFrom("1", "true"), ["exact"]),
        { maxKeys: 2 },
      ),
      ignoreUriCase: fc.boolean(),
      port: portOf(known, host),
      sourceLabels: fc.constantFrom({ app: "alpha" }, { version: "v1" }),
      sourceNamespace: fc.constantFrom(...NAMESPACES),
    },
    { requiredKeys: [] },
  );
}

/**
 * Header operations (checkHeaderOperations): set/add/remove of modifiable
 * headers; `host` (the authority) only in request set/add, and the
 * authority rewritten at most once (checkAuthorityRewrite) — the caller
 * passes `allowHost` false when a rewrite sets the authority.
 */
function headersArb(allowHost: boolean): fc.Arbitrary<Record<string, unknown>> {
  const ops = (withHost: boolean) =>
    fc
      .record(
        {
          set: fc.dictionary(headerName, headerValue, { maxKeys: 2 }),
          add: fc.dictionary(headerName, headerValue, { maxKeys: 2 }),
          remove: fc.uniqueArray(headerName, { maxLength: 2 }),
          host: withHost ? fc.constantFrom("set", "add", "none") : fc.constant("none"),
          hostName: fc.constantFrom("host", "Host", ":authority"),
          // The host rewrite is a literal (host_rewrite_literal), checked as a header value by Istio.
          hostValue: fc.constantFrom("rewritten.example.com", "Rewritten.Example.COM", "beta:8080", "100%%"),
        },
        { requiredKeys: ["set", "add", "remove", "host", "hostName", "hostValue"] },
      )
      .map(({ host, hostName, hostValue, ...rest }) => {
        if (host === "set") rest.set = { ...rest.set, [hostName]: hostValue };
        if (host === "add") rest.add = { ...rest.add, [hostName]: hostValue };
        return rest;
      });
  return fc.record({ request: ops(allowHost), response: ops(false) }, { requiredKeys: [] });
}

/** Durations of at least 1ms in whole milliseconds (checkDuration). */
const durationArb = fc.constantFrom("1s", "10s", "0.25s", "0.001s", "30s", "120s");

/** A fault (checkFault): a fixed delay and/or an HTTP or gRPC abort, each with or without a percentage. */
const faultArb = fc
  .record(
    {
      delay: fc.record(
        { fixedDelay: durationArb, percentage: fc.constantFrom(0, 0.5, 50, 100).map((value) => ({ value })) },
        { requiredKeys: ["fixedDelay"] },
      ),
      abort: fc.record(
        {
          status: fc.oneof(
            fc.constantFrom(400, 503, 599, 200).map((httpStatus) => ({ httpStatus })),
            fc.constantFrom("UNAVAILABLE", "NOT_FOUND", "INTERNAL").map((grpcStatus) => ({ grpcStatus })),
          ),
          percentage: fc.constantFrom(0, 10, 100).map((value) => ({ value })),
        },
        { requiredKeys: ["status"] },
      ),
    },
    { requiredKeys: [] },
  )
  .filter((f) => f.delay !== undefined || f.abort !== undefined)
  .map(({ delay, abort }) => ({
    ...(delay ? { delay } : {}),
    ...(abort
      ? { abort: { ...abort.status, ...(abort.percentage ? { percentage: abort.percentage } : {}) } }
      : {}),
  }));

/** Retries (checkRetries): attempts ≥ 0, and no other setting when attempts is 0; retryOn conditions Envoy knows. */
const retriesArb = fc.oneof(
  fc.constant({ attempts: 0 }),
  fc.record(
    {
      attempts: fc.integer({ min: 1, max: 5 }),
      perTryTimeout: durationArb,
      retryOn: fc
        .uniqueArray(
          fc.constantFrom(
            "5xx",
            "gateway-error",
            "connect-failure",
            "reset",
            "reset-before-request",
            "retriable-4xx",
            "refused-stream",
            "retriable-status-codes",
            "retriable-headers",
            "envoy-ratelimited",
            "http3-post-connect-failure",
            "503",
            "404",
            "429",
            "100",
            "599",
            "unavailable",
            "cancelled",
            "deadline-exceeded",
            "internal",
            "resource-exhausted",
          ),
          { minLength: 1, maxLength: 4 },
        )
        // Istio trims each condition and skips empty ones: "5xx, 503" and "5xx,,503" are valid.
        .chain((list) => fc.constantFrom(",", ", ", ",,").map((sep) => list.join(sep))),
      retryRemoteLocalities: fc.boolean(),
      retryIgnorePreviousHosts: fc.boolean(),
      backoff: fc.constantFrom("0.025s", "1s"),
    },
    { requiredKeys: ["attempts"] },
  ),
);

/** A direct response (status 200..599), with no body, a small one, or one over Envoy's 4 KiB default limit. */
const directResponseArb = fc.record(
  {
    status: fc.constantFrom(200, 204, 404, 418, 503),
    body: fc.oneof(
      fc.constantFrom("ok", '{"error":"denied"}').map((string) => ({ string })),
      fc.integer({ min: 4097, max: 6000 }).map((n) => ({ string: "x".repeat(n) })),
    ),
  },
  { requiredKeys: ["status"] },
);

/** A redirect that changes something (uri, authority, scheme or port), with a 3xx code. */
const redirectArb = fc
  .record(
    {
      uri: fc.constantFrom("/new", "/"),
      authority: fc.constantFrom("example.com", "beta"),
      scheme: fc.constantFrom("https", "http"),
      port: fc.oneof(
        fc.constantFrom(8443, 80).map((port) => ({ port })),
        fc.constantFrom("FROM_PROTOCOL_DEFAULT", "FROM_REQUEST_PORT").map((derivePort) => ({ derivePort })),
      ),
      redirectCode: fc.constantFrom(301, 302, 307, 308),
    },
    { requiredKeys: [] },
  )
  .filter(
    (r) => r.uri !== undefined || r.authority !== undefined || r.scheme !== undefined || r.port !== undefined,
  )
  .map(({ port, ...rest }) => ({ ...rest, ...(port ?? {}) }));

/** A rewrite (rewrite rules): uri or uriRegexRewrite (not both), and/or the authority. */
const rewriteArb = fc
  .record(
    {
      path: fc.oneof(
        fc.constantFrom("/", "/v2/").map((uri) => ({ uri })),
        regexArb.map((match) => ({ uriRegexRewrite: { match, rewrite: "/\\1" } })),
      ),
      authority: fc.constantFrom("rewritten.example.com", "beta"),
    },
    { requiredKeys: [] },
  )
  .filter((r) => r.path !== undefined || r.authority !== undefined)
  .map(({ path, authority }) => ({ ...(path ?? {}), ...(authority ? { authority } : {}) }));

/** Mirrors (mirror XOR mirrors; percentages 0..100). */
function mirrorArb(known: Known): fc.Arbitrary<Record<string, unknown>> {
  return fc.oneof(
    fc.record(
      {
        mirror: destinationArb(known),
        // Istio takes 0 and [0.0001, 100]; Envoy's mirror runtime fraction has a million parts.
        mirrorPercentage: fc
          .constantFrom(0, 0.0001, 0.00015, 25.5, 33.333333, 99.9999, 100)
          .map((value) => ({ value })),
      },
      { requiredKeys: ["mirror"] },
    ),
    fc
      .array(
        fc.record(
          {
            destination: destinationArb(known),
            percentage: fc.constantFrom(0, 0.0001, 10, 50.5, 100).map((value) => ({ value })),
          },
          { requiredKeys: ["destination"] },
        ),
        { minLength: 1, maxLength: 2 },
      )
      .map((mirrors) => ({ mirrors })),
  );
}

/** The names of the delegate VirtualServices a case may define. */
const DELEGATES = ["delegate-a", "delegate-b"];

/**
 * An HTTP route (validateHttpRoute): exactly one of route, redirect,
 * directResponse or delegate (a delegate only outside a delegate VS); fault
 * and rewrite only with route (rewrite also not with redirect or
 * directResponse); header operations, retries, timeout, mirrors, CORS.
 */
function httpRouteArb(
  known: Known,
  host: string,
  inDelegate: boolean,
): fc.Arbitrary<Record<string, unknown>> {
  const action = fc.oneof(
    { weight: 6, arbitrary: weightedArb(known).map((route) => ({ route })) },
    { weight: 1, arbitrary: redirectArb.map((redirect) => ({ redirect })) },
    { weight: 1, arbitrary: directResponseArb.map((directResponse) => ({ directResponse })) },
    ...(inDelegate
      ? []
      : [
          {
            weight: 1,
            arbitrary: fc
              .record(
                { name: fc.constantFrom(...DELEGATES), namespace: fc.constantFrom(...NAMESPACES) },
                { requiredKeys: ["name"] },
              )
              .map((delegate) => ({ delegate })),
          },
        ]),
  );
  return fc
    .record({
      action,
      name: fc.option(fc.constantFrom("primary", "canary"), { nil: undefined }),
      match: fc.array(httpMatchArb(known, host), { maxLength: 2 }),
      fault: fc.option(faultArb, { nil: undefined }),
      rewrite: fc.option(rewriteArb, { nil: undefined }),
      headers: fc.option(fc.boolean(), { nil: undefined }),
      retries: fc.option(retriesArb, { nil: undefined }),
      timeout: fc.option(durationArb, { nil: undefined }),
      mirror: fc.option(mirrorArb(known), { nil: undefined }),
      cors: fc.option(
        fc.record({
          allowOrigins: fc.constant([{ exact: "https://example.com" }, { regex: ".*\\.example\\.com" }]),
          allowMethods: fc.constant(["GET", "POST"]),
          maxAge: fc.constant("24h"),
        }),
        { nil: undefined },
      ),
    })
    .chain((r) => {
      const routed = "route" in r.action;
      const rewrite = routed ? r.rewrite : undefined;
      const withHeaders = r.headers === undefined ? fc.constant(undefined) : headersArb(!rewrite?.authority);
      return withHeaders.map((headers) => ({
        ...(r.name ? { name: r.name } : {}),
        ...(r.match.length > 0 ? { match: r.match } : {}),
        ...r.action,
        ...(routed && r.fault ? { fault: r.fault } : {}),
        ...(rewrite ? { rewrite } : {}),
        ...(headers ? { headers } : {}),
        ...(r.retries ? { retries: r.retries } : {}),
        ...(r.timeout ? { timeout: r.timeout } : {}),
        ...(routed && r.mirror ? r.mirror : {}),
        ...(r.cors ? { corsPolicy: r.cors } : {}),
      }));
    });
}

/** A TCP route: L4 matches (port, subnets, source labels) and weighted destinations. */
function tcpRouteArb(known: Known, host: string): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .record({
      match: fc.array(
        fc.record(
          {
            port: portOf(known, host),
            destinationSubnets: fc.constantFrom(["10.0.0.0/8"], ["192.168.0.1"]),
            sourceLabels: fc.constant({ app: "alpha" }),
          },
          { requiredKeys: [] },
        ),
        { maxLength: 2 },
      ),
      route: weightedArb(known),
    })
    .map(({ match, route }) => ({ ...(match.length > 0 ? { match } : {}), route }));
}

/**
 * A TLS route (checkTlsMatch): each match names SNI hosts among the
 * VirtualService's hosts (duplicates allowed, as Istio does not reject
 * them), optionally a port.
 */
function tlsRouteArb(known: Known, hosts: string[]): fc.Arbitrary<Record<string, unknown>> {
  const host = hosts[0]!;
  return fc.record({
    match: fc.array(
      fc.record(
        {
          sniHosts: fc.array(fc.constantFrom(...hosts.filter((h) => h !== "*")), {
            minLength: 1,
            maxLength: 3,
          }),
          port: portOf(known, host),
        },
        { requiredKeys: ["sniHosts"] },
      ),
      { minLength: 1, maxLength: 2 },
    ),
    route: weightedArb(known, 2),
  });
}

/**
 * A VirtualService (validateVirtualService): hosts valid and never "*" for
 * the mesh, at least one of http/tcp/tls, gateways "mesh" or absent (or a
 * gateway beside mesh).
 */
function virtualServiceArb(known: Known): fc.Arbitrary<Resource> {
  return fc
    .record({
      namespace: fc.constantFrom(...NAMESPACES),
      // Istio refuses overlapping hosts in one VirtualService (`*.example.com` with `*.wild.example.com`).
      hosts: fc.uniqueArray(hostArb(known), { minLength: 1, maxLength: 2, comparator: hostsOverlap }),
      gateways: fc.constantFrom([], ["mesh"], ["mesh", "istio-system/edge"], ["istio-system/edge"]),
      exportTo: fc.constantFrom(undefined, ["*"], ["."]),
    })
    .chain(({ namespace, hosts, gateways, exportTo }) =>
      fc
        .record({
          http: fc.array(httpRouteArb(known, hosts[0]!, false), { maxLength: 3 }),
          tcp: fc.array(tcpRouteArb(known, hosts[0]!), { maxLength: 2 }),
          tls: hosts.some((h) => h !== "*")
            ? fc.array(tlsRouteArb(known, hosts), { maxLength: 2 })
            : fc.constant([]),
        })
        .filter(({ http, tcp, tls }) => http.length + tcp.length + tls.length > 0)
        .map(({ http, tcp, tls }) => ({
          apiVersion: "networking.istio.io/v1",
          kind: "VirtualService",
          metadata: { name: "vs", namespace },
          spec: {
            hosts,
            ...(gateways.length > 0 ? { gateways } : {}),
            ...(exportTo ? { exportTo } : {}),
            ...(http.length > 0
              ? {
                  http:
                    gateways.length === 0 || (gateways as readonly string[]).includes("mesh")
                      ? http.map(withoutClaimRouting)
                      : http,
                }
              : {}),
            ...(tcp.length > 0 ? { tcp } : {}),
            ...(tls.length > 0 ? { tls } : {}),
          },
        })),
    );
}

/** A delegate VirtualService: no hosts, no gateways, HTTP routes that do not delegate again. */
function delegateArb(known: Known): fc.Arbitrary<Resource> {
  return fc
    .record({
      name: fc.constantFrom(...DELEGATES),
      namespace: fc.constantFrom(...NAMESPACES),
      http: fc.array(httpRouteArb(known, known.services[0]!.hostname, true), { minLength: 1, maxLength: 2 }),
    })
    .map(({ name, namespace, http }) => ({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name, namespace },
      // A delegate has no gateways, so it applies to the mesh: no JWT claim routing.
      spec: { http: http.map(withoutClaimRouting) },
    }));
}

/**
 * The route without JWT claim header matches, which Istio allows only on a
 * VirtualService bound to gateways (not `mesh`).
 */
function withoutClaimRouting(route: Record<string, unknown>): Record<string, unknown> {
  const matches = route.match as Array<Record<string, unknown>> | undefined;
  if (!matches) return route;
  const strip = (headers: unknown) =>
    headers && typeof headers === "object"
      ? Object.fromEntries(
          Object.entries(headers).filter(([name]) => !name.startsWith("@request.auth.claims")),
        )
      : headers;
  return {
    ...route,
    match: matches.map((m) => ({
      ...m,
      ...(m.headers ? { headers: strip(m.headers) } : {}),
      ...(m.withoutHeaders ? { withoutHeaders: strip(m.withoutHeaders) } : {}),
    })),
  };
}

/** The TLS settings of a DestinationRule (checkClientTls): SIMPLE/MUTUAL with a credentialName or MUTUAL with files. */
const clientTlsArb = fc.oneof(
  fc.constant({ mode: "DISABLE" }),
  fc.constant({ mode: "ISTIO_MUTUAL" }),
  fc.record({ mode: fc.constant("ISTIO_MUTUAL"), sni: fc.constant("alpha.example.com") }),
  fc.record(
    {
      mode: fc.constant("SIMPLE"),
      sni: fc.constantFrom("api.example.com", "x.test"),
      subjectAltNames: fc.constant(["api.example.com"]),
    },
    { requiredKeys: ["mode"] },
  ),
  fc.record({ mode: fc.constantFrom("SIMPLE", "MUTUAL"), credentialName: fc.constant("client-cert") }),
  fc.constant({
    mode: "MUTUAL",
    clientCertificate: "/etc/certs/cert.pem",
    privateKey: "/etc/certs/key.pem",
    caCertificates: "/etc/certs/ca.pem",
  }),
);

/** Load balancing (checkLoadBalancer): simple or consistent hash with a key; maglev table sizes prime; locality weights adding to 100. */
const loadBalancerArb = fc.oneof(
  fc.constantFrom("LEAST_REQUEST", "ROUND_ROBIN", "RANDOM", "PASSTHROUGH").map((simple) => ({ simple })),
  fc
    .record({
      key: fc.oneof(
        fc.constant({ httpHeaderName: "x-user" }),
        fc.constant({ useSourceIp: true }),
        fc.constant({ httpQueryParameterName: "id" }),
        fc.constant({ httpCookie: { name: "session", ttl: "10s" } }),
      ),
      algorithm: fc.constantFrom(
        {},
        { ringHash: { minimumRingSize: 1024 } },
        { maglev: { tableSize: 65537 } },
      ),
    })
    .map(({ key, algorithm }) => ({ consistentHash: { ...key, ...algorithm } })),
  fc.constant({
    simple: "ROUND_ROBIN",
    localityLbSetting: {
      enabled: true,
      distribute: [{ from: "us-east1/*", to: { "us-east1/*": 80, "us-west1/*": 20 } }],
    },
  }),
  fc.constant({ localityLbSetting: { enabled: true, failover: [{ from: "us-east1", to: "us-west1" }] } }),
);

/** A connection pool (checkConnectionPool): tcp and/or http, non-negative numbers, valid durations. */
const connectionPoolArb = fc
  .record(
    {
      tcp: fc.record(
        { maxConnections: fc.integer({ min: 1, max: 1000 }), connectTimeout: durationArb },
        { requiredKeys: [] },
      ),
      http: fc.record(
        {
          http1MaxPendingRequests: fc.integer({ min: 1, max: 1000 }),
          http2MaxRequests: fc.integer({ min: 1, max: 1000 }),
          maxRequestsPerConnection: fc.integer({ min: 1, max: 10 }),
          maxRetries: fc.integer({ min: 0, max: 10 }),
          idleTimeout: durationArb,
          h2UpgradePolicy: fc.constantFrom("DEFAULT", "DO_NOT_UPGRADE", "UPGRADE"),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: [] },
  )
  .filter((p) => p.tcp !== undefined || p.http !== undefined);

/** Outlier detection (checkOutlierDetection): percentages in 0..100, durations ≥ 1ms. */
const outlierArb = fc.record(
  {
    consecutive5xxErrors: fc.integer({ min: 0, max: 10 }),
    consecutiveGatewayErrors: fc.integer({ min: 0, max: 10 }),
    interval: durationArb,
    baseEjectionTime: durationArb,
    maxEjectionPercent: fc.integer({ min: 0, max: 100 }),
    minHealthPercent: fc.integer({ min: 0, max: 100 }),
  },
  { requiredKeys: [] },
);

/** A traffic policy (checkTrafficPolicy): at least one field; port-level settings on distinct ports, each setting something. */
function trafficPolicyArb(
  known: Known,
  host: string,
  portLevel: boolean,
): fc.Arbitrary<Record<string, unknown>> {
  const settings = fc.record(
    {
      loadBalancer: loadBalancerArb,
      connectionPool: connectionPoolArb,
      outlierDetection: outlierArb,
      tls: clientTlsArb,
    },
    { requiredKeys: [] },
  );
  const portLevelSettings = fc.uniqueArray(
    fc.record({
      port: portOf(known, host),
      settings: settings.filter((s) => Object.keys(s).length > 0),
    }),
    { maxLength: portLevel ? 2 : 0, selector: (p) => p.port },
  );
  return fc
    .record({ settings, portLevelSettings })
    .map(({ settings, portLevelSettings }) => ({
      ...settings,
      ...(portLevelSettings.length > 0
        ? { portLevelSettings: portLevelSettings.map((p) => ({ port: { number: p.port }, ...p.settings })) }
        : {}),
    }))
    .filter((tp) => Object.keys(tp).length > 0);
}

/** A DestinationRule (validateDestinationRule): a valid host, distinct DNS-label subsets, traffic policies. */
function destinationRuleArb(known: Known): fc.Arbitrary<Resource> {
  return fc
    .record({ namespace: fc.constantFrom(...NAMESPACES), host: hostArb(known) })
    .chain(({ namespace, host }) =>
      fc
        .record(
          {
            trafficPolicy: trafficPolicyArb(known, host, true),
            subsets: fc.uniqueArray(
              fc.record(
                {
                  name: fc.constantFrom("v1", "v2", "v3"),
                  trafficPolicy: trafficPolicyArb(known, host, false),
                },
                { requiredKeys: ["name"] },
              ),
              { maxLength: 3, selector: (s) => s.name },
            ),
            exportTo: fc.constantFrom(["*"], ["."]),
          },
          { requiredKeys: ["subsets"] },
        )
        .map(({ subsets, ...rest }) => ({
          apiVersion: "networking.istio.io/v1",
          kind: "DestinationRule",
          metadata: { name: "dr", namespace },
          spec: {
            host,
            ...rest,
            ...(subsets.length > 0
              ? { subsets: subsets.map((s) => ({ ...s, labels: { version: s.name } })) }
              : {}),
          },
        })),
    );
}

/** Selectors of workloads: an app of the registry or a version. */
function selectorArb(known: Known): fc.Arbitrary<Record<string, string>> {
  return fc.oneof(
    fc.constantFrom(...known.services.map((s) => ({ app: s.name }))),
    fc.constantFrom({ version: "v1" }, { version: "v2" }),
  );
}

/** A PeerAuthentication (validatePeerAuthentication): portLevelMtls only with a selector, ports in range. */
function peerAuthenticationArb(known: Known): fc.Arbitrary<Resource> {
  const mode = fc.constantFrom("UNSET", "DISABLE", "PERMISSIVE", "STRICT");
  return fc
    .record(
      {
        namespace: fc.constantFrom(ROOT_NAMESPACE, ...NAMESPACES),
        selector: selectorArb(known),
        mode,
        ports: fc.dictionary(
          fc.constantFrom(
            ...known.services.flatMap((s) => s.ports.map((p) => String(p.targetPort || p.number))),
          ),
          mode.map((m) => ({ mode: m })),
          { maxKeys: 2 },
        ),
      },
      { requiredKeys: ["namespace", "mode", "ports"] },
    )
    .map(({ namespace, selector, mode, ports }) => ({
      apiVersion: "security.istio.io/v1",
      kind: "PeerAuthentication",
      metadata: { name: "pa", namespace },
      spec: {
        ...(selector ? { selector: { matchLabels: selector } } : {}),
        mtls: { mode },
        ...(selector && Object.keys(ports).length > 0 ? { portLevelMtls: ports } : {}),
      },
    }));
}

/**
 * A Sidecar (validateSidecar): egress listeners each with hosts
 * `namespace/host` (".", "*", "~" or a namespace; "*" or a valid host), at
 * most one without a port and then last, distinct ports; ingress listeners
 * on distinct ports whose defaultEndpoint is `127.0.0.1|0.0.0.0|[::1]:PORT`
 * or `unix://`; an outboundTrafficPolicy, egressProxy only with ALLOW_ANY.
 */
function sidecarArb(known: Known): fc.Arbitrary<Resource> {
  const egressHost = fc.oneof(
    fc.constantFrom(
      "./*",
      "*/*",
      "~/*",
      `${ROOT_NAMESPACE}/*`,
      "ns1/*",
      "*/api.example.com",
      "*/*.example.com",
    ),
    fc.constantFrom(...known.services).map((s) => `${s.namespace}/${s.hostname}`),
  );
  const portKind = fc.constantFrom(...PORT_KINDS.filter((k) => k.prefix !== "" && k.prefix !== "web"));
  return fc
    .record(
      {
        namespace: fc.constantFrom(ROOT_NAMESPACE, ...NAMESPACES),
        selector: selectorArb(known),
        ported: fc.uniqueArray(
          fc.record({
            number: portNumber,
            kind: portKind,
            hosts: fc.uniqueArray(egressHost, { minLength: 1, maxLength: 3 }),
          }),
          {
            maxLength: 2,
            selector: (e) => e.number,
          },
        ),
        catchAll: fc.option(fc.uniqueArray(egressHost, { minLength: 1, maxLength: 3 }), { nil: undefined }),
        ingress: fc.uniqueArray(
          fc.record({
            number: portNumber,
            kind: portKind,
            endpoint: fc.constantFrom(
              "127.0.0.1:8080",
              "0.0.0.0:9080",
              "[::1]:8080",
              "unix:///var/run/app.sock",
            ),
          }),
          { maxLength: 2, selector: (i) => i.number },
        ),
        outbound: fc.oneof(
          fc.constantFrom({ mode: "REGISTRY_ONLY" }, { mode: "ALLOW_ANY" }),
          fc.constantFrom(...known.services.filter((s) => s.ports.length > 0)).map((s) => ({
            mode: "ALLOW_ANY",
            egressProxy: { host: s.hostname, port: { number: s.ports[0]!.number } },
          })),
        ),
      },
      { requiredKeys: ["namespace", "ported", "catchAll", "ingress"] },
    )
    .map(({ namespace, selector, ported, catchAll, ingress, outbound }) => {
      const egress = [
        ...ported.map((e) => ({
          port: {
            number: e.number,
            protocol: e.kind.prefix.toUpperCase(),
            name: `${e.kind.prefix}-${e.number}`,
          },
          hosts: e.hosts,
        })),
        ...(catchAll ? [{ hosts: catchAll }] : []),
      ];
      return {
        apiVersion: "networking.istio.io/v1",
        kind: "Sidecar",
        metadata: { name: "sidecar", namespace },
        spec: {
          ...(selector ? { workloadSelector: { labels: selector } } : {}),
          ...(egress.length > 0 ? { egress } : {}),
          ...(ingress.length > 0
            ? {
                ingress: ingress.map((i) => ({
                  port: {
                    number: i.number,
                    protocol: i.kind.prefix.toUpperCase(),
                    name: `${i.kind.prefix}-${i.number}`,
                  },
                  defaultEndpoint: i.endpoint,
                })),
              }
            : {}),
          ...(outbound || egress.length === 0
            ? { outboundTrafficPolicy: outbound ?? { mode: "REGISTRY_ONLY" } }
            : {}),
        },
      };
    });
}

/**
 * A rule an external (CUSTOM) authorizer can be given: no identity fields
 * (principals, namespaces, request principals) and no `when` on the source's
 * identity or the request's JWT.
 */
function customRule(rule: {
  from?: ReadonlyArray<{ source: Readonly<Record<string, unknown>> }>;
  when?: ReadonlyArray<{ key: string }>;
  to?: readonly unknown[];
}): Record<string, unknown> {
  const identity = new Set(["principals", "namespaces", "notNamespaces", "requestPrincipals"]);
  const from = (rule.from ?? [])
    .map(({ source }) => ({
      source: Object.fromEntries(Object.entries(source).filter(([k]) => !identity.has(k))),
    }))
    .filter(({ source }) => Object.keys(source).length > 0);
  const when = (rule.when ?? []).filter(
    (c) => c.key !== "source.namespace" && !c.key.startsWith("request.auth."),
  );
  return {
    ...(rule.to ? { to: rule.to } : {}),
    ...(from.length > 0 ? { from } : {}),
    ...(when.length > 0 ? { when } : {}),
  };
}

/**
 * An AuthorizationPolicy (validateAuthorizationPolicy): ALLOW, DENY, AUDIT or
 * CUSTOM (which alone has a provider); sources and operations set at least
 * one non-empty field; `when` keys Istio knows with values of their form
 * (IPs/CIDRs, port numbers); optionally in dry-run (istio.io/dry-run).
 */
function authorizationPolicyArb(known: Known): fc.Arbitrary<Resource> {
  const source = fc
    .record(
      {
        principals: fc.constantFrom(["cluster.local/ns/default/sa/alpha"], ["*"]),
        namespaces: fc.constantFrom(["default"], ["ns1", "ns2"]),
        notNamespaces: fc.constantFrom(["ns2"]),
        ipBlocks: fc.constantFrom(["10.0.0.0/8"], ["192.168.1.1"]),
        requestPrincipals: fc.constantFrom(["*"], ["issuer/subject"]),
      },
      { requiredKeys: [] },
    )
    .filter((s) => Object.keys(s).length > 0);
  const operation = fc
    .record(
      {
        hosts: fc.constantFrom(["alpha.default.svc.cluster.local"], ["*.example.com"]),
        methods: fc.constantFrom(["GET"], ["GET", "POST"]),
        paths: fc.constantFrom(["/api/*"], ["/admin", "*/info"]),
        notPaths: fc.constantFrom(["/healthz"]),
        ports: fc.constantFrom(
          ...known.services.flatMap((s) => s.ports.map((p) => [String(p.targetPort || p.number)])),
        ),
      },
      { requiredKeys: [] },
    )
    .filter((o) => Object.keys(o).length > 0);
  const condition = fc.oneof(
    fc.constant({ key: "request.headers[x-user]", values: ["admin"] }),
    fc.constant({ key: "source.ip", values: ["10.244.0.0/16"] }),
    fc.constant({ key: "destination.port", values: ["9080"] }),
    fc.constant({ key: "source.namespace", notValues: ["ns2"] }),
    fc.constant({ key: "request.auth.claims[groups]", values: ["admins"] }),
  );
  const rule = fc.record(
    {
      from: fc.array(
        source.map((s) => ({ source: s })),
        { minLength: 1, maxLength: 2 },
      ),
      to: fc.array(
        operation.map((o) => ({ operation: o })),
        { minLength: 1, maxLength: 2 },
      ),
      when: fc.array(condition, { minLength: 1, maxLength: 2 }),
    },
    { requiredKeys: [] },
  );
  return fc
    .record(
      {
        namespace: fc.constantFrom(ROOT_NAMESPACE, ...NAMESPACES),
        selector: selectorArb(known),
        action: fc.constantFrom("ALLOW", "DENY", "AUDIT", "CUSTOM"),
        rules: fc.array(rule, { maxLength: 2 }),
        dryRun: fc.boolean(),
      },
      { requiredKeys: ["namespace", "action", "rules", "dryRun"] },
    )
    .map(({ namespace, selector, action, rules, dryRun }) => ({
      apiVersion: "security.istio.io/v1",
      kind: "AuthorizationPolicy",
      metadata: {
        name: "authz",
        namespace,
        ...(dryRun ? { annotations: { "istio.io/dry-run": "true" } } : {}),
      },
      spec: {
        ...(selector ? { selector: { matchLabels: selector } } : {}),
        ...(action !== "ALLOW" ? { action } : {}),
        ...(action === "CUSTOM" ? { provider: { name: "ext-authz" } } : {}),
        // DENY and CUSTOM without rules are refused (they would never trigger): an empty rule matches all.
        ...(rules.length > 0
          ? { rules: action === "CUSTOM" ? rules.map(customRule) : rules }
          : action === "DENY" || action === "CUSTOM"
            ? { rules: [{}] }
            : {}),
      },
    }));
}

/** The hosts of a Gateway server: namespaced or not, wildcards, a registry host. */
function gatewayHostsArb(known: Known): fc.Arbitrary<string[]> {
  const host = fc.oneof(
    fc.constantFrom(
      "*",
      "*.example.com",
      "a.example.com",
      "b.example.com",
      "default/*",
      "./a.example.com",
      "*/b.example.com",
      "ns1/*.example.com",
    ),
    fc.constantFrom(...known.services.map((service) => service.hostname)),
  );
  return fc.uniqueArray(host, { minLength: 1, maxLength: 2 });
}

/**
 * A Gateway server (validateGateway): HTTP (perhaps redirecting to HTTPS),
 * HTTPS or TLS with a TLS mode (a credential where SIMPLE/MUTUAL need one),
 * or TCP; ports few, so that servers meet on one port.
 */
function serverArb(known: Known): fc.Arbitrary<Record<string, unknown>> {
  const number = fc.constantFrom(80, 443, 8080, 8443, 9080, 15443);
  const tls = fc
    .record({
      mode: fc.constantFrom(
        "SIMPLE",
        "MUTUAL",
        "OPTIONAL_MUTUAL",
        "ISTIO_MUTUAL",
        "PASSTHROUGH",
        "AUTO_PASSTHROUGH",
      ),
      minProtocolVersion: fc.constantFrom(undefined, "TLSV1_2"),
      subjectAltNames: fc.constantFrom(undefined, ["client.example.com"]),
    })
    .map(({ mode, minProtocolVersion, subjectAltNames }) => ({
      mode,
      ...(["SIMPLE", "MUTUAL", "OPTIONAL_MUTUAL"].includes(mode)
        ? { credentialName: "edge-credential" }
        : {}),
      ...(minProtocolVersion ? { minProtocolVersion } : {}),
      ...(subjectAltNames ? { subjectAltNames } : {}),
    }));
  return fc
    .oneof(
      fc.record({
        port: number.map((n) => ({ number: n, name: `http-${n}`, protocol: "HTTP" })),
        hosts: gatewayHostsArb(known),
        tls: fc.constantFrom(undefined, { httpsRedirect: true }),
      }),
      fc.record({
        port: fc
          .tuple(number, fc.constantFrom("HTTPS", "TLS"), fc.constantFrom("a", "b"))
          .map(([n, protocol, suffix]) => ({
            number: n,
            name: `${protocol.toLowerCase()}-${suffix}`,
            protocol,
          })),
        hosts: gatewayHostsArb(known),
        tls,
      }),
      fc.record({
        port: number.map((n) => ({ number: n, name: `tcp-${n}`, protocol: "TCP" })),
        hosts: gatewayHostsArb(known),
      }),
    )
    .map((server) => Object.fromEntries(Object.entries(server).filter(([, v]) => v !== undefined)));
}

/**
 * A Gateway: `istio-system/edge` (which VirtualServices bind to) or another
 * of a namespace, selecting the pods of one service, every pod (no
 * selector), or none of the registry's.
 */
function gatewayArb(known: Known): fc.Arbitrary<Resource> {
  return fc
    .record({
      where: fc.constantFrom(
        { namespace: ROOT_NAMESPACE, name: "edge" },
        { namespace: ROOT_NAMESPACE, name: "edge" },
        { namespace: "default", name: "other" },
      ),
      selector: fc.oneof(
        fc.constantFrom(...known.services.map((s) => ({ app: s.name }))),
        fc.constantFrom(undefined, { istio: "nothing" }),
      ),
      // Port names are unique across a Gateway's servers (Istio's rule).
      servers: fc.uniqueArray(serverArb(known), {
        minLength: 1,
        maxLength: 3,
        selector: (server) => (server.port as { name: string }).name,
      }),
    })
    .map(({ where, selector, servers }) => ({
      apiVersion: "networking.istio.io/v1",
      kind: "Gateway",
      metadata: where,
      spec: { ...(selector ? { selector } : {}), servers },
    }));
}

/** Config over a registry: VirtualServices (and the delegates they may name), DestinationRules, policies, Sidecars. */
export function configArb(registry: Registry): fc.Arbitrary<Resource[]> {
  const known: Known = { services: registry.services };
  return fc
    .record({
      virtualServices: fc.array(virtualServiceArb(known), { maxLength: 3 }),
      delegates: fc.uniqueArray(delegateArb(known), {
        maxLength: 2,
        selector: (d) => `${d.metadata.namespace}/${d.metadata.name}`,
      }),
      destinationRules: fc.array(destinationRuleArb(known), { maxLength: 2 }),
      peerAuthentications: fc.array(peerAuthenticationArb(known), { maxLength: 2 }),
      sidecars: fc.array(sidecarArb(known), { maxLength: 1 }),
      authorizationPolicies: fc.array(authorizationPolicyArb(known), { maxLength: 2 }),
      gateways: fc.array(gatewayArb(known), { maxLength: 2 }),
    })
    .map((parts) => uniqueNames(Object.values(parts).flat()));
}

/** Gives each resource a name unique within its kind and namespace (metadata.name must be), keeping delegates' names. */
function uniqueNames(resources: Resource[]): Resource[] {
  const seen = new Set<string>();
  return resources.map((resource) => {
    let name = resource.metadata.name;
    for (let i = 2; seen.has(`${resource.kind}/${resource.metadata.namespace}/${name}`); i++)
      name = `${resource.metadata.name}-${i}`;
    seen.add(`${resource.kind}/${resource.metadata.namespace}/${name}`);
    return { ...resource, metadata: { ...resource.metadata, name } };
  });
}

/** A whole case: a registry, config over it, one of its pods as the proxy, and the proxy's kind. */
export const scenarioArb: fc.Arbitrary<Scenario> = registryArb.chain((registry) =>
  fc.record({
    registry: fc.constant(registry),
    config: configArb(registry),
    proxy: fc.nat({ max: registry.workloads.length - 1 }),
    kind: fc.constantFrom("sidecar" as const, "grpc" as const, "router" as const),
  }),
);
