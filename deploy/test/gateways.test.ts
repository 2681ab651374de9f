// Istio's ingress and egress gateways (deploy/gateways): the proxy image in
// router mode, with the environment the agent reads, Istio's labels and
// ports, never injected, and no access to anything it does not need.
import assert from "node:assert/strict";
import { posix } from "node:path";
import { describe, it } from "node:test";
import { agentReadsEnv, agentSettingsFromEnv, POD_REQUIRED_ENV, podPaths } from "@sextant/agent/pod-contract";
import {
  discoverySettings,
  gatewayDeploymentSettings,
  renderGatewayDeployment,
} from "@sextant/discovery/gateway-deployment";
import { parseSettings } from "@sextant/runtime";
import { DEFAULT_PROXY_IMAGE, injectionRequired, loadTemplate } from "@sextant/webhook/inject";
import {
  assertHardened,
  type Container,
  containerOf,
  envValue,
  find,
  type KubeObject,
  NAMESPACE,
  ofKind,
  render,
  type ServiceObject,
  selects,
  type Workload,
  workloadsOf,
} from "./helpers.js";

/** Istio's two gateways: their Deployment (and Service) names and the label Gateways select. */
const GATEWAYS = [
  { name: "istio-ingressgateway", istio: "ingressgateway", serviceType: "LoadBalancer" },
  { name: "istio-egressgateway", istio: "egressgateway", serviceType: "ClusterIP" },
] as const;

type Selector = {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
};

/** A label selector's verdict on a set of labels (matchLabels and the four operators). */
function selectorMatches(selector: Selector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return true;
  if (!selects(selector.matchLabels ?? {}, labels)) return false;
  return (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    const value = labels[key];
    if (operator === "In") return value !== undefined && values.includes(value);
    if (operator === "NotIn") return value === undefined || !values.includes(value);
    if (operator === "Exists") return value !== undefined;
    if (operator === "DoesNotExist") return value === undefined;
    throw new Error(`unknown operator ${operator}`);
  });
}

/** The container's environment as the kubelet resolves it, for a pod named `pod` on node-1. */
function resolvedEnv(
  container: Container,
  serviceAccount: string,
  namespace = NAMESPACE,
): Record<string, string> {
  const fields: Record<string, string> = {
    "metadata.name": "istio-gateway-5d9f7-x7k2p",
    "metadata.namespace": namespace,
    "status.podIP": "10.244.1.17",
    "spec.serviceAccountName": serviceAccount,
    "spec.nodeName": "node-1",
  };
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom as
      | { fieldRef?: { fieldPath: string }; resourceFieldRef?: { resource: string } }
      | undefined;
    if (variable.value !== undefined) env[variable.name] = variable.value;
    else if (from?.fieldRef && fields[from.fieldRef.fieldPath] !== undefined)
      env[variable.name] = fields[from.fieldRef.fieldPath] as string;
    // limits.cpu with the default divisor: whole cores, rounded up.
    else if (from?.resourceFieldRef?.resource === "limits.cpu") env[variable.name] = "2";
    else
      assert.fail(
        `${variable.name}: ${JSON.stringify(variable.valueFrom)} is not a field a kubelet resolves`,
      );
  }
  return env;
}

/** `$(VAR)` in an argument, as the kubelet expands it from the container's environment. */
const expand = (arg: string, env: Record<string, string>) =>
  arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);

type Volume = NonNullable<Workload["spec"]["template"]["spec"]["volumes"]>[number] & {
  emptyDir?: object;
  downwardAPI?: { items: Array<{ path: string; fieldRef: { fieldPath: string } }> };
};

/** Every file and socket the agent reads or serves is on a mount of the volume that provides it. */
function assertAgentMounts(pod: Workload["spec"]["template"], proxy: Container): void {
  const volumes = (pod.spec.volumes ?? []) as Volume[];
  for (const [setting, path] of Object.entries(podPaths())) {
    const mount = (proxy.volumeMounts ?? [])
      .filter((m) => `${path}/`.startsWith(`${m.mountPath.replace(/\/$/, "")}/`))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    assert.ok(mount, `${setting} (${path}) is on no volume mount`);
    const volume = volumes.find((v) => v.name === mount.name);
    assert.ok(volume, `${setting}: mount ${mount.name} has no volume`);
    const relative = posix.relative(mount.mountPath, path);
    if (setting === "CA_ROOT_CERT") {
      assert.equal(volume.configMap?.name, "istio-ca-root-cert");
      assert.equal(relative, "root-cert.pem");
    } else if (setting === "TOKEN_FILE") {
      const token = volume.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken;
      assert.deepEqual([token?.path, token?.audience], [relative, "istio-ca"]);
    } else if (setting === "POD_LABELS_FILE" || setting === "POD_ANNOTATIONS_FILE") {
      const item = volume.downwardAPI?.items.find((i) => i.path === relative);
      assert.equal(item?.fieldRef.fieldPath, `metadata.${relative}`);
    } else {
      assert.ok(volume.emptyDir, `${setting} (${path}) is written by the agent: an emptyDir`);
    }
  }
}

describe("deploy/gateways: Istio's ingress and egress gateways", () => {
  const objects = render("gateways");
  const controlPlane = render("overlays/production");

  it("renders both gateways, each a ServiceAccount, Deployment, Service, PodDisruptionBudget and autoscaler, nothing else", () => {
    const ids = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    const expected = GATEWAYS.flatMap(({ name }) => [
      `ServiceAccount/${name}-service-account`,
      `Deployment/${name}`,
      `Service/${name}`,
      `PodDisruptionBudget/${name}`,
      `HorizontalPodAutoscaler/${name}`,
    ]).sort();
    assert.deepEqual(ids, expected);
    for (const object of objects) assert.equal(object.metadata.namespace, NAMESPACE);
  });

  it("adds nothing the control plane already has", () => {
    const planeIds = new Set(controlPlane.map((o) => `${o.kind}/${o.metadata.name}`));
    for (const object of objects) assert.ok(!planeIds.has(`${object.kind}/${object.metadata.name}`));
  });

  for (const gateway of GATEWAYS) {
    describe(gateway.name, () => {
      const deployment = find<Workload>(objects, "Deployment", gateway.name);
      const pod = deployment.spec.template;
      const proxy = containerOf(deployment);
      const serviceAccount = `${gateway.name}-service-account`;
      const env = resolvedEnv(proxy, serviceAccount);

      it("runs the injected proxy image in router mode, for its own namespace's domain", () => {
        assert.equal(proxy.name, "istio-proxy");
        assert.equal(proxy.image, DEFAULT_PROXY_IMAGE);
        const args = (proxy.args ?? []).map((arg) => expand(arg, env));
        assert.deepEqual(args.slice(0, 2), ["proxy", "router"]);
        assert.equal(args[args.indexOf("--domain") + 1], `${NAMESPACE}.svc.${env.DOMAIN_SUFFIX}`);
      });

      it("carries Istio's gateway labels, which its Service, budget and Gateways select", () => {
        assert.equal(pod.metadata.labels.istio, gateway.istio);
        assert.equal(pod.metadata.labels.app, gateway.name);
        assert.ok(selects(deployment.spec.selector.matchLabels, pod.metadata.labels));
        const service = find<ServiceObject>(objects, "Service", gateway.name);
        assert.ok(selects(service.spec.selector, pod.metadata.labels));
        const budget = find<KubeObject & { spec: { selector: { matchLabels: Record<string, string> } } }>(
          objects,
          "PodDisruptionBudget",
          gateway.name,
        );
        assert.ok(selects(budget.spec.selector.matchLabels, pod.metadata.labels));
      });

      it("sets only variables the agent reads, and every one an injected pod must set", () => {
        for (const variable of proxy.env ?? [])
          assert.ok(agentReadsEnv(variable.name), `${variable.name} is set, but the agent does not read it`);
        for (const [name, why] of Object.entries(POD_REQUIRED_ENV))
          assert.ok(env[name], `${name} is not set (the agent needs it for ${why})`);
      });

      it("is the webhook's gateway form written out: its arguments, and no variable that form does not set", () => {
        const form = loadTemplate().gateway.proxyContainer as {
          args: string[];
          env: Array<{ name: string }>;
        };
        const formEnv = new Set(form.env.map((variable) => variable.name));
        for (const variable of proxy.env ?? [])
          assert.ok(formEnv.has(variable.name), `${variable.name} is not in the webhook's gateway form`);
        // The same flags, with the template's placeholders filled in.
        assert.equal(proxy.args?.length, form.args.length);
        form.args.forEach((arg, index) => {
          const pattern = new RegExp(`^${arg.replace(/\$\{\w+\}/g, ".+")}$`);
          assert.match(proxy.args?.[index] ?? "", pattern);
        });
      });

      it("points the agent at push's and ca's Services, on the ports they serve", () => {
        const settings = agentSettingsFromEnv(env);
        assert.equal(settings.POD_NAMESPACE, NAMESPACE);
        assert.equal(settings.SERVICE_ACCOUNT, serviceAccount);
        assert.equal(settings.NODE_METADATA.WORKLOAD_NAME, gateway.name);
        for (const [address, service, port] of [
          [settings.XDS_ADDR, "sextant-push", "tls-xds"],
          [settings.CA_ADDR, "sextant-ca", undefined],
        ] as const) {
          const target = find<ServiceObject>(controlPlane, "Service", service);
          const [host, portNumber] = address.split(":");
          assert.equal(host, `${service}.${NAMESPACE}.svc`);
          assert.ok(
            target.spec.ports.some((p) => p.port === Number(portNumber) && (!port || p.name === port)),
            `${service} serves no port ${portNumber}`,
          );
        }
      });

      it("mounts every file and socket the agent uses, from the volume that provides it", () => {
        assertAgentMounts(pod, proxy);
      });

      it("listens on 8080 and 8443, is ready on 15021 /healthz/ready, exports Envoy's metrics on 15090", () => {
        assert.deepEqual(
          (proxy.ports ?? []).map((p) => `${p.name}=${p.containerPort}`),
          ["http2=8080", "https=8443", "status-port=15021", "http-envoy-prom=15090"],
        );
        assert.deepEqual(proxy.readinessProbe?.httpGet, { path: "/healthz/ready", port: 15021 });
      });

      it(`is reached through a ${gateway.serviceType} Service: 80 to 8080, 443 to 8443`, () => {
        const service = find<ServiceObject & { spec: { type: string } }>(objects, "Service", gateway.name);
        assert.equal(service.spec.type, gateway.serviceType);
        const byPort = Object.fromEntries(service.spec.ports.map((p) => [p.port, p.targetPort]));
        assert.equal(byPort[80], 8080);
        assert.equal(byPort[443], 8443);
        const containerPorts = (proxy.ports ?? []).map((p) => p.containerPort);
        // Numeric targets: push binds a Gateway server's listener on its Service's targetPort.
        for (const { targetPort } of service.spec.ports)
          assert.ok(containerPorts.includes(Number(targetPort)));
      });

      it("runs as Istio's proxy uid 1337, non-root, read-only, no capabilities and no sysctl (no port below 1024)", () => {
        const security = pod.spec.securityContext as NonNullable<typeof pod.spec.securityContext> & {
          sysctls?: unknown[];
        };
        assert.equal(security.runAsNonRoot, true);
        assert.equal(security.runAsUser, 1337);
        assert.equal(security.seccompProfile?.type, "RuntimeDefault");
        assert.equal(security.sysctls, undefined);
        assert.deepEqual(proxy.securityContext, {
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
        for (const port of proxy.ports ?? []) assert.ok(port.containerPort >= 1024, `${port.name}`);
        assert.ok(
          proxy.resources?.requests?.cpu,
          "a CPU request, which the autoscaler's target is a share of",
        );
        assert.ok(proxy.resources?.requests?.memory);
      });

      it("is scaled by its autoscaler alone, from two replicas spread over zones and nodes, so its budget lets drains proceed", () => {
        assert.equal(deployment.spec.replicas, undefined, "the autoscaler owns the replica count");
        const hpa = find<
          KubeObject & {
            spec: {
              scaleTargetRef: { kind: string; name: string };
              minReplicas: number;
              maxReplicas: number;
            };
          }
        >(objects, "HorizontalPodAutoscaler", gateway.name);
        assert.deepEqual(
          [hpa.spec.scaleTargetRef.kind, hpa.spec.scaleTargetRef.name],
          ["Deployment", gateway.name],
        );
        assert.equal(hpa.spec.minReplicas, 2);
        assert.ok(hpa.spec.maxReplicas >= hpa.spec.minReplicas);
        const budget = find<KubeObject & { spec: { maxUnavailable?: number } }>(
          objects,
          "PodDisruptionBudget",
          gateway.name,
        );
        assert.equal(budget.spec.maxUnavailable, 1);
        const spread = pod.spec.topologySpreadConstraints ?? [];
        assert.deepEqual(
          spread.map((c) => c.topologyKey),
          ["topology.kubernetes.io/zone", "kubernetes.io/hostname"],
        );
        for (const constraint of spread)
          assert.ok(selects(constraint.labelSelector.matchLabels, pod.metadata.labels));
      });

      it("is never injected: its own label opts out, in a namespace labelled for injection too", () => {
        const decision = injectionRequired(
          { metadata: { labels: pod.metadata.labels }, spec: { containers: pod.spec.containers } },
          { namespace: NAMESPACE, namespaceLabels: { "istio-injection": "enabled" }, revision: "default" },
        );
        assert.deepEqual(decision, {
          inject: false,
          reason: "pod label sidecar.istio.io/inject refuses injection",
        });
        // Nor does the API server call the webhook for it: every injection webhook's objectSelector excludes it.
        for (const configuration of ofKind<
          KubeObject & { webhooks: Array<{ name: string; objectSelector?: Selector }> }
        >(controlPlane, "MutatingWebhookConfiguration"))
          for (const hook of configuration.webhooks)
            assert.ok(
              !selectorMatches(hook.objectSelector, pod.metadata.labels),
              `${hook.name} selects the gateway`,
            );
      });

      it("has no Kubernetes API access, no Secret, and cannot reach NATS", () => {
        const account = find<KubeObject & { automountServiceAccountToken?: boolean }>(
          objects,
          "ServiceAccount",
          serviceAccount,
        );
        assert.equal(account.automountServiceAccountToken, false);
        assert.equal(pod.spec.serviceAccountName, serviceAccount);
        assert.equal(pod.spec.automountServiceAccountToken, false);
        assert.deepEqual(
          (pod.spec.volumes ?? []).filter((v) => v.secret),
          [],
          "push serves the gateway's certificates over SDS: no Secret is mounted",
        );
        assert.deepEqual(
          (proxy.env ?? []).filter((v) => v.valueFrom?.secretKeyRef),
          [],
        );
        // deploy/nats's NetworkPolicy admits its client port to the pods it selects: not a gateway's.
        const policy = find<
          KubeObject & { spec: { ingress: Array<{ from?: Array<{ podSelector?: Selector }> }> } }
        >(controlPlane, "NetworkPolicy", "sextant-nats");
        for (const rule of policy.spec.ingress)
          for (const peer of rule.from ?? [])
            assert.ok(!selectorMatches(peer.podSelector, pod.metadata.labels), "the gateway may reach NATS");
      });
    });
  }

  it("the two differ only in their names, Service type and the ingress's status port", () => {
    const [ingress, egress] = GATEWAYS.map(({ name, istio }) =>
      objects
        .filter((o) => o.metadata.name.startsWith(name))
        .map((o) => JSON.parse(JSON.stringify(o).replaceAll(name, "GATEWAY").replaceAll(istio, "ISTIO")))
        .map((o) => {
          if (o.kind !== "Service") return o;
          const { type: _type, ports, ...spec } = o.spec;
          return {
            ...o,
            spec: { ...spec, ports: ports.filter((p: { name: string }) => p.name !== "status-port") },
          };
        }),
    );
    assert.deepEqual(egress, ingress);
  });

  it("deploy/gateways is the two components; workloads there are the gateways only", () => {
    assert.deepEqual(
      workloadsOf(objects)
        .map((w) => w.metadata.name)
        .sort(),
      GATEWAYS.map(({ name }) => name).sort(),
    );
  });
});

describe("Gateway API Gateways deployed by discovery (services/discovery src/gateway-deployment)", () => {
  const controlPlane = render("overlays/production");
  // Discovery's settings as its Deployment sets them (literal values; the rest are secrets and pod fields).
  const discovery = containerOf(find<Workload>(controlPlane, "Deployment", "sextant-discovery"));
  const literal = Object.fromEntries(
    (discovery.env ?? []).filter((v) => v.value !== undefined).map((v) => [v.name, v.value as string]),
  );
  const settings = parseSettings(discoverySettings, { ...literal, NATS_PASSWORD: "unused" });
  const gatewayNamespace = "shop";
  const objects = renderGatewayDeployment(
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { name: "web", namespace: gatewayNamespace, uid: "uid-1" },
      spec: {
        gatewayClassName: "istio",
        listeners: [
          { name: "http", port: 80, protocol: "HTTP" },
          { name: "https", port: 443, protocol: "HTTPS" },
        ],
      },
    },
    gatewayDeploymentSettings(settings),
  ) as unknown as KubeObject[];
  const deployment = find<Workload>(objects, "Deployment", "web-istio");
  const pod = deployment.spec.template;
  const proxy = containerOf(deployment);
  const env = resolvedEnv(proxy, "web-istio", gatewayNamespace);

  it("is a ServiceAccount, a Deployment and a Service, named <gateway>-<class>, in the Gateway's namespace", () => {
    assert.deepEqual(
      objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`),
      ["ServiceAccount/shop/web-istio", "Deployment/shop/web-istio", "Service/shop/web-istio"],
    );
  });

  it("passes the security checks of Sextant's own workloads", () => {
    assertHardened(deployment);
    // The one sysctl is the namespaced, safe one Istio's gateways set to bind ports below 1024 without a capability.
    const security = pod.spec.securityContext as { sysctls?: Array<{ name: string; value: string }> };
    assert.deepEqual(security.sysctls, [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }]);
    assert.deepEqual(
      (pod.spec.volumes ?? []).filter((v) => (v as { hostPath?: unknown }).hostPath || v.secret),
      [],
      "no host path and no Secret: push serves the gateway's certificates over SDS",
    );
    assert.deepEqual(
      (proxy.env ?? []).filter((v) => v.valueFrom?.secretKeyRef),
      [],
    );
  });

  it("has no Kubernetes API access: its only token is the projected istio-ca one", () => {
    const account = find<KubeObject & { automountServiceAccountToken?: boolean }>(
      objects,
      "ServiceAccount",
      "web-istio",
    );
    assert.equal(account.automountServiceAccountToken, false);
    assert.equal(pod.spec.serviceAccountName, "web-istio");
    assert.equal(pod.spec.automountServiceAccountToken, false);
    const audiences = (pod.spec.volumes ?? []).flatMap((v) =>
      (v.projected?.sources ?? []).map((s) => s.serviceAccountToken?.audience),
    );
    assert.deepEqual(audiences, ["istio-ca"]);
  });

  it("runs the webhook's proxy image in router mode, with only variables the agent reads and all it needs", () => {
    assert.equal(
      proxy.image,
      DEFAULT_PROXY_IMAGE,
      "discovery's SIDECAR_PROXY_IMAGE default is the webhook's",
    );
    const args = (proxy.args ?? []).map((arg) => expand(arg, env));
    assert.deepEqual(args.slice(0, 2), ["proxy", "router"]);
    assert.equal(args[args.indexOf("--domain") + 1], `${gatewayNamespace}.svc.${env.DOMAIN_SUFFIX}`);
    for (const variable of proxy.env ?? [])
      assert.ok(agentReadsEnv(variable.name), `${variable.name} is set, but the agent does not read it`);
    for (const [name, why] of Object.entries(POD_REQUIRED_ENV))
      assert.ok(env[name], `${name} is not set (the agent needs it for ${why})`);
    const formEnv = new Set(
      (loadTemplate().gateway.proxyContainer as { env: Array<{ name: string }> }).env.map((v) => v.name),
    );
    for (const variable of proxy.env ?? [])
      assert.ok(formEnv.has(variable.name), `${variable.name} is not in the webhook's gateway form`);
  });

  it("gets the image and addresses the webhook gives injected proxies", () => {
    const webhook = containerOf(find<Workload>(controlPlane, "Deployment", "sextant-webhook"));
    for (const name of ["SIDECAR_PROXY_IMAGE", "CA_ADDR", "DISCOVERY_ADDRESS"])
      assert.equal(envValue(discovery, name), envValue(webhook, name), name);
  });

  it("points the agent at push's and ca's Services, on the ports they serve", () => {
    const agent = agentSettingsFromEnv(env);
    assert.equal(agent.NODE_METADATA.WORKLOAD_NAME, "web-istio");
    for (const [address, service] of [
      [agent.XDS_ADDR, "sextant-push"],
      [agent.CA_ADDR, "sextant-ca"],
    ] as const) {
      const target = find<ServiceObject>(controlPlane, "Service", service);
      const [host, port] = address.split(":");
      assert.equal(host, `${service}.${NAMESPACE}.svc`);
      assert.ok(
        target.spec.ports.some((p) => p.port === Number(port)),
        `${service} serves no port ${port}`,
      );
    }
  });

  it("mounts every file and socket the agent uses, from the volume that provides it", () => {
    assertAgentMounts(pod, proxy);
  });

  it("is selected by its Service, whose ports are the listeners' and the status port, which the probes use", () => {
    const service = find<ServiceObject>(objects, "Service", "web-istio");
    assert.ok(selects(service.spec.selector, pod.metadata.labels));
    assert.ok(selects(deployment.spec.selector.matchLabels, pod.metadata.labels));
    assert.deepEqual(
      service.spec.ports.map((p) => p.port),
      [15021, 80, 443],
    );
    assert.equal(proxy.readinessProbe?.httpGet?.port, 15021);
    assert.ok((proxy.ports ?? []).some((p) => p.containerPort === 15021));
  });

  it("is never injected", () => {
    const decision = injectionRequired(
      { metadata: { labels: pod.metadata.labels }, spec: { containers: pod.spec.containers } },
      { namespace: gatewayNamespace, namespaceLabels: { "istio-injection": "enabled" }, revision: "default" },
    );
    assert.equal(decision.inject, false);
  });
});
