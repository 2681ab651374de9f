import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import { baseSettings, DEFAULT_PORTS, durationSecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";
import { envoySettingsShape } from "./envoy/settings.js";
import { readDownwardApiFile } from "./pod/downward-api.js";
import { type ProxyConfigView, parseProxyConfig } from "./pod/proxy-config.js";
import { byName } from "./util/by-name.js";

/** Envoy's and the agent's fixed local ports, as Istio's bootstrap uses them. */
export const AGENT_PORTS = {
  /** Envoy's admin API, on the loopback address only. */
  envoyAdmin: 15000,
  /** Envoy's readiness listener (`/healthz/ready`, routed to the agent). */
  envoyStatus: 15021,
  /** Envoy's Prometheus listener (`/stats/prometheus`, routed to the admin API). */
  envoyPrometheus: 15090,
  /** The plaintext xDS listener for proxyless gRPC apps (loopback only). */
  xdsProxy: 15010,
  /** The DNS proxy, UDP and TCP, on the loopback address. */
  dnsProxy: 15053,
} as const;

/** The three parts of a SPIFFE ID of Istio's form, kept local so settings do not need the identity library. */
export interface ExpectedSpiffeId {
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
}

/** push's namespace and service account, as its settings default them. */
const DEFAULT_XDS_SERVER_IDENTITY = { namespace: "istio-system", serviceAccount: "sextant-push" } as const;

/** A port that may be unset (an empty variable counts as unset). */
const optionalPort = z.preprocess(
  (value) => (value === "" ? undefined : value),
  z.coerce.number().int().min(0).max(65535).optional(),
);

const SPIFFE_ID = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/;

/** Istio's metadata prefixes: ISTIO_META_X=v becomes metadata X: "v"; ISTIO_METAJSON_X={...} is merged in. */
const META_PREFIX = "ISTIO_META_";
const META_JSON_PREFIX = "ISTIO_METAJSON_";

/** `<ip>:port`, `[<ipv6>]:port` or `localhost:port` (Istio's default address, whose families the DNS proxy picks). */
function parseHostPort(value: string): { host: string; port: number } | undefined {
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(value) ?? /^([^:]+):(\d+)$/.exec(value);
  if (!match) return undefined;
  const host = match[1]!;
  const port = Number(match[2]);
  return (host === "localhost" || isIP(host) !== 0) && port <= 65_535 ? { host, port } : undefined;
}

/**
 * Go's strconv.ParseBool, which Istio uses for ISTIO_META_DNS_CAPTURE and
 * the other boolean switches; undefined for anything else.
 */
function parseGoBool(value: unknown): boolean | undefined {
  if (typeof value !== "string") return undefined;
  if (["1", "t", "T", "TRUE", "true", "True"].includes(value)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(value)) return false;
  return undefined;
}

/**
 * The first non-internal address of this host, IPv4 first: what istio-agent
 * reports when INSTANCE_IP is not set. A host with none (a sandbox) gets the
 * loopback address, which keeps the node id well formed.
 */
function detectInstanceIp(): string {
  const addresses = Object.values(networkInterfaces())
    .flat()
    .filter((address) => address !== undefined && !address.internal);
  return (
    addresses.find((address) => address?.family === "IPv4")?.address ?? addresses[0]?.address ?? "127.0.0.1"
  );
}

/**
 * The agent's settings, from the environment. Names and defaults follow
 * istio-agent's where it has them; the paths are "./"-relative like Istio's
 * (which runs from /), so a local run needs no root and several agents can
 * share a machine by pointing them at different directories.
 */
const agentSettingsObject = baseSettings.extend({
  /** `/metrics`, `/ready` and `/healthz/ready` (istio-agent: STATUS_PORT); by default PROXY_CONFIG's statusPort, 15020. */
  HTTP_PORT: optionalPort,
  /** ca's CreateCertificate address (istio-agent: CA_ADDR). */
  CA_ADDR: z.string().min(1).default(`localhost:${DEFAULT_PORTS.ca.grpc}`),
  /** The root that verifies ca's serving certificate (Istio mounts istio-ca-root-cert here). */
  CA_ROOT_CERT: z.string().min(1).default("./var/run/secrets/istio/root-cert.pem"),
  /** push's mTLS ADS address; by default PROXY_CONFIG's discoveryAddress (as Istio's injector sets it), else localhost:15012. */
  XDS_ADDR: z
    .string()
    .optional()
    .transform((value) => value?.trim() || undefined),
  /** Istio's ProxyConfig as JSON, as Istio's injector sets it (mesh defaultConfig + `proxy.istio.io/config`). */
  PROXY_CONFIG: z.string().optional(),
  /** The pod's labels as Kubernetes' downward API writes them (Istio: ./etc/istio/pod/labels). */
  POD_LABELS_FILE: z.string().min(1).default("./etc/istio/pod/labels"),
  /** The pod's annotations, likewise (Istio: ./etc/istio/pod/annotations). */
  POD_ANNOTATIONS_FILE: z.string().min(1).default("./etc/istio/pod/annotations"),
  /** The proxy container's CPU limit in whole cores (the injector's resourceFieldRef): Envoy's concurrency when PROXY_CONFIG sets none. */
  ISTIO_CPU_LIMIT: z.coerce.number().int().positive().optional(),
  /** The only identity the agent accepts from push's serving certificate; by default push's in TRUST_DOMAIN. */
  XDS_SERVER_SPIFFE_ID: z
    .string()
    .optional()
    .transform((value, ctx): ExpectedSpiffeId | undefined => {
      if (value === undefined || value.trim() === "") return undefined;
      const match = SPIFFE_ID.exec(value.trim());
      if (!match) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message:
            "must be a SPIFFE ID of the form spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>",
        });
        return z.NEVER;
      }
      return { trustDomain: match[1]!, namespace: match[2]!, serviceAccount: match[3]! };
    }),
  /** The credential for the first certificate, read fresh for each request: a projected service-account token or a bootstrap token. */
  TOKEN_FILE: z.string().min(1).default("./var/run/secrets/tokens/istio-token"),
  /** The SPIFFE trust domain of the workload's identity. */
  TRUST_DOMAIN: z
    .string()
    .min(1)
    .regex(/^[a-z0-9.-]+$/, "must be lower-case letters, digits, dots and dashes")
    .default("cluster.local"),
  /** The DNS suffix of the node id's last part (`<ns>.svc.<suffix>`). */
  DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
  /** The pod (or VM) name: the node id and metadata NAME. */
  POD_NAME: z.string().min(1).default(hostname()),
  /** The workload's namespace: its identity and its node. */
  POD_NAMESPACE: z.string().min(1).default("default"),
  /** The workload's service account: its identity. */
  SERVICE_ACCOUNT: z.string().min(1).default("default"),
  /** The workload's IP (the node id and INSTANCE_IPS); detected when unset. */
  INSTANCE_IP: z
    .string()
    .optional()
    .transform((value) => value?.trim() || detectInstanceIp())
    .refine((value) => isIP(value) !== 0, { message: "must be an IPv4 or IPv6 address" }),
  /** Lifetime asked for the workload certificate (istio-agent: SECRET_TTL). */
  SECRET_TTL: durationSecondsSetting("24h"),
  /** Rotate when this fraction of the lifetime is left (istio-agent: SECRET_GRACE_PERIOD_RATIO). */
  SECRET_GRACE_PERIOD_RATIO: z.coerce.number().gt(0).lt(1).default(0.5),
  /** Random spread of the ratio, so that a fleet does not rotate at once (istio-agent: SECRET_GRACE_PERIOD_RATIO_JITTER). */
  SECRET_GRACE_PERIOD_RATIO_JITTER: z.coerce.number().min(0).lt(0.5).default(0.01),
  /** SDS for Envoy (Istio: ./var/run/secrets/workload-spiffe-uds/socket). */
  SDS_SOCKET: z.string().min(1).default("./var/run/secrets/workload-spiffe-uds/socket"),
  /** The xDS proxy for Envoy and proxyless apps (Istio: ./etc/istio/proxy/XDS). */
  XDS_SOCKET: z.string().min(1).default("./etc/istio/proxy/XDS"),
  /** The xDS proxy's 127.0.0.1 TCP port for proxyless apps; 0 turns it off (the bootstrap then names the socket). */
  XDS_PROXY_PORT: portSetting(AGENT_PORTS.xdsProxy),
  /** Where cert-chain.pem, key.pem and root-cert.pem are kept for proxyless apps (istio-agent: OUTPUT_CERTS); empty turns it off. */
  OUTPUT_CERTS: z
    .string()
    .default("./var/lib/istio/data")
    .transform((value) => value.trim() || undefined),
  /** The DNS proxy's address when ISTIO_META_DNS_CAPTURE is true (istio-agent: DNS_PROXY_ADDR). */
  DNS_PROXY_ADDR: z
    .string()
    .default(`localhost:${AGENT_PORTS.dnsProxy}`)
    .transform((value, ctx) => {
      const parsed = parseHostPort(value.trim());
      if (!parsed) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message: "must be <ip>:<port>, [<ipv6>]:<port> or localhost:<port>",
        });
        return z.NEVER;
      }
      return parsed;
    }),
  /** Ask every resolv.conf nameserver at once and take the first reply (istio-agent: DNS_FORWARD_PARALLEL). */
  DNS_FORWARD_PARALLEL: z
    .string()
    .default("false")
    .transform((value, ctx) => {
      const parsed = parseGoBool(value.trim());
      if (parsed === undefined) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: "must be true or false" });
        return z.NEVER;
      }
      return parsed;
    }),
  /** The resolv.conf whose nameservers get the queries the DNS proxy does not answer, and whose search list it expands. */
  DNS_RESOLV_CONF: z.string().min(1).default("/etc/resolv.conf"),
  /** When set, `run` writes the gRPC bootstrap here, as istio-agent does. */
  GRPC_XDS_BOOTSTRAP: z
    .string()
    .optional()
    .transform((value) => value?.trim() || undefined),
  /** `agent proxy`'s: Envoy, its drain, the status port's probes and metrics (src/envoy/settings.ts). */
  ...envoySettingsShape,
});

/** Every environment variable the agent reads by name (ISTIO_META_* and ISTIO_METAJSON_* aside). */
export const AGENT_SETTING_NAMES: readonly string[] = Object.keys(agentSettingsObject.shape).sort();

/** The default of a setting, as the schema gives it when the variable is unset. */
export function settingDefault(name: keyof typeof agentSettingsObject.shape): unknown {
  return agentSettingsObject.shape[name].parse(undefined);
}

/**
 * The agent's settings schema. ISTIO_META_* and ISTIO_METAJSON_* have
 * open-ended names, so the object passes unknown variables through to the
 * transform, which turns those into node metadata and drops the rest.
 */
export const agentSettings = agentSettingsObject
  .passthrough()
  // A refinement, not the transform: it runs even when other variables are
  // bad, so one start reports every bad variable.
  .superRefine((env, ctx) => {
    for (const problem of [...nodeMetadataFromEnv(env).problems, ...podInputs(env).problems])
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: [problem.name], message: problem.message });
    // Istio ignores a bad value and leaves DNS capture off: a silent surprise, so it is refused here.
    const capture = env.ISTIO_META_DNS_CAPTURE;
    if (capture !== undefined && parseGoBool(capture) === undefined)
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["ISTIO_META_DNS_CAPTURE"],
        message: "must be true or false",
      });
  })
  .transform((settings) => {
    const { metadata, labels } = nodeMetadataFromEnv(settings);
    const pod = podInputs(settings);
    const known = Object.fromEntries(
      Object.keys(agentSettingsObject.shape).map((name) => [name, settings[name]]),
    ) as z.infer<typeof agentSettingsObject>;
    const proxyConfig = pod.proxyConfig!;
    const nodeMetadata = { ...metaFromProxyMetadata(proxyConfig.proxyMetadata), ...metadata };
    return {
      ...known,
      HTTP_PORT: known.HTTP_PORT ?? proxyConfig.statusPort,
      XDS_ADDR: known.XDS_ADDR ?? proxyConfig.discoveryAddress ?? `localhost:${DEFAULT_PORTS.push.xdsTls}`,
      XDS_SERVER_SPIFFE_ID: known.XDS_SERVER_SPIFFE_ID ?? {
        trustDomain: known.TRUST_DOMAIN,
        ...DEFAULT_XDS_SERVER_IDENTITY,
      },
      /** PROXY_CONFIG, read; concurrency falls back to ISTIO_CPU_LIMIT as in Istio. */
      PROXY_CONFIG: {
        ...proxyConfig,
        concurrency: proxyConfig.concurrency ?? known.ISTIO_CPU_LIMIT,
      } satisfies ProxyConfigView,
      /**
       * Node metadata, lowest precedence first: PROXY_CONFIG's proxyMetadata
       * ISTIO_META_* entries, then the environment's (Istio's GetNodeMetaData).
       */
      NODE_METADATA: nodeMetadata,
      /**
       * Istio's switch for the DNS proxy: ISTIO_META_DNS_CAPTURE, from the
       * environment or PROXY_CONFIG's proxyMetadata (off by default, as in Istio).
       */
      DNS_CAPTURE: parseGoBool(nodeMetadata.DNS_CAPTURE) ?? false,
      /**
       * The workload's labels: ISTIO_METAJSON_LABELS, with the downward-API
       * file's over them (less pod-template-hash, which changes per rollout),
       * as Istio merges them.
       */
      LABELS: { ...labels, ...pod.fileLabels },
      /** The pod's annotations, from the downward-API file (empty without it). */
      ANNOTATIONS: pod.annotations ?? {},
    };
  });

/** Istio drops this label from the file's labels: it differs per ReplicaSet, and selectors never use it. */
const POD_TEMPLATE_HASH = "pod-template-hash";

/** PROXY_CONFIG and the downward-API files, read, with a problem per bad variable. */
function podInputs(env: Record<string, unknown>): {
  proxyConfig: ProxyConfigView | undefined;
  fileLabels: Record<string, string> | undefined;
  annotations: Record<string, string> | undefined;
  problems: Array<{ name: string; message: string }>;
} {
  const problems: Array<{ name: string; message: string }> = [];
  const proxyConfigText = typeof env.PROXY_CONFIG === "string" ? env.PROXY_CONFIG : undefined;
  const proxyConfig = parseProxyConfig(proxyConfigText);
  if (!proxyConfig.ok)
    for (const message of proxyConfig.problems) problems.push({ name: "PROXY_CONFIG", message });
  const readFile = (name: string) => {
    const path = env[name];
    if (typeof path !== "string") return undefined;
    try {
      return readDownwardApiFile(path);
    } catch (error) {
      problems.push({ name, message: (error as Error).message });
      return undefined;
    }
  };
  const labels = readFile("POD_LABELS_FILE");
  const annotations = readFile("POD_ANNOTATIONS_FILE");
  if (labels) delete labels[POD_TEMPLATE_HASH];
  return {
    proxyConfig: proxyConfig.ok ? proxyConfig.config : undefined,
    fileLabels: labels,
    annotations,
    problems,
  };
}

/** proxyMetadata's ISTIO_META_X entries as metadata X (its other entries are plain environment). */
function metaFromProxyMetadata(proxyMetadata: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(proxyMetadata)
      .filter(([name]) => name.startsWith(META_PREFIX) && name.length > META_PREFIX.length)
      .map(([name, value]) => [name.slice(META_PREFIX.length), value]),
  );
}

/** The agent's parsed settings. */
export type AgentSettings = z.infer<typeof agentSettings>;

/**
 * Istio's environment contract for node metadata (pkg/bootstrap
 * GetNodeMetaData): every ISTIO_META_X=v becomes X: "v"; the JSON object of
 * every ISTIO_METAJSON_X is merged in at the top level; and
 * ISTIO_METAJSON_LABELS also gives the workload's labels. A variable that is
 * not a JSON object is an error that names it (Istio only warns, and the
 * proxy then runs without its labels: a silent misconfiguration).
 */
function nodeMetadataFromEnv(env: Record<string, unknown>): {
  metadata: Record<string, unknown>;
  labels: Record<string, string>;
  problems: Array<{ name: string; message: string }>;
} {
  const metadata: Record<string, unknown> = {};
  const problems: Array<{ name: string; message: string }> = [];
  let labels: Record<string, string> = {};
  for (const [name, value] of Object.entries(env).sort(byName)) {
    if (typeof value !== "string" || !name.startsWith(META_JSON_PREFIX)) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch (error) {
      problems.push({ name, message: `must be a JSON object (${(error as Error).message})` });
      continue;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      problems.push({ name, message: "must be a JSON object" });
      continue;
    }
    if (name === `${META_JSON_PREFIX}LABELS`) {
      const nonString = Object.entries(parsed).find(([, v]) => typeof v !== "string");
      if (nonString) {
        problems.push({ name, message: `label values must be strings (label "${nonString[0]}" is not)` });
        continue;
      }
      labels = parsed as Record<string, string>;
    }
    Object.assign(metadata, parsed);
  }
  // ISTIO_META_* after ISTIO_METAJSON_*: an explicit key wins over a merged one.
  for (const [name, value] of Object.entries(env).sort(byName)) {
    if (typeof value === "string" && name.startsWith(META_PREFIX) && name.length > META_PREFIX.length) {
      metadata[name.slice(META_PREFIX.length)] = value;
    }
  }
  return { metadata, labels, problems };
}
