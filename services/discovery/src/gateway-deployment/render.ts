// The objects istiod's gateway deployment controller makes for a Gateway API
// Gateway (its `kube-gateway` template), as plain Kubernetes JSON: a
// ServiceAccount, a Deployment of the proxy image in router mode, and a
// Service. Pure: the runner (gateway-deployer.ts) decides when to apply them.
import { ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "@sextant/gateway-api";
import type { DiscoverySettings } from "../settings.js";

/** The parts of a gateway.networking.k8s.io/v1 Gateway the deployment depends on. */
export interface KubeGateway {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: {
    readonly gatewayClassName?: string;
    readonly addresses?: ReadonlyArray<{ readonly type?: string; readonly value?: string }>;
    readonly listeners?: ReadonlyArray<{
      readonly name?: string;
      readonly port?: number;
      readonly protocol?: string;
    }>;
    readonly infrastructure?: {
      readonly labels?: Readonly<Record<string, string>>;
      readonly annotations?: Readonly<Record<string, string>>;
    };
  };
}

/** A Kubernetes object as applied: apiVersion, kind, metadata and the rest. */
export type KubeManifest = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    ownerReferences: Array<Record<string, unknown>>;
  };
} & Record<string, unknown>;

/** What the rendered objects take from discovery's settings (the values the webhook's template uses). */
export interface GatewayDeploymentSettings {
  /** The proxy image: the Sextant agent and Envoy (webhook: SIDECAR_PROXY_IMAGE). */
  readonly proxyImage: string;
  /** Where the agent asks for certificates (CA_ADDR). */
  readonly caAddress: string;
  /** Where the agent gets xDS: push's mTLS port (ProxyConfig discoveryAddress). */
  readonly discoveryAddress: string;
  readonly domainSuffix: string;
  readonly trustDomain: string;
  /** The mesh id; the trust domain when unset (as the webhook). */
  readonly meshId?: string;
  readonly clusterId: string;
  /** The network of workloads no label places (NETWORK); the Gateway's `topology.istio.io/network` label wins. */
  readonly network: string;
}

/** What a deployed Gateway's pods are given, from discovery's settings: the values the webhook gives injected pods. */
export function gatewayDeploymentSettings(settings: DiscoverySettings): GatewayDeploymentSettings {
  return {
    proxyImage: settings.SIDECAR_PROXY_IMAGE,
    caAddress: settings.CA_ADDR,
    discoveryAddress: settings.DISCOVERY_ADDRESS,
    domainSuffix: settings.DOMAIN_SUFFIX,
    trustDomain: settings.TRUST_DOMAIN,
    ...(settings.MESH_ID ? { meshId: settings.MESH_ID } : {}),
    clusterId: settings.CLUSTER_ID,
    network: settings.NETWORK,
  };
}

/** The GatewayClass names that need no GatewayClass object (istiod's built-in classes): `istio`, and Sextant's `sextant`. */
export const BUILTIN_GATEWAY_CLASSES: Readonly<Record<string, string>> = {
  istio: ISTIO_CONTROLLER,
  sextant: SEXTANT_CONTROLLER,
};

/** The controllerNames whose Gateways get a deployment. */
export const DEPLOYING_CONTROLLERS: ReadonlySet<string> = new Set([ISTIO_CONTROLLER, SEXTANT_CONTROLLER]);

/**
 * The field manager of every apply: Istio's (istiod's PILOT_GATEWAY_API_CONTROLLER_NAME, whatever the
 * class), so that objects istiod created are taken over as they are, and istiod would take Sextant's
 * over the same way.
 */
export const FIELD_MANAGER = ISTIO_CONTROLLER;
/** Marks an object as the gateway controller's; its value is the class's controllerName with dashes for slashes. */
export const MANAGED_LABEL = "gateway.istio.io/managed";

const GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name";
const GATEWAY_CLASS_LABEL = "gateway.networking.k8s.io/gateway-class-name";
/** Overrides of the Deployment/Service name and of the ServiceAccount name (Istio's annotations). */
const NAME_OVERRIDE = "gateway.istio.io/name-override";
const SERVICE_ACCOUNT_OVERRIDE = "gateway.istio.io/service-account";
const SERVICE_TYPE_ANNOTATION = "networking.istio.io/service-type";
const NETWORK_LABEL = "topology.istio.io/network";
/** Gateway annotations that are about the Gateway itself and never copied to what it owns. */
const OMITTED_ANNOTATIONS = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  NAME_OVERRIDE,
  SERVICE_ACCOUNT_OVERRIDE,
  "gateway.istio.io/controller-version",
]);
const STATUS_PORT = 15021;

/**
 * Whether Sextant deploys this Gateway, as istiod's IsManaged: with no
 * `spec.addresses`, or exactly one IP address (the Service then asks for it
 * as its loadBalancerIP). A hostname, several addresses or a named address
 * point at a deployment the user runs.
 */
export function isManaged(gateway: KubeGateway): boolean {
  const addresses = gateway.spec?.addresses ?? [];
  if (addresses.length === 0) return true;
  if (addresses.length > 1) return false;
  const type = addresses[0]?.type;
  return type === undefined || type === "IPAddress";
}

/** The names istiod gives the objects: `<gateway>-<class>`, unless the Gateway's annotations override them. */
export function deploymentNames(gateway: KubeGateway): { deployment: string; serviceAccount: string } {
  const defaultName = `${gateway.metadata?.name ?? ""}-${gateway.spec?.gatewayClassName ?? ""}`;
  const annotations = gateway.metadata?.annotations ?? {};
  return {
    deployment: annotations[NAME_OVERRIDE] || defaultName,
    serviceAccount: annotations[SERVICE_ACCOUNT_OVERRIDE] || defaultName,
  };
}

/**
 * The labels or annotations copied to every object: `spec.infrastructure`'s
 * if it sets them, else the Gateway's own (istiod's default,
 * PILOT_ENABLE_GATEWAY_API_COPY_LABELS_ANNOTATIONS). Keys under
 * `gateway.networking.k8s.io/` are the API's own and never copied from
 * `infrastructure`.
 */
function infrastructureMetadata(
  gateway: KubeGateway,
  which: "labels" | "annotations",
): Record<string, string> {
  const fromInfrastructure = gateway.spec?.infrastructure?.[which];
  if (fromInfrastructure) {
    return Object.fromEntries(
      Object.entries(fromInfrastructure).filter(([key]) => !key.startsWith("gateway.networking.k8s.io/")),
    );
  }
  return { ...(gateway.metadata?.[which] ?? {}) };
}

/** A listener name as a Service port name: no dots, at most 63 characters (istiod's sanitizeListenerNameForPort). */
function portName(listenerName: string): string {
  return listenerName.replaceAll(".", "-").slice(0, 63);
}

/**
 * The Service's ports, as istiod's extractServicePorts: the status port
 * first, then one per listener port (the first listener on a port names
 * it), with the listener's protocol, lower-cased, as appProtocol.
 */
export function servicePorts(gateway: KubeGateway): Array<Record<string, unknown>> {
  const ports: Array<Record<string, unknown>> = [
    { name: "status-port", port: STATUS_PORT, protocol: "TCP", appProtocol: "tcp" },
  ];
  const seen = new Set<number>();
  for (const [index, listener] of (gateway.spec?.listeners ?? []).entries()) {
    const port = listener.port;
    if (port === undefined || seen.has(port)) continue;
    seen.add(port);
    const protocol = (listener.protocol ?? "").toLowerCase();
    const name = portName(listener.name ?? "") || `${protocol}-${index}`;
    ports.push({ name, port, protocol: "TCP", appProtocol: protocol });
  }
  return ports;
}

/** Sorted keys, so that equal inputs give byte-equal output (goldens, and no needless applies). */
function sorted(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

const fieldEnv = (name: string, fieldPath: string) => ({ name, valueFrom: { fieldRef: { fieldPath } } });

/**
 * The ServiceAccount, Deployment and Service of a Gateway of a class of
 * `controller`, in that order
 * (the order they are applied: the pods' identity exists before the pods).
 * Every object carries the Gateway's infrastructure labels and annotations,
 * the gateway-name and class labels, `gateway.istio.io/managed`, and an
 * owner reference to the Gateway, so Kubernetes' garbage collector removes
 * them with it.
 */
export function renderGatewayDeployment(
  gateway: KubeGateway,
  settings: GatewayDeploymentSettings,
  controller: string = ISTIO_CONTROLLER,
): KubeManifest[] {
  const name = gateway.metadata?.name ?? "";
  const namespace = gateway.metadata?.namespace ?? "";
  const className = gateway.spec?.gatewayClassName ?? "";
  const names = deploymentNames(gateway);
  const infraLabels = infrastructureMetadata(gateway, "labels");
  const annotations = sorted(
    Object.fromEntries(
      Object.entries(infrastructureMetadata(gateway, "annotations")).filter(
        ([key]) => !OMITTED_ANNOTATIONS.has(key),
      ),
    ),
  );
  const labels = sorted({
    ...infraLabels,
    [GATEWAY_NAME_LABEL]: name,
    [GATEWAY_CLASS_LABEL]: className,
    [MANAGED_LABEL]: controller.replaceAll("/", "-"),
  });
  const metadata = (objectName: string) => ({
    name: objectName,
    namespace,
    labels,
    annotations,
    // controller: the Gateway is the one object that manages these; no blockOwnerDeletion, which
    // would need update on gateways/finalizers where the OwnerReferencesPermissionEnforcement plugin runs.
    ownerReferences: [
      {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        name,
        uid: gateway.metadata?.uid ?? "",
        controller: true,
      },
    ],
  });

  const serviceAccount: KubeManifest = {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: metadata(names.serviceAccount),
    // The proxy's one credential is the projected istio-ca token; it never calls the Kubernetes API.
    automountServiceAccountToken: false,
  };

  const network = infraLabels[NETWORK_LABEL] || settings.network;
  const proxyConfig = JSON.stringify({ discoveryAddress: settings.discoveryAddress });
  const deployment: KubeManifest = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: metadata(names.deployment),
    spec: {
      selector: { matchLabels: { [GATEWAY_NAME_LABEL]: name } },
      template: {
        metadata: {
          annotations: sorted({
            ...annotations,
            "istio.io/rev": "default",
            // The agent's merged metrics (Envoy's and its own), as Istio's gateways announce them.
            "prometheus.io/path": "/stats/prometheus",
            "prometheus.io/port": "15020",
            "prometheus.io/scrape": "true",
          }),
          labels: sorted({
            "sidecar.istio.io/inject": "false",
            "service.istio.io/canonical-name": names.deployment,
            "service.istio.io/canonical-revision": "latest",
            ...labels,
          }),
        },
        spec: {
          serviceAccountName: names.serviceAccount,
          automountServiceAccountToken: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1337,
            runAsGroup: 1337,
            // Group-owns the projected token, so uid 1337 can read it.
            fsGroup: 1337,
            seccompProfile: { type: "RuntimeDefault" },
            // Listeners bind their own port (80, 443): Istio's way to let a non-root proxy without
            // NET_BIND_SERVICE bind ports below 1024. A namespaced, "safe" sysctl.
            sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }],
          },
          containers: [
            {
              name: "istio-proxy",
              image: settings.proxyImage,
              args: [
                "proxy",
                "router",
                "--domain",
                `$(POD_NAMESPACE).svc.${settings.domainSuffix}`,
                "--proxyLogLevel=warning",
                "--proxyComponentLogLevel=misc:error",
                "--log_output_level=default:info",
              ],
              ports: [
                { name: "metrics", containerPort: 15020, protocol: "TCP" },
                { name: "status-port", containerPort: STATUS_PORT, protocol: "TCP" },
                { name: "http-envoy-prom", containerPort: 15090, protocol: "TCP" },
              ],
              // Every name is one the agent reads (services/agent src/pod/env-contract.ts; the test checks it).
              env: [
                { name: "CA_ADDR", value: settings.caAddress },
                { name: "PROXY_CONFIG", value: proxyConfig },
                { name: "DOMAIN_SUFFIX", value: settings.domainSuffix },
                { name: "TRUST_DOMAIN", value: settings.trustDomain },
                fieldEnv("POD_NAME", "metadata.name"),
                fieldEnv("POD_NAMESPACE", "metadata.namespace"),
                fieldEnv("INSTANCE_IP", "status.podIP"),
                fieldEnv("SERVICE_ACCOUNT", "spec.serviceAccountName"),
                { name: "ISTIO_CPU_LIMIT", valueFrom: { resourceFieldRef: { resource: "limits.cpu" } } },
                { name: "ISTIO_META_CLUSTER_ID", value: settings.clusterId },
                { name: "ISTIO_META_MESH_ID", value: settings.meshId ?? settings.trustDomain },
                fieldEnv("ISTIO_META_NODE_NAME", "spec.nodeName"),
                ...(network ? [{ name: "ISTIO_META_NETWORK", value: network }] : []),
                { name: "ISTIO_META_WORKLOAD_NAME", value: names.deployment },
                {
                  name: "ISTIO_META_OWNER",
                  value: `kubernetes://apis/apps/v1/namespaces/${namespace}/deployments/${names.deployment}`,
                },
              ],
              // Istio's probes: Envoy's /healthz/ready listener on the status port, routed to the agent.
              startupProbe: {
                httpGet: { path: "/healthz/ready", port: STATUS_PORT, scheme: "HTTP" },
                initialDelaySeconds: 1,
                periodSeconds: 1,
                timeoutSeconds: 1,
                successThreshold: 1,
                failureThreshold: 30,
              },
              readinessProbe: {
                httpGet: { path: "/healthz/ready", port: STATUS_PORT, scheme: "HTTP" },
                initialDelaySeconds: 0,
                periodSeconds: 15,
                timeoutSeconds: 1,
                successThreshold: 1,
                failureThreshold: 4,
              },
              // Istio's proxy defaults (global.proxy.resources).
              resources: {
                requests: { cpu: "100m", memory: "128Mi" },
                limits: { cpu: "2", memory: "1Gi" },
              },
              // The uid and gid are the pod's (Istio's proxy user, 1337).
              securityContext: {
                runAsNonRoot: true,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ["ALL"] },
              },
              volumeMounts: [
                { name: "workload-socket", mountPath: "/var/run/secrets/workload-spiffe-uds" },
                { name: "credential-socket", mountPath: "/var/run/secrets/credential-uds" },
                { name: "workload-certs", mountPath: "/var/run/secrets/workload-spiffe-credentials" },
                { name: "istiod-ca-cert", mountPath: "/var/run/secrets/istio", readOnly: true },
                { name: "istio-data", mountPath: "/var/lib/istio/data" },
                { name: "istio-envoy", mountPath: "/etc/istio/proxy" },
                { name: "istio-token", mountPath: "/var/run/secrets/tokens", readOnly: true },
                { name: "istio-podinfo", mountPath: "/etc/istio/pod", readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: "workload-socket", emptyDir: {} },
            { name: "credential-socket", emptyDir: {} },
            { name: "workload-certs", emptyDir: {} },
            { name: "istio-envoy", emptyDir: { medium: "Memory" } },
            { name: "istio-data", emptyDir: {} },
            {
              name: "istio-podinfo",
              downwardAPI: {
                items: [
                  { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                  { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
                ],
              },
            },
            // What the agent shows ca and push: a short-lived token for the istio-ca audience.
            {
              name: "istio-token",
              projected: {
                sources: [
                  {
                    serviceAccountToken: {
                      audience: "istio-ca",
                      expirationSeconds: 43200,
                      path: "istio-token",
                    },
                  },
                ],
              },
            },
            // The mesh root, which ca's namespace controller publishes in every namespace.
            { name: "istiod-ca-cert", configMap: { name: "istio-ca-root-cert" } },
          ],
        },
      },
    },
  };

  const serviceType = gateway.metadata?.annotations?.[SERVICE_TYPE_ANNOTATION] || "LoadBalancer";
  const address = gateway.spec?.addresses?.[0]?.value;
  const service: KubeManifest = {
    apiVersion: "v1",
    kind: "Service",
    metadata: metadata(names.deployment),
    spec: {
      ipFamilyPolicy: "PreferDualStack",
      ports: servicePorts(gateway),
      selector: { [GATEWAY_NAME_LABEL]: name },
      ...(address && serviceType === "LoadBalancer" ? { loadBalancerIP: address } : {}),
      type: serviceType,
    },
  };
  return [serviceAccount, deployment, service];
}
