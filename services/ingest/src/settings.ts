import { authSettings, checkAuthSettings } from "@sextant/auth";
import { baseSettings, DEFAULT_PORTS, millisecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";

/**
 * Ingest's settings, from the environment. The config API's authentication
 * (API_AUTH, API_TOKENS_FILE, ...) is @sextant/auth's; ingest does not start
 * unless some is configured or API_AUTH=none says there is to be none.
 */
export const ingestSettings = baseSettings
  .extend({
    ...authSettings,
    /** The config API, /metrics and /ready. */
    HTTP_PORT: portSetting(DEFAULT_PORTS.ingest.http),
    /** A directory of YAML/JSON config files to keep applied; unset for none. */
    CONFIG_DIR: z.string().min(1).optional(),
    /** Full rescan period of CONFIG_DIR, besides its change events. */
    CONFIG_DIR_RESCAN_MS: millisecondsSetting(2_000),
    /** Follow the Istio custom resources of the Kubernetes cluster ("true" or "false"). */
    KUBERNETES_CONFIG: z
      .enum(["true", "false"], { message: 'must be "true" or "false"' })
      .default("false")
      .transform((value) => value === "true"),
    /**
     * Kubeconfig file(s) for KUBERNETES_CONFIG, as kubectl reads KUBECONFIG;
     * unset: ~/.kube/config, else the in-cluster service account.
     */
    KUBECONFIG: z.string().min(1).optional(),
    /** Largest request body (and config file) accepted, in bytes. */
    MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(2 * 1024 * 1024),
    /**
     * Config API requests (/v1/*) served at once; more are answered 429 with
     * Retry-After (kube-apiserver: --max-requests-inflight). The default is
     * four times the 16 concurrent clients at which apply throughput peaked
     * on a quiet machine (BENCHMARKS.md, "Ingest: overload").
     */
    MAX_REQUESTS_IN_FLIGHT: z.coerce.number().int().positive().default(64),
    /** Most documents accepted in one request or file. */
    MAX_DOCUMENTS: z.coerce.number().int().positive().default(500),
    /** The cluster's DNS suffix, for resolving short hosts in analysis. */
    DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
    /** Quiet time after a change before the config is analysed again. */
    ANALYSIS_DEBOUNCE_MS: millisecondsSetting(100),
  })
  .superRefine(checkAuthSettings);

/** Ingest's parsed settings. */
export type IngestSettings = z.infer<typeof ingestSettings>;
