import { isIP } from "node:net";

/** Istio's per-pod annotations that the injector honours. */
export const Annotations = {
  proxyImage: "sidecar.istio.io/proxyImage",
  proxyImageType: "sidecar.istio.io/proxyImageType",
  proxyCPU: "sidecar.istio.io/proxyCPU",
  proxyMemory: "sidecar.istio.io/proxyMemory",
  proxyCPULimit: "sidecar.istio.io/proxyCPULimit",
  proxyMemoryLimit: "sidecar.istio.io/proxyMemoryLimit",
  logLevel: "sidecar.istio.io/logLevel",
  componentLogLevel: "sidecar.istio.io/componentLogLevel",
  agentLogLevel: "sidecar.istio.io/agentLogLevel",
  interceptionMode: "sidecar.istio.io/interceptionMode",
  nativeSidecar: "sidecar.istio.io/nativeSidecar",
  includeOutboundIPRanges: "traffic.sidecar.istio.io/includeOutboundIPRanges",
  excludeOutboundIPRanges: "traffic.sidecar.istio.io/excludeOutboundIPRanges",
  includeInboundPorts: "traffic.sidecar.istio.io/includeInboundPorts",
  excludeInboundPorts: "traffic.sidecar.istio.io/excludeInboundPorts",
  excludeOutboundPorts: "traffic.sidecar.istio.io/excludeOutboundPorts",
  includeOutboundPorts: "traffic.sidecar.istio.io/includeOutboundPorts",
  excludeInterfaces: "traffic.sidecar.istio.io/excludeInterfaces",
  statusPort: "status.sidecar.istio.io/port",
  readinessInitialDelaySeconds: "readiness.status.sidecar.istio.io/initialDelaySeconds",
  readinessPeriodSeconds: "readiness.status.sidecar.istio.io/periodSeconds",
  readinessFailureThreshold: "readiness.status.sidecar.istio.io/failureThreshold",
  rewriteAppHTTPProbers: "sidecar.istio.io/rewriteAppHTTPProbers",
  userVolume: "sidecar.istio.io/userVolume",
  userVolumeMount: "sidecar.istio.io/userVolumeMount",
  proxyConfig: "proxy.istio.io/config",
  templates: "inject.istio.io/templates",
  mergeMetrics: "prometheus.istio.io/merge-metrics",
} as const;

/**
 * Istio annotations on pods that change injection but that Sextant does not
 * implement: a pod carrying one is refused with the reason, never injected as
 * if the annotation were not there.
 */
export const REFUSED_ANNOTATIONS: Readonly<Record<string, string>> = {
  "sidecar.istio.io/bootstrapOverride":
    "a custom Envoy bootstrap is not supported: the agent writes the bootstrap that push's xDS relies on",
  "traffic.sidecar.istio.io/kubevirtInterfaces": "KubeVirt interface rerouting is not supported",
  "istio.io/reroute-virtual-interfaces": "virtual interface rerouting is not supported",
  "sidecar.istio.io/capNetBindService": "NET_BIND_SERVICE for the proxy is not supported",
  "sidecar.istio.io/enableCoreDump": "the core-dump init container (privileged, SYS_ADMIN) is not injected",
};

/** A Kubernetes resource quantity (100m, 128Mi, 1.5, 2e3). */
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;
/** Envoy's log levels as the agent accepts them (`warn` is Envoy's short form of `warning`). */
const LOG_LEVELS = ["trace", "debug", "info", "warning", "warn", "error", "critical", "off"];
/** A Linux interface name: at most 15 bytes, no whitespace, slash or colon. */
const INTERFACE = /^[^\s/:]{1,15}$/;

/** Thrown for annotations the injector cannot honour; Istio refuses such pods rather than guess. */
export class AnnotationError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid injection annotations: ${problems.join("; ")}`);
    this.name = "AnnotationError";
  }
}

/** Reads annotations, collecting every bad one instead of stopping at the first. */
export class AnnotationReader {
  readonly problems: string[] = [];

  constructor(private readonly annotations: Record<string, string>) {}

  /** The raw value, if set. */
  raw(name: string): string | undefined {
    return this.annotations[name];
  }

  /** A resource quantity, if set and valid. */
  quantity(name: string): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (!QUANTITY.test(value.trim()))
      return this.bad(name, value, "a resource quantity such as 100m or 128Mi");
    return value.trim();
  }

  /** A comma-separated list of ports (1-65535); `*` when allowStar. Empty entries are ignored. */
  ports(name: string, allowStar = false): string[] | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (allowStar && value.trim() === "*") return ["*"];
    const ports = splitList(value);
    const bad = ports.filter((p) => !/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535);
    if (bad.length > 0) return this.bad(name, value, "comma-separated ports from 1 to 65535");
    return ports;
  }

  /** One port (0-65535, as Istio parses a status port: 0 turns the feature off). */
  port(name: string): number | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    const trimmed = value.trim();
    if (!/^\d{1,5}$/.test(trimmed) || Number(trimmed) > 65535)
      return this.bad(name, value, "a port from 0 to 65535");
    return Number(trimmed);
  }

  /** A non-negative 32-bit integer (probe timings). */
  uint32(name: string): number | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (!/^\d{1,10}$/.test(value) || Number(value) > 0xffffffff)
      return this.bad(name, value, "a whole number from 0 to 4294967295");
    return Number(value);
  }

  /** A comma-separated list of network interface names. */
  interfaces(name: string): string[] | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    const names = splitList(value);
    if (names.length === 0 || names.some((n) => !INTERFACE.test(n)))
      return this.bad(name, value, "comma-separated interface names of at most 15 characters");
    return names;
  }

  /** A JSON object whose values are objects (Istio's userVolume and userVolumeMount: name -> spec). */
  jsonObjects(name: string): Record<string, Record<string, unknown>> | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return this.bad(name, value, "JSON");
    }
    if (!isPlainObject(parsed) || !Object.values(parsed).every(isPlainObject))
      return this.bad(name, value, "a JSON object of name to object");
    return parsed as Record<string, Record<string, unknown>>;
  }

  /** Records a problem found by a caller's own check (e.g. a request above its limit). */
  refuse(problem: string): void {
    this.problems.push(problem);
  }

  /** A comma-separated list of CIDRs; `*` when allowStar. */
  cidrs(name: string, allowStar = false): string[] | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (allowStar && value.trim() === "*") return ["*"];
    const ranges = splitList(value);
    if (ranges.some((r) => !isCidr(r)))
      return this.bad(name, value, "comma-separated CIDRs such as 10.0.0.0/8");
    return ranges;
  }

  /** A boolean as Istio reads one (Go's strconv.ParseBool). */
  boolean(name: string): boolean | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    return parseGoBool(value) ?? this.bad(name, value, "true or false");
  }

  /** One of a fixed set of words. */
  oneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if ((allowed as readonly string[]).includes(value)) return value as T;
    return this.bad(name, value, `one of ${allowed.join(", ")}`);
  }

  /** An Envoy log level. */
  logLevel(name: string): string | undefined {
    return this.oneOf(name, LOG_LEVELS);
  }

  /** A non-empty string without whitespace (an image reference, a component log level list). */
  word(name: string): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (value === "" || /\s/.test(value)) return this.bad(name, value, "a non-empty value without spaces");
    return value;
  }

  /** Throws an {@link AnnotationError} if any read failed. */
  check(): void {
    if (this.problems.length > 0) throw new AnnotationError(this.problems);
  }

  private bad(name: string, value: string, expected: string): undefined {
    this.problems.push(`${name}=${JSON.stringify(value)} must be ${expected}`);
    return undefined;
  }
}

/** Go's strconv.ParseBool, which Istio uses for boolean annotations: 1, t, true, TRUE, 0, f, false… */
export function parseGoBool(value: string): boolean | undefined {
  if (["1", "t", "T", "true", "TRUE", "True"].includes(value)) return true;
  if (["0", "f", "F", "false", "FALSE", "False"].includes(value)) return false;
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function splitList(value: string): string[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

function isCidr(value: string): boolean {
  const [address, prefix, extra] = value.split("/");
  if (address === undefined || prefix === undefined || extra !== undefined) return false;
  const family = isIP(address);
  if (family === 0 || !/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}
