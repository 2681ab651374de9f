import { authSettings } from "@sextant/auth";
import {
  baseSettings,
  DEFAULT_PORTS,
  durationSecondsSetting,
  millisecondsSetting,
  portSetting,
} from "@sextant/runtime";
import { z } from "zod";

/** Push's settings, from the environment. Names and defaults follow istiod's where it has them. */
export const pushSettings = baseSettings.extend({
  /** /metrics, /ready and /debug/*. */
  HTTP_PORT: portSetting(DEFAULT_PORTS.push.http),
  /**
   * Who may read /debug/config_dump and /debug/syncz, as ingest's API
   * authenticates (@sextant/auth): API_AUTH, API_TOKENS_FILE (the `debug`
   * verb), ... Unset: nobody; API_AUTH=none: anyone.
   */
  ...authSettings,
  /**
   * Plaintext ADS on XDS_PORT, for proxyless clients without an agent. Off
   * by default: on it, anyone who reaches the port reads every proxy's config
   * (services, endpoints, policies) and proves no identity. Dev, the demo and
   * compose turn it on; production leaves it off and serves agents on mTLS.
   */
  XDS_PLAINTEXT_ENABLED: z
    .enum(["true", "false"])
    .default("false")
    .transform((value) => value === "true"),
  /** Plaintext ADS, when XDS_PLAINTEXT_ENABLED. */
  XDS_PORT: portSetting(DEFAULT_PORTS.push.xds),
  /** ADS over mTLS with XDS_AUTH, for agents. Off only where no CA runs (tests of push alone). */
  XDS_TLS_ENABLED: z
    .enum(["true", "false"])
    .default("true")
    .transform((value) => value === "true"),
  /** The mTLS ADS port (istiod: 15012). */
  XDS_TLS_PORT: portSetting(DEFAULT_PORTS.push.xdsTls),
  /** The SPIFFE trust domain. */
  TRUST_DOMAIN: z.string().min(1).default("cluster.local"),
  /** ca's CreateCertificate address, for push's own certificate (istio-agent: CA_ADDR). */
  CA_ADDR: z.string().min(1).default(`localhost:${DEFAULT_PORTS.ca.grpc}`),
  /** The root that verifies ca's serving certificate (Istio mounts it from the istio-ca-root-cert ConfigMap). */
  CA_ROOT_CERT: z.string().min(1).default("./var/run/secrets/istio/root-cert.pem"),
  /** Push's credential for its first certificate: a projected service-account token or a bootstrap token. */
  TOKEN_FILE: z.string().min(1).default("./var/run/secrets/tokens/istio-token"),
  /** The namespace and service account push's certificate names (agents accept push only with this identity). */
  POD_NAMESPACE: z.string().min(1).default("istio-system"),
  SERVICE_ACCOUNT: z.string().min(1).default("sextant-push"),
  /** Lifetime asked for push's certificate (istio-agent: SECRET_TTL). */
  SECRET_TTL: durationSecondsSetting("24h"),
  /** Quiet time after a change before pushing (istiod: PILOT_DEBOUNCE_AFTER). */
  PUSH_DEBOUNCE_AFTER: millisecondsSetting(100),
  /** Longest a burst of changes can delay a push (istiod: PILOT_DEBOUNCE_MAX). */
  PUSH_DEBOUNCE_MAX: millisecondsSetting(10_000),
  /**
   * Push a change that follows PUSH_DEBOUNCE_AFTER of quiet at once, and
   * debounce only the changes that follow it. false: istiod's trailing
   * debounce, where every push waits PUSH_DEBOUNCE_AFTER.
   */
  PUSH_DEBOUNCE_LEADING_EDGE: z
    .enum(["true", "false"])
    // On by default: a lone change pays no debounce (issue 23's latency goal);
    // "false" is istiod's behaviour.
    .default("true")
    .transform((value) => value === "true"),
  /** Debounce endpoint-only changes too (istiod: PILOT_ENABLE_EDS_DEBOUNCE); false pushes each at once. */
  PUSH_ENABLE_EDS_DEBOUNCE: z
    .enum(["true", "false"])
    .default("true")
    .transform((value) => value === "true"),
  /**
   * Pushes in flight at once, initial pushes of new streams included, served
   * first come first served (istiod: PILOT_PUSH_THROTTLE). An initial push is
   * in flight until the stream's transport took its bytes, a change push until
   * none of it is held back; either at most PUSH_SEND_TIMEOUT.
   */
  PUSH_THROTTLE: z.coerce.number().int().positive().default(100),
  /**
   * How long a push may hold its PUSH_THROTTLE slot waiting for a slow
   * stream to take its bytes. The stream is not closed: its newer responses
   * replace unsent ones, one per type. (istiod's former PILOT_XDS_SEND_TIMEOUT,
   * off by default, failed the stream; istiod 1.30 holds the slot while Send blocks.)
   */
  PUSH_SEND_TIMEOUT: millisecondsSetting(5_000),
  /**
   * xDS streams this replica serves at once, over both ports and both ADS
   * variants; a new stream beyond it ends at once with RESOURCE_EXHAUSTED and
   * its client retries, reaching another replica over a new connection. 0: no
   * limit, the default, as istiod has none: what fits depends on the
   * config each proxy is sent (bench:scale measured 55 KB to 2 MB of push's
   * memory per sidecar), so set it from the replica's memory limit.
   */
  PUSH_MAX_STREAMS: z.coerce.number().int().nonnegative().default(0),
  /**
   * Istio's MeshConfig as YAML: the key `mesh` of the ConfigMap `istio`,
   * mounted as a file as istiod reads it (`/etc/istio/config/mesh`), and
   * followed. Its `extensionProviders` are the ext_authz servers of CUSTOM
   * AuthorizationPolicies. Unset or missing: no providers, so every CUSTOM
   * policy denies what it matches.
   */
  MESH_CONFIG_FILE: z.string().min(1).optional(),
  /** The cluster's DNS suffix. */
  DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
  /** How often changed proxy sync states are written to sextant-proxy-status. */
  STATUS_FLUSH_MS: millisecondsSetting(1_000),
  /**
   * How often every proxy's record in sextant-proxy-status is rewritten, so
   * that a record not rewritten for three heartbeats shows its replica gone
   * (sextantctl proxy-status: STALE).
   */
  STATUS_HEARTBEAT_MS: millisecondsSetting(10_000),
  /**
   * Where other processes reach this replica's /debug/* (recorded in
   * sextant-proxy-status so that sextantctl asks the replica holding a
   * proxy's stream). In Kubernetes set it from the pod IP, e.g.
   * http://$(POD_IP):15014. Unset: http://127.0.0.1:HTTP_PORT.
   */
  DEBUG_ADDRESS: z.string().url().optional(),
});

/** Push's parsed settings. */
export type PushSettings = z.infer<typeof pushSettings>;
