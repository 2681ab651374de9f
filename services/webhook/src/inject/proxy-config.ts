import { parse } from "yaml";

/** A ProxyConfig (istio.mesh.v1alpha1.ProxyConfig) as protobuf JSON, field names in camelCase. */
export type ProxyConfigJson = Record<string, unknown>;

type FieldKind =
  | "string"
  | "duration"
  | "port"
  | "count"
  | "bool"
  | "object"
  | "stringMap"
  | "stringList"
  | readonly string[];

/**
 * ProxyConfig's fields (Istio's mesh/v1alpha1/proxy.proto) and the JSON
 * shape each takes. Objects (tracing, readinessProbe…) are passed on whole;
 * the agent reads them.
 */
const FIELDS: Readonly<Record<string, FieldKind>> = {
  configPath: "string",
  binaryPath: "string",
  serviceCluster: "string",
  tracingServiceName: ["APP_LABEL_AND_NAMESPACE", "CANONICAL_NAME_ONLY", "CANONICAL_NAME_AND_NAMESPACE"],
  drainDuration: "duration",
  parentShutdownDuration: "duration",
  discoveryAddress: "string",
  discoveryRefreshDelay: "duration",
  zipkinAddress: "string",
  statsdUdpAddress: "string",
  envoyMetricsServiceAddress: "string",
  proxyAdminPort: "port",
  availabilityZone: "string",
  controlPlaneAuthPolicy: ["NONE", "MUTUAL_TLS", "INHERIT"],
  customConfigFile: "string",
  statNameLength: "count",
  concurrency: "count",
  proxyBootstrapTemplatePath: "string",
  interceptionMode: ["REDIRECT", "TPROXY", "NONE"],
  tracing: "object",
  sds: "object",
  envoyAccessLogService: "object",
  envoyMetricsService: "object",
  proxyMetadata: "stringMap",
  runtimeValues: "stringMap",
  statusPort: "port",
  extraStatTags: "stringList",
  gatewayTopology: "object",
  terminationDrainDuration: "duration",
  meshId: "string",
  readinessProbe: "object",
  proxyStatsMatcher: "object",
  holdApplicationUntilProxyStarts: "bool",
  caCertificatesPem: "stringList",
  image: "object",
  privateKeyProvider: "object",
};

/** Protobuf JSON's duration: seconds with up to nine decimals and an `s`. */
const DURATION = /^-?\d+(\.\d{1,9})?s$/;

/**
 * The mesh-wide ProxyConfig defaults the injected pod starts from (Istio:
 * meshConfig.defaultConfig over mesh.DefaultProxyConfig), in the fields the
 * agent uses.
 */
export function defaultProxyConfig(discoveryAddress: string): ProxyConfigJson {
  return {
    discoveryAddress,
    drainDuration: "45s",
    terminationDrainDuration: "5s",
    proxyAdminPort: 15000,
    statusPort: 15020,
  };
}

/**
 * Reads a proxy.istio.io/config value (YAML or JSON, protobuf field names in
 * camelCase or snake_case) into camelCase JSON, or the problems that make
 * Istio refuse it: not a mapping, an unknown field, a value of the wrong shape.
 */
export function parseProxyConfig(text: string): { config: ProxyConfigJson } | { problems: string[] } {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    return { problems: [`not YAML: ${(error as Error).message.split("\n")[0]}`] };
  }
  if (doc === null || doc === undefined) return { config: {} };
  if (typeof doc !== "object" || Array.isArray(doc))
    return { problems: ["not a mapping of ProxyConfig fields"] };
  const config: ProxyConfigJson = {};
  const problems: string[] = [];
  for (const [key, value] of Object.entries(doc)) {
    const name = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const kind = FIELDS[name];
    if (kind === undefined) {
      problems.push(`unknown field ${key}`);
      continue;
    }
    const problem = checkField(value, kind);
    if (problem) problems.push(`${key}: ${problem}`);
    else config[name] = value;
  }
  return problems.length > 0 ? { problems } : { config };
}

function checkField(value: unknown, kind: FieldKind): string | undefined {
  const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
  if (Array.isArray(kind))
    return kind.includes(value as string) ? undefined : `must be one of ${kind.join(", ")}`;
  switch (kind) {
    case "string":
      return typeof value === "string" ? undefined : "must be a string";
    case "duration":
      return typeof value === "string" && DURATION.test(value) ? undefined : "must be a duration such as 5s";
    case "port":
      return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535
        ? undefined
        : "must be a port from 1 to 65535";
    case "count":
      return Number.isInteger(value) && (value as number) >= 0 ? undefined : "must be a whole number";
    case "bool":
      return typeof value === "boolean" ? undefined : "must be true or false";
    case "object":
      return isObject ? undefined : "must be a mapping";
    case "stringMap":
      return isObject && Object.values(value).every((v) => typeof v === "string")
        ? undefined
        : "must be a mapping of strings";
    case "stringList":
      return Array.isArray(value) && value.every((v) => typeof v === "string")
        ? undefined
        : "must be a list of strings";
  }
  return undefined;
}
