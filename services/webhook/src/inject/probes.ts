/**
 * Istio's application probe rewriting: kubelet's HTTP, TCP and gRPC probes
 * of the app containers are pointed at the agent's status port
 * (/app-health/<container>/livez|readyz|startupz), and so are HTTP and TCP
 * lifecycle hooks (/app-lifecycle/<container>/prestopz|poststartz); the
 * originals travel to the agent in ISTIO_KUBE_APP_PROBERS, which performs
 * them from inside the pod. Without this, mTLS STRICT would make kubelet's
 * probes fail.
 */

/** The proxy env that carries the original probes (Istio's name). */
export const APP_PROBERS_ENV = "ISTIO_KUBE_APP_PROBERS";

type Json = Record<string, unknown>;

interface ContainerJson {
  name?: string;
  ports?: unknown[];
  [key: string]: unknown;
}

/** Probe fields and the URL suffix Istio gives each (pilot-agent's status.FormatProberURL). */
const PROBES = [
  ["readinessProbe", "readyz"],
  ["livenessProbe", "livez"],
  ["startupProbe", "startupz"],
] as const;

/** Lifecycle hook fields and the URL suffix Istio gives each. */
const HOOKS = [
  ["preStop", "prestopz"],
  ["postStart", "poststartz"],
] as const;

/**
 * Rewrites the probes of every container but the proxy, in place, and returns
 * the ISTIO_KUBE_APP_PROBERS value (undefined when no probe was rewritten).
 * The value is Istio's JSON: keys sorted (Go's map order), each entry
 * {httpGet|tcpSocket|grpc, timeoutSeconds}, with named ports resolved to the
 * container's port numbers. Exec probes are left alone; an HTTP or TCP probe
 * naming a port the container does not declare, or already aimed at the
 * status port, is rewritten but not recorded, as Istio does.
 */
export function rewriteAppProbes(containers: ContainerJson[], statusPort: number): string | undefined {
  const probers: Record<string, Json> = {};
  for (const container of containers) {
    const name = container.name;
    if (name === undefined || name === "istio-proxy") continue;
    const ports = new Map<string, number>();
    for (const p of (container.ports ?? []) as Json[])
      if (typeof p.name === "string" && p.name !== "" && typeof p.containerPort === "number")
        ports.set(p.name, p.containerPort);
    for (const [field, suffix] of PROBES) {
      const probe = container[field] as Json | undefined;
      if (!probe || typeof probe !== "object") continue;
      const path = `/app-health/${name}/${suffix}`;
      const original = prober(probe, ports, statusPort);
      const rewritten = rewrite(probe, path, statusPort);
      if (rewritten === undefined) continue;
      if (original !== undefined) probers[path] = original;
      container[field] = rewritten;
    }
    const lifecycle = container.lifecycle as Json | undefined;
    if (!isObject(lifecycle)) continue;
    for (const [field, suffix] of HOOKS) {
      const hook = lifecycle[field];
      // Exec and sleep hooks run in the container itself; only network hooks go through the agent.
      if (!isObject(hook) || (!isObject(hook.httpGet) && !isObject(hook.tcpSocket))) continue;
      const path = `/app-lifecycle/${name}/${suffix}`;
      // A hook has no timeout of its own: the agent's entry carries only the action.
      const original = prober({ ...hook, timeoutSeconds: undefined }, ports, statusPort);
      if (original !== undefined) probers[path] = original;
      lifecycle[field] = rewrite(hook, path, statusPort);
    }
  }
  const keys = Object.keys(probers).sort();
  if (keys.length === 0) return undefined;
  return JSON.stringify(Object.fromEntries(keys.map((k) => [k, probers[k]])));
}

/** The original probe as the agent needs it; undefined when Istio would not record it. */
function prober(probe: Json, ports: Map<string, number>, statusPort: number): Json | undefined {
  const timeout =
    typeof probe.timeoutSeconds === "number" && probe.timeoutSeconds !== 0 ? probe.timeoutSeconds : undefined;
  const withTimeout = (action: Json) =>
    timeout === undefined ? action : { ...action, timeoutSeconds: timeout };
  if (isObject(probe.grpc)) return withTimeout({ grpc: httpOrder(probe.grpc, GRPC_ORDER) });
  const key = isObject(probe.httpGet) ? "httpGet" : isObject(probe.tcpSocket) ? "tcpSocket" : undefined;
  if (key === undefined) return undefined;
  const action = { ...(probe[key] as Json) };
  if (typeof action.port === "string") {
    const number = /^\d+$/.test(action.port) ? Number(action.port) : ports.get(action.port);
    if (number === undefined) return undefined;
    action.port = number;
  } else if (action.port === statusPort) {
    return undefined;
  }
  return withTimeout({ [key]: httpOrder(action, key === "httpGet" ? HTTP_ORDER : TCP_ORDER) });
}

/** The probe aimed at the agent: an httpGet on the status port, other fields (timings) kept. */
function rewrite(probe: Json, path: string, statusPort: number): Json | undefined {
  if (isObject(probe.httpGet)) {
    const httpGet: Json = { ...probe.httpGet, path, port: statusPort };
    // The agent serves plain HTTP; it probes the app with the original scheme.
    if (httpGet.scheme === "HTTPS") httpGet.scheme = "HTTP";
    return { ...probe, httpGet };
  }
  for (const key of ["tcpSocket", "grpc"]) {
    if (!isObject(probe[key])) continue;
    const { [key]: _, ...rest } = probe;
    return { ...rest, httpGet: { path, port: statusPort } };
  }
  return undefined;
}

// Field orders of Kubernetes' Go structs, so that the JSON reads as Istio's does.
const HTTP_ORDER = ["path", "port", "host", "scheme", "httpHeaders"];
const TCP_ORDER = ["port", "host"];
const GRPC_ORDER = ["port", "service"];

function httpOrder(action: Json, order: string[]): Json {
  const out: Json = {};
  for (const k of order) if (action[k] !== undefined) out[k] = action[k];
  for (const [k, v] of Object.entries(action)) if (!(k in out)) out[k] = v;
  return out;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
