import { kubernetesAvailable } from "@sextant/kube";
import { baseSettings, DEFAULT_PORTS, durationSecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";

const list = z
  .string()
  .default("")
  .transform((value) =>
    value
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );

/** The CA's settings, from the environment. Names and defaults follow istiod's where it has them. */
export const caSettings = baseSettings
  .extend({
    /** /metrics and /ready. */
    HTTP_PORT: portSetting(DEFAULT_PORTS.ca.http),
    /** CreateCertificate over TLS. */
    GRPC_PORT: portSetting(DEFAULT_PORTS.ca.grpc),
    /** The SPIFFE trust domain. */
    TRUST_DOMAIN: z
      .string()
      .min(1)
      .regex(/^[a-z0-9.-]+$/, "must be lower-case letters, digits, dots and dashes")
      .default("cluster.local"),
    /** The namespace the CA runs in: its serving certificate names sextant-ca.<ns>.svc. */
    POD_NAMESPACE: z.string().min(1).default("istio-system"),
    /** The cacerts directory (istiod: ./etc/cacerts); a self-signed root is created there when empty. */
    CA_CERTS_DIR: z.string().min(1).default("./etc/cacerts"),
    /** Extra DNS names or IPs of the serving certificate (besides sextant-ca.<ns>.svc, localhost, 127.0.0.1). */
    CA_SERVER_SANS: list,
    /** Workload certificate lifetime when a request asks for none (istiod: DEFAULT_WORKLOAD_CERT_TTL). */
    DEFAULT_WORKLOAD_CERT_TTL: durationSecondsSetting("24h"),
    /** Longest workload certificate lifetime; longer requests are cut (istiod: MAX_WORKLOAD_CERT_TTL). */
    MAX_WORKLOAD_CERT_TTL: durationSecondsSetting("90d"),
    /** Lifetime of a generated self-signed root (istiod: CITADEL_SELF_SIGNED_CA_CERT_TTL). */
    CITADEL_SELF_SIGNED_CA_CERT_TTL: durationSecondsSetting("3650d"),
    /** Authenticators, tried in this order: kubernetes, mesh-certificate, bootstrap-token. */
    CA_AUTHENTICATORS: list.pipe(z.array(z.enum(["kubernetes", "mesh-certificate", "bootstrap-token"]))),
    /** Audiences a service-account token must carry (istiod: TOKEN_AUDIENCES). */
    TOKEN_AUDIENCES: list.transform((values) => (values.length > 0 ? values : ["istio-ca"])),
    /** A kubeconfig for TokenReview; unset: in-cluster, or the default file. */
    KUBECONFIG: z.string().min(1).optional(),
    /** JSON file mapping bootstrap tokens to { namespace, serviceAccount }. */
    BOOTSTRAP_TOKENS_FILE: z.string().min(1).optional(),
    /**
     * CreateCertificate requests each SPIFFE identity may make per minute,
     * once its burst is spent; beyond it RESOURCE_EXHAUSTED, which
     * istio-agent and @sextant/identity retry with backoff. 0: no limit.
     * Istio's CA has none. A pod asks about twice a day (renewal at half the
     * lifetime), so the default only stops a runaway or hostile caller from
     * taking the CA's ~800 signatures/s (BENCHMARKS.md) from the others.
     */
    CA_RATE_LIMIT_PER_IDENTITY: z.coerce.number().int().nonnegative().default(600),
    /**
     * Requests an identity may make at once before the rate applies: every
     * pod of a service account starting together (a rollout, a node restart).
     */
    CA_RATE_LIMIT_BURST: z.coerce.number().int().positive().default(100),
    /** Keep istio-ca-root-cert in every namespace (istiod's namespace controller); unset: when Kubernetes is reachable. */
    ENABLE_NAMESPACE_CONTROLLER: z
      .enum(["true", "false"], { message: 'must be "true" or "false"' })
      .optional(),
  })
  .transform((settings) => ({
    ...settings,
    ENABLE_NAMESPACE_CONTROLLER: settings.ENABLE_NAMESPACE_CONTROLLER
      ? settings.ENABLE_NAMESPACE_CONTROLLER === "true"
      : kubernetesAvailable(settings.KUBECONFIG),
    // Default order: what is configured. Kubernetes when it is reachable, renewal always, bootstrap tokens when a file is given.
    CA_AUTHENTICATORS:
      settings.CA_AUTHENTICATORS.length > 0
        ? settings.CA_AUTHENTICATORS
        : ([
            ...(kubernetesAvailable(settings.KUBECONFIG) ? (["kubernetes"] as const) : []),
            "mesh-certificate",
            ...(settings.BOOTSTRAP_TOKENS_FILE ? (["bootstrap-token"] as const) : []),
          ] as Array<"kubernetes" | "mesh-certificate" | "bootstrap-token">),
  }))
  .superRefine((settings, ctx) => {
    if (settings.DEFAULT_WORKLOAD_CERT_TTL > settings.MAX_WORKLOAD_CERT_TTL)
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["DEFAULT_WORKLOAD_CERT_TTL"],
        message: "must not exceed MAX_WORKLOAD_CERT_TTL",
      });
    if (settings.CA_AUTHENTICATORS.includes("bootstrap-token") && !settings.BOOTSTRAP_TOKENS_FILE)
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ["BOOTSTRAP_TOKENS_FILE"],
        message: "is required by the bootstrap-token authenticator",
      });
  });

/** The CA's parsed settings. */
export type CaSettings = z.infer<typeof caSettings>;
