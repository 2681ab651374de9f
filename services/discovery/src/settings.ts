import { authSettings } from "@sextant/auth";
import { baseSettings, DEFAULT_PORTS, millisecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";

/** Discovery's settings, from the environment. Names follow istiod's where one exists. */
export const discoverySettings = baseSettings
  .extend({
    /** /debug/registryz, /metrics and /ready. */
    HTTP_PORT: portSetting(DEFAULT_PORTS.discovery.http),
    /**
     * Who may read /debug/registryz, as ingest's API authenticates
     * (@sextant/auth): API_AUTH, API_TOKENS_FILE (the `debug` verb), ...
     * Unset: nobody; API_AUTH=none: anyone.
     */
    ...authSettings,
    /** The cluster's DNS suffix: Kubernetes services are `<name>.<ns>.svc.<suffix>` (istiod: DOMAIN_SUFFIX). */
    DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
    /** Names this cluster in endpoint shards, `kubernetes/<CLUSTER_ID>` (istiod: CLUSTER_ID, default "Kubernetes"). */
    CLUSTER_ID: z.string().min(1).default("Kubernetes"),
    /** The network of endpoints that no workload label or system-namespace label places elsewhere (istiod's meshNetworks); empty for the default network. */
    NETWORK: z.string().default(""),
    /**
     * The control plane's namespace (istiod: its own namespace, POD_NAMESPACE,
     * istio-system by default): its `topology.istio.io/network` label is the
     * network of every workload that does not name one.
     */
    SYSTEM_NAMESPACE: z.string().min(1).default("istio-system"),
    /**
     * Whether to read Kubernetes: "auto" reads it when KUBECONFIG is set or the
     * process runs in a pod (KUBERNETES_SERVICE_HOST), so a local mesh without
     * Kubernetes runs on ServiceEntries alone.
     */
    KUBERNETES: z.enum(["auto", "on", "off"]).default("auto"),
    /** A kubeconfig file to read Kubernetes with; unset: in-cluster config, or ~/.kube/config. */
    KUBECONFIG: z.string().min(1).optional(),
    /** Ingest's HTTP API, through which auto-registered WorkloadEntries are created; unset turns auto-registration off. */
    INGEST_URL: z
      .string()
      .url()
      .optional()
      .transform((url) => url?.replace(/\/+$/, "")),
    /**
     * A file holding the bearer token discovery shows ingest's API (in
     * Kubernetes, its projected service-account token, which ingest checks
     * with a TokenReview), read again on every call since the kubelet rotates
     * it; unset: no Authorization header, for an ingest with API_AUTH=none.
     */
    INGEST_TOKEN_FILE: z.string().min(1).optional(),
    /** How long an auto-registered WorkloadEntry outlives its proxy's disconnection (istiod: PILOT_WORKLOAD_ENTRY_GRACE_PERIOD, 10s). */
    WORKLOAD_ENTRY_GRACE_PERIOD_MS: millisecondsSetting(10_000),
    /** How long a leader's lease lasts without renewal before another replica may take it. */
    LEASE_DURATION_MS: z.coerce.number().int().min(500).default(10_000),
    /** How often the leader renews its lease and standbys look at it. */
    LEASE_RENEW_MS: z.coerce.number().int().min(100).default(2_000),
    /**
     * Whether the leader deploys Gateway API Gateways of the istio and sextant classes
     * (a ServiceAccount, Deployment and Service each; istiod:
     * PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER). Needs Kubernetes and the Gateway API's CRDs.
     */
    PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER: z
      .enum(["true", "false"], { message: "must be true or false" })
      .default("true")
      .transform((value) => value === "true"),
    /** The image of deployed Gateways: the Sextant agent and Envoy (the webhook's SIDECAR_PROXY_IMAGE; istiod: global.proxy.image). */
    SIDECAR_PROXY_IMAGE: z.string().min(1).default("sextant/proxy:0.0.0"),
    /** The CA a deployed Gateway's agent asks for certificates (as the webhook's CA_ADDR). */
    CA_ADDR: z.string().min(1).default("sextant-ca.istio-system.svc:8060"),
    /** Where a deployed Gateway's agent gets xDS: push's mTLS port (as the webhook's DISCOVERY_ADDRESS). */
    DISCOVERY_ADDRESS: z.string().min(1).default("sextant-push.istio-system.svc:15012"),
    /** The SPIFFE trust domain of deployed Gateways (as the webhook's TRUST_DOMAIN). */
    TRUST_DOMAIN: z.string().min(1).default("cluster.local"),
    /** The mesh id of deployed Gateways; the trust domain when unset (as the webhook's MESH_ID). */
    MESH_ID: z.string().min(1).optional(),
    /** KV writes in flight at once while publishing the registry. */
    WRITE_CONCURRENCY: z.coerce.number().int().min(1).max(1024).default(64),
  })
  .refine((settings) => settings.LEASE_RENEW_MS * 2 <= settings.LEASE_DURATION_MS, {
    // A leader must get at least two renewal attempts in before its lease runs out.
    message: "must be at most half of LEASE_DURATION_MS",
    path: ["LEASE_RENEW_MS"],
  });

/** Discovery's parsed settings. */
export type DiscoverySettings = z.infer<typeof discoverySettings>;
