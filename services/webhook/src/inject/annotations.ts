import { isIP } from "node:net";

/** Istio's per-pod annotations that the injector honours. */
export const Annotations = {
  proxyImage: "sidecar.istio.io/proxyImage",
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
} as const;

/** A Kubernetes resource quantity (100m, 128Mi, 1.5, 2e3). */
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$/;
const LOG_LEVELS = ["trace", "debug", "info", "warning", "error", "critical", "off"];

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

  /** A boolean in Istio's words (true/false). */
  boolean(name: string): boolean | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (value === "true" || value === "false") return value === "true";
    return this.bad(name, value, "true or false");
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
