import { StatusCode } from "@sextant/proto/gen/envoy/type/v3/http_status";
import { type DurationValue, parseDuration } from "@sextant/validation";
import { parse as parseYaml } from "yaml";
import { parseTelemetryMeshConfig, type TelemetryMeshConfig } from "./telemetry-providers.js";

/**
 * The part of Istio's MeshConfig push uses: the `extensionProviders` that
 * CUSTOM AuthorizationPolicies name (`envoyExtAuthzHttp`,
 * `envoyExtAuthzGrpc`). Istio keeps MeshConfig in the ConfigMap `istio`
 * (key `mesh`); push reads the same YAML from the file MESH_CONFIG_FILE.
 */
export interface MeshConfig {
  readonly extensionProviders: readonly ExtensionProvider[];
  /** Access log, tracing and telemetry provider settings; absent: Istio's defaults (./telemetry-providers.ts). */
  readonly telemetry?: TelemetryMeshConfig;
}

/** No MeshConfig: no extension providers, so every CUSTOM policy denies what it matches. */
export const EMPTY_MESH_CONFIG: MeshConfig = { extensionProviders: [] };

/**
 * One ext_authz provider as written, checked as Istio's MeshConfig
 * validation and authz builder check it. A provider with `errors` is kept:
 * a CUSTOM policy naming it must deny, not fall through to "not found".
 */
export interface ExtensionProvider {
  readonly name: string;
  readonly kind: "http" | "grpc";
  /** `<host>` or `<namespace>/<host>`, resolved against the registry when the filter is built. */
  readonly service: string;
  readonly port: number;
  /** Istio's default: 600 s. */
  readonly timeout: DurationValue;
  readonly failOpen: boolean;
  /** The HTTP status the filter answers when the server cannot be reached; undefined: Envoy's 403. */
  readonly statusOnError: number | undefined;
  /** HTTP only. */
  readonly pathPrefix: string;
  /** HTTP only; `includeHeadersInCheck` (deprecated) when this is empty. */
  readonly includeRequestHeadersInCheck: readonly string[];
  readonly includeAdditionalHeadersInCheck: Readonly<Record<string, string>>;
  readonly headersToUpstreamOnAllow: readonly string[];
  readonly headersToDownstreamOnDeny: readonly string[];
  readonly headersToDownstreamOnAllow: readonly string[];
  readonly includeRequestBodyInCheck:
    | { maxRequestBytes: number; allowPartialMessage: boolean; packAsBytes: boolean }
    | undefined;
  /** Why the provider cannot be used; empty if it can. */
  readonly errors: readonly string[];
}

const DEFAULT_TIMEOUT: DurationValue = { seconds: 600, nanos: 0 };

/**
 * Parses MeshConfig YAML (the `mesh` key of Istio's ConfigMap `istio`).
 * Fields push does not use are ignored; providers of other kinds (tracing,
 * logging) are left out, as Istio's authz builder leaves them out, so a
 * CUSTOM policy naming one finds no provider. Text that is not a YAML
 * mapping throws.
 */
export function parseMeshConfig(text: string): MeshConfig {
  const document: unknown = parseYaml(text) ?? {};
  if (!isRecord(document)) throw new Error("MeshConfig must be a YAML mapping");
  const providers = document.extensionProviders ?? [];
  if (!Array.isArray(providers)) throw new Error("MeshConfig extensionProviders must be a list");
  const extensionProviders: ExtensionProvider[] = [];
  const seen = new Set<string>();
  providers.forEach((entry: unknown, index) => {
    if (!isRecord(entry)) return;
    const http = entry.envoyExtAuthzHttp;
    const grpc = entry.envoyExtAuthzGrpc;
    const body = isRecord(http) ? http : isRecord(grpc) ? grpc : undefined;
    if (!body) return;
    const name = typeof entry.name === "string" ? entry.name : "";
    const errors: string[] = [];
    if (name === "") errors.push(`extension provider name must not be empty (index ${index})`);
    else if (seen.has(name)) errors.push(`extension provider name must be unique, found duplicate: ${name}`);
    // The name becomes part of RBAC policy names and of the metadata ext_authz matches on.
    else if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name))
      errors.push(
        `invalid provider name ${JSON.stringify(name)}: a DNS-1123 label (lowercase letters, digits, "-")`,
      );
    seen.add(name);
    extensionProviders.push(parseExtAuthz(name, body === http ? "http" : "grpc", body, errors));
  });
  const telemetryKeys = [
    "accessLogFile",
    "accessLogEncoding",
    "accessLogFormat",
    "disableEnvoyListenerLog",
    "defaultProviders",
    "defaultConfig",
  ];
  const hasTelemetry =
    telemetryKeys.some((key) => document[key] !== undefined) ||
    providers.some(
      (entry) => isRecord(entry) && !isRecord(entry.envoyExtAuthzHttp) && !isRecord(entry.envoyExtAuthzGrpc),
    );
  return hasTelemetry
    ? { extensionProviders, telemetry: parseTelemetryMeshConfig(document) }
    : { extensionProviders };
}

function parseExtAuthz(
  name: string,
  kind: "http" | "grpc",
  body: Record<string, unknown>,
  errors: string[],
): ExtensionProvider {
  const service = typeof body.service === "string" ? body.service : "";
  if (service === "") errors.push("service must not be empty");
  const port = Number(body.port ?? 0);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    errors.push(`port must be in the range [1, 65535], found: ${String(body.port)}`);
  let timeout = DEFAULT_TIMEOUT;
  if (body.timeout !== undefined) {
    const parsed = typeof body.timeout === "string" ? parseDuration(body.timeout) : undefined;
    if (parsed && parsed.seconds >= 0 && parsed.nanos >= 0) timeout = parsed;
    else errors.push(`invalid timeout ${JSON.stringify(body.timeout)}`);
  }
  let statusOnError: number | undefined;
  if (body.statusOnError !== undefined && body.statusOnError !== "") {
    const code = Number(body.statusOnError);
    if (Number.isInteger(code) && code !== 0 && StatusCode[code] !== undefined) statusOnError = code;
    else errors.push(`unsupported statusOnError ${String(body.statusOnError)}`);
  }
  const pathPrefix = kind === "http" && typeof body.pathPrefix === "string" ? body.pathPrefix : "";
  if (pathPrefix !== "" && !pathPrefix.startsWith("/"))
    errors.push(`pathPrefix must begin with "/", found: ${JSON.stringify(pathPrefix)}`);
  const headerList = (field: string) => {
    const value = kind === "http" ? body[field] : undefined;
    const list = Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
    // Envoy's header matchers cannot express "any header": Istio refuses the lone wildcard.
    if (list.includes("*")) errors.push(`a single wildcard ("*") is not supported in ${field}`);
    return list;
  };
  const requestHeaders = headerList("includeRequestHeadersInCheck");
  const legacyHeaders = headerList("includeHeadersInCheck");
  const additional =
    kind === "http" && isRecord(body.includeAdditionalHeadersInCheck)
      ? body.includeAdditionalHeadersInCheck
      : {};
  const bodyCheck = isRecord(body.includeRequestBodyInCheck) ? body.includeRequestBodyInCheck : undefined;
  return {
    name,
    kind,
    service,
    port,
    timeout,
    failOpen: body.failOpen === true,
    statusOnError,
    pathPrefix,
    includeRequestHeadersInCheck: requestHeaders.length > 0 ? requestHeaders : legacyHeaders,
    includeAdditionalHeadersInCheck: Object.fromEntries(
      Object.entries(additional).filter((pair): pair is [string, string] => typeof pair[1] === "string"),
    ),
    headersToUpstreamOnAllow: headerList("headersToUpstreamOnAllow"),
    headersToDownstreamOnDeny: headerList("headersToDownstreamOnDeny"),
    headersToDownstreamOnAllow: headerList("headersToDownstreamOnAllow"),
    includeRequestBodyInCheck: bodyCheck && {
      maxRequestBytes: Number(bodyCheck.maxRequestBytes ?? 0),
      allowPartialMessage: bodyCheck.allowPartialMessage === true,
      packAsBytes: bodyCheck.packAsBytes === true,
    },
    errors,
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
