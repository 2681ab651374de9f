import { baseSettings, DEFAULT_PORTS, millisecondsSetting, portSetting } from "@sextant/runtime";
import { z } from "zod";
import { DEFAULT_PROXY_IMAGE } from "./inject/inject.js";

/** The webhook's settings, from the environment. Names and defaults follow istiod's where it has them. */
export const webhookSettings = baseSettings
  .extend({
    /** /metrics and /ready. */
    HTTP_PORT: portSetting(DEFAULT_PORTS.webhook.http),
    /** /inject and /validate over HTTPS (istiod: 15017). */
    HTTPS_PORT: portSetting(DEFAULT_PORTS.webhook.https),
    /** The serving certificate chain (PEM); without it and TLS_KEY_FILE, /inject and /validate are not served. */
    TLS_CERT_FILE: z.string().min(1).optional(),
    /** The serving certificate's private key (PEM). */
    TLS_KEY_FILE: z.string().min(1).optional(),
    /** How often the certificate files are checked for rotation. */
    TLS_RELOAD_INTERVAL_MS: millisecondsSetting(5000),
    /** Largest AdmissionReview accepted, in bytes: an UPDATE carries the object twice. */
    MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(6 * 1024 * 1024),
    /** A replacement injection template (YAML); the bundled src/inject/sidecar-template.yaml when unset. */
    INJECTION_TEMPLATE_FILE: z.string().min(1).optional(),
    /** The sidecar image: the Sextant agent and Envoy (istiod: global.proxy.image). */
    SIDECAR_PROXY_IMAGE: z.string().min(1).default(DEFAULT_PROXY_IMAGE),
    /** This injector's revision (istiod: REVISION); `default` also serves istio-injection=enabled. */
    REVISION: z.string().min(1).default("default"),
    /** The cluster's DNS suffix. */
    DOMAIN_SUFFIX: z.string().min(1).default("cluster.local"),
    /** The SPIFFE trust domain. */
    TRUST_DOMAIN: z.string().min(1).default("cluster.local"),
    /** istiod: CLUSTER_ID. */
    CLUSTER_ID: z.string().min(1).default("Kubernetes"),
    /** The mesh id; the trust domain when unset. */
    MESH_ID: z.string().min(1).optional(),
    /** The CA the injected agent asks for certificates (istiod: CA_ADDR). */
    CA_ADDR: z.string().min(1).default("sextant-ca.istio-system.svc:8060"),
    /** Where the injected agent gets xDS (istiod: proxyConfig.discoveryAddress). */
    DISCOVERY_ADDRESS: z.string().min(1).default("sextant-push.istio-system.svc:15012"),
    /** A kubeconfig for patching the webhook configurations; unset: ~/.kube/config or in-cluster, as kubectl finds them. */
    KUBECONFIG: z.string().min(1).optional(),
    /** The MutatingWebhookConfiguration whose caBundle is kept current (istiod: istio-sidecar-injector); unset: none. */
    INJECTOR_WEBHOOK_CONFIG_NAME: z.string().min(1).optional(),
    /** The ValidatingWebhookConfiguration whose caBundle is kept current (istiod: istio-validator-<ns>); unset: none. */
    VALIDATION_WEBHOOK_CONFIG_NAME: z.string().min(1).optional(),
    /** How often the node list is read for ENABLE_NATIVE_SIDECARS=auto. */
    NODE_RESYNC_INTERVAL_MS: millisecondsSetting(60_000),
    /**
     * Inject the proxy as a native sidecar (an init container with restartPolicy Always), as
     * istiod's ENABLE_NATIVE_SIDECARS: true, false, or auto (its default: when the nodes' kubelets
     * are 1.33 or later; off while the webhook has no view of the nodes).
     */
    ENABLE_NATIVE_SIDECARS: z
      .enum(["true", "false", "auto"], { message: "must be true, false or auto" })
      .default("auto"),
  })
  .refine((s) => (s.TLS_CERT_FILE === undefined) === (s.TLS_KEY_FILE === undefined), {
    message: "TLS_CERT_FILE and TLS_KEY_FILE must be set together",
    path: ["TLS_KEY_FILE"],
  });
