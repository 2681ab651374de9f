import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { repositoryRoot } from "@sextant/testing";
import { DEFAULT_PROXY_IMAGE, defaultInjectionConfig } from "@sextant/webhook/inject";
import {
  assertHardened,
  containerOf,
  deploymentOf,
  envValue,
  find,
  type KubeObject,
  kustomizations,
  NAMESPACE,
  ofKind,
  render,
  SERVICES,
  type ServiceObject,
  selects,
  type Workload,
  workloadsOf,
} from "./helpers.js";

const SERVICE_OVERLAYS = SERVICES.flatMap((service) => [
  `${service}/base`,
  `${service}/overlays/dev`,
  `${service}/overlays/production`,
]);
const WHOLE_PLANE = ["overlays/dev", "overlays/production"];

describe("every kustomization renders", () => {
  it("finds a base, a dev and a production overlay per service, and the shared pieces", () => {
    const all = kustomizations();
    for (const expected of [...SERVICE_OVERLAYS, ...WHOLE_PLANE, "crds", "nats", "namespace", "gateways"]) {
      assert.ok(all.includes(expected), `deploy/${expected}/kustomization.yaml is missing`);
    }
  });

  for (const dir of kustomizations()) {
    it(`kustomize build deploy/${dir}`, () => {
      const objects = render(dir);
      assert.ok(objects.length > 0, `deploy/${dir} renders nothing`);
      const names = objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`);
      assert.deepEqual(
        names.filter((name, i) => names.indexOf(name) !== i),
        [],
        "an object is rendered twice",
      );
      for (const object of objects) {
        // Cluster-scoped kinds have no namespace; everything else is in the control plane's.
        if (CLUSTER_SCOPED.has(object.kind)) assert.equal(object.metadata.namespace, undefined);
        else assert.equal(object.metadata.namespace, NAMESPACE, `${object.kind} ${object.metadata.name}`);
      }
    });
  }

  it("renders push alone: kustomize build deploy/push/overlays/production", () => {
    const workloads = workloadsOf(render("push/overlays/production"));
    assert.deepEqual(
      workloads.map((w) => w.metadata.name),
      ["sextant-push"],
    );
  });

  it("composes the whole control plane in deploy/overlays/<env>", () => {
    for (const dir of WHOLE_PLANE) {
      const objects = render(dir);
      assert.deepEqual(
        workloadsOf(objects)
          .map((w) => w.metadata.name)
          .sort(),
        [...SERVICES.map((s) => `sextant-${s}`), "sextant-nats"].sort(),
      );
      assert.ok(find(objects, "Namespace", NAMESPACE));
      // The whole plane is exactly its parts: nothing is added or lost in composing.
      const parts = [
        "namespace",
        "crds",
        "nats",
        ...SERVICES.map((s) => `${s}/overlays/${dir.split("/")[1]}`),
      ].flatMap(render);
      assert.deepEqual(sortedIds(objects), sortedIds(parts));
    }
  });
});

const CLUSTER_SCOPED = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ClusterRole",
  "ClusterRoleBinding",
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
]);

const sortedIds = (objects: KubeObject[]) =>
  objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`).sort();

describe("images and tags", () => {
  // Every image of every render, with where it comes from and the component it should be.
  const images = () =>
    kustomizations().flatMap((dir) =>
      workloadsOf(render(dir)).flatMap((workload) => {
        const container = containerOf(workload);
        // Istio's gateways (deploy/gateways) run the proxy image, as injected sidecars do.
        const component = /^istio-(ingress|egress)gateway$/.test(workload.metadata.name)
          ? "proxy"
          : workload.metadata.name.replace(/^sextant-/, "");
        const found = [{ where: `${dir}: ${workload.metadata.name}`, component, image: container.image }];
        if (component === "webhook" || component === "discovery") {
          // The image the webhook injects beside workloads, and discovery deploys for Gateways, ships with the control plane.
          found.push({
            where: `${dir}: SIDECAR_PROXY_IMAGE`,
            component: "proxy",
            image: envValue(container, "SIDECAR_PROXY_IMAGE"),
          });
        }
        return found;
      }),
    );

  it("gives every Sextant image the name of its component and one shared, pinned tag", () => {
    const sextant = images().filter(({ image }) => image.startsWith("sextant/"));
    const tags = new Set(sextant.map(({ image }) => image.split(":")[1]));
    assert.equal(tags.size, 1, `Sextant images disagree on their tag: ${[...tags].join(", ")}`);
    const [tag] = tags;
    assert.ok(tag && tag !== "latest", "the tag must be pinned, not latest or missing");
    for (const { where, component, image } of sextant)
      assert.equal(image, `sextant/${component}:${tag}`, where);
  });

  it("the webhook injects, by default, the proxy image deployed here, tagged with the agent's version", () => {
    const { version } = JSON.parse(
      readFileSync(`${repositoryRoot()}/services/agent/package.json`, "utf8"),
    ) as { version: string };
    assert.equal(DEFAULT_PROXY_IMAGE, `sextant/proxy:${version}`);
    assert.equal(defaultInjectionConfig().proxyImage, DEFAULT_PROXY_IMAGE);
    for (const { where, image } of images().filter(({ component }) => component === "proxy"))
      assert.equal(image, DEFAULT_PROXY_IMAGE, where);
  });

  it("pins every other image to a version and uses one per image name", () => {
    const others = images().filter(({ image }) => !image.startsWith("sextant/"));
    assert.ok(others.length > 0);
    const byName = new Map<string, Set<string>>();
    for (const { where, image } of others) {
      const [name, tag] = image.split(":");
      assert.ok(name && tag && tag !== "latest", `${where}: ${image} must name a version`);
      byName.set(name, (byName.get(name) ?? new Set()).add(tag));
    }
    for (const [name, tags] of byName) assert.equal(tags.size, 1, `${name} has tags ${[...tags].join(", ")}`);
  });
});

describe("workloads", () => {
  const production = render("overlays/production");
  const dev = render("overlays/dev");

  for (const workload of workloadsOf(production)) {
    const name = workload.metadata.name;
    it(`${name}: non-root, read-only root, no privilege escalation, no capabilities, resource requests`, () => {
      assertHardened(workload);
    });

    it(`${name}: its selector selects its pods, which a PodDisruptionBudget covers`, () => {
      const labels = workload.spec.template.metadata.labels;
      assert.ok(selects(workload.spec.selector.matchLabels, labels));
      assert.equal(
        labels["app.kubernetes.io/part-of"],
        "sextant",
        "deploy/nats's NetworkPolicy admits part-of=sextant",
      );
      const budgets = ofKind<KubeObject & { spec: { selector: { matchLabels: Record<string, string> } } }>(
        production,
        "PodDisruptionBudget",
      ).filter((pdb) => selects(pdb.spec.selector.matchLabels, labels));
      assert.equal(budgets.length, 1);
    });
  }

  it("every Service selects a workload's pods, and its target ports are named container ports", () => {
    for (const service of ofKind<ServiceObject>(production, "Service")) {
      const targets = workloadsOf(production).filter((w) =>
        selects(service.spec.selector, w.spec.template.metadata.labels),
      );
      assert.equal(targets.length, 1, `Service ${service.metadata.name} selects ${targets.length} workloads`);
      const ports = containerOf(targets[0] as Workload).ports ?? [];
      for (const port of service.spec.ports) {
        assert.ok(
          ports.some((p) => p.name === port.targetPort),
          `Service ${service.metadata.name} port ${port.name} targets ${port.targetPort}, no container port has that name`,
        );
      }
    }
  });

  it("dev runs one replica of each service", () => {
    for (const service of SERVICES) assert.equal(deploymentOf(dev, service).spec.replicas, 1, service);
    assert.equal(ofKind(dev, "HorizontalPodAutoscaler").length, 0);
  });

  it("production autoscales push from 2 to 10 replicas on CPU and spreads it over zones and nodes", () => {
    const push = deploymentOf(production, "push");
    assert.equal(push.spec.replicas, undefined, "the autoscaler owns push's replica count");
    const hpa = find<
      KubeObject & {
        spec: {
          scaleTargetRef: { kind: string; name: string };
          minReplicas: number;
          maxReplicas: number;
          metrics: Array<{ type: string; resource?: { name: string } }>;
        };
      }
    >(production, "HorizontalPodAutoscaler", "sextant-push");
    assert.equal(hpa.apiVersion, "autoscaling/v2");
    assert.deepEqual(hpa.spec.scaleTargetRef, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      name: "sextant-push",
    });
    assert.equal(hpa.spec.minReplicas, 2);
    assert.equal(hpa.spec.maxReplicas, 10);
    assert.deepEqual(
      hpa.spec.metrics.map((m) => `${m.type}/${m.resource?.name}`),
      ["Resource/cpu"],
    );
    const spread = push.spec.template.spec.topologySpreadConstraints ?? [];
    assert.deepEqual(
      spread.map((c) => c.topologyKey),
      ["topology.kubernetes.io/zone", "kubernetes.io/hostname"],
    );
    for (const constraint of spread) {
      assert.ok(selects(constraint.labelSelector.matchLabels, push.spec.template.metadata.labels));
    }
  });

  it("production runs two replicas of the other services, kept apart by anti-affinity", () => {
    for (const service of SERVICES.filter((s) => s !== "push")) {
      const deployment = deploymentOf(production, service);
      assert.equal(deployment.spec.replicas, 2, service);
      const terms =
        deployment.spec.template.spec.affinity?.podAntiAffinity
          ?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
      assert.ok(
        terms.some(
          ({ podAffinityTerm }) =>
            podAffinityTerm.topologyKey === "kubernetes.io/hostname" &&
            selects(podAffinityTerm.labelSelector.matchLabels, deployment.spec.template.metadata.labels),
        ),
        `${service} has no anti-affinity to its own pods across nodes`,
      );
    }
  });
});
