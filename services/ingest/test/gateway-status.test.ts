import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Buckets } from "@sextant/bus";
import type {
  GatewayApiCondition,
  GatewayApiInput,
  GatewayApiOutput,
  GatewayApiStatus,
} from "@sextant/gateway-api";
import { configKey } from "@sextant/model";
import { createLogger } from "@sextant/observability";
import { CredentialPresence, Service } from "@sextant/proto";
import { GatewayStatusWriter } from "../src/gateway-status/gateway-status-writer.js";
import {
  mergedRouteParents,
  statusFieldsUpToDate,
  statusForGeneration,
  withTransitionTimes,
} from "../src/gateway-status/status-object.js";
import { ConfigStore } from "../src/store/config-store.js";
import { startNatsWithClient, storedResource } from "./harness.js";

const T0 = "2026-01-01T00:00:00Z";
const T1 = "2026-01-01T00:05:00Z";

type Truth = "True" | "False";

const condition = (
  type: string,
  status: Truth,
  reason = type,
  observedGeneration = 1,
): GatewayApiCondition => ({
  type,
  status,
  reason,
  message: `${type} is ${status}`,
  observedGeneration,
});

const gatewayStatus = (programmed: Truth, listenerResolved: Truth) => ({
  addresses: [{ type: "Hostname", value: "gw-istio.shop.svc.cluster.local" }],
  conditions: [condition("Accepted", "True"), condition("Programmed", programmed)],
  listeners: [
    {
      name: "http",
      attachedRoutes: 1,
      supportedKinds: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute" }],
      conditions: [condition("Accepted", "True"), condition("ResolvedRefs", listenerResolved)],
    },
  ],
});

const parent = (name: string, resolved: Truth, controllerName = "istio.io/gateway-controller") => ({
  parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", name, namespace: "shop" },
  controllerName,
  conditions: [condition("Accepted", "True"), condition("ResolvedRefs", resolved)],
});

describe("Gateway API status: lastTransitionTime", () => {
  it("is set on every condition of a first status", () => {
    const stamped = withTransitionTimes(gatewayStatus("True", "True"), undefined, T0) as ReturnType<
      typeof gatewayStatus
    >;
    const times = [...stamped.conditions, ...stamped.listeners[0]!.conditions].map(
      (c) => (c as { lastTransitionTime?: string }).lastTransitionTime,
    );
    assert.deepEqual(times, [T0, T0, T0, T0]);
    assert.deepEqual(stamped.addresses, gatewayStatus("True", "True").addresses);
  });

  it("is kept while a condition's status stays (even if its reason or message changes), and moves when it changes", () => {
    const first = withTransitionTimes(gatewayStatus("True", "True"), undefined, T0);
    const changed = gatewayStatus("True", "False");
    changed.conditions[0] = { ...condition("Accepted", "True", "Accepted", 2), message: "new text" };
    const second = withTransitionTimes(changed, first, T1) as ReturnType<typeof gatewayStatus>;
    const time = (c: object) => (c as { lastTransitionTime: string }).lastTransitionTime;
    assert.deepEqual(second.conditions.map(time), [T0, T0]);
    // The listener's ResolvedRefs flipped; its Accepted (same type as the Gateway's) did not.
    assert.deepEqual(second.listeners[0]!.conditions.map(time), [T0, T1]);
    assert.equal(second.conditions[0]!.message, "new text");
  });

  it("matches route parents by parentRef and controller, whatever their order or field order", () => {
    const first = withTransitionTimes({ parents: [parent("a", "True"), parent("b", "True")] }, undefined, T0);
    const reordered = parent("a", "False");
    reordered.parentRef = {
      name: "a",
      namespace: "shop",
      kind: "Gateway",
      group: "gateway.networking.k8s.io",
    };
    const second = withTransitionTimes({ parents: [parent("b", "True"), reordered] }, first, T1) as {
      parents: Array<{ conditions: Array<{ lastTransitionTime: string }> }>;
    };
    assert.deepEqual(
      second.parents.map((p) => p.conditions.map((c) => c.lastTransitionTime)),
      [
        [T0, T0],
        [T0, T1],
      ],
    );
  });

  it("is a new time for a parent seen first, even with conditions like another parent's", () => {
    const first = withTransitionTimes({ parents: [parent("a", "True")] }, undefined, T0);
    const second = withTransitionTimes(
      { parents: [parent("a", "True"), parent("b", "True")] },
      first,
      T1,
    ) as {
      parents: Array<{ conditions: Array<{ lastTransitionTime: string }> }>;
    };
    assert.deepEqual(
      second.parents[1]!.conditions.map((c) => c.lastTransitionTime),
      [T1, T1],
    );
    // Stamping again with nothing changed gives the very same object: nothing to write.
    assert.deepEqual(
      withTransitionTimes({ parents: [parent("a", "True"), parent("b", "True")] }, second, "later"),
      second,
    );
  });
});

describe("Gateway API status: writing to a Kubernetes object", () => {
  it("reports the object's metadata.generation in observedGeneration, once the status is about the stored generation", () => {
    const stored = withTransitionTimes({ parents: [parent("a", "True")] }, undefined, T0);
    const written = statusForGeneration(stored, 1, 7) as { parents: Array<{ conditions: object[] }> };
    assert.deepEqual(
      written.parents[0]!.conditions.map((c) => (c as { observedGeneration: number }).observedGeneration),
      [7, 7],
    );
    assert.equal(statusForGeneration(stored, 2, 8), undefined);
  });

  it("keeps other controllers' route parents and replaces Sextant's own", () => {
    const other = parent("theirs", "True", "example.com/other-controller");
    const current = [parent("old", "True"), other, parent("old", "True", "sextant.io/gateway-controller")];
    assert.deepEqual(mergedRouteParents(current, [parent("a", "False")]), [other, parent("a", "False")]);
    assert.deepEqual(mergedRouteParents(undefined, []), []);
  });

  it("compares only the fields Sextant writes; an absent list equals an empty one", () => {
    const desired = { addresses: [], conditions: [condition("Accepted", "True")] };
    assert.ok(statusFieldsUpToDate({ conditions: [condition("Accepted", "True")], extra: 1 }, desired));
    assert.ok(!statusFieldsUpToDate({ conditions: [condition("Accepted", "False")] }, desired));
    assert.ok(!statusFieldsUpToDate(undefined, desired));
  });
});

describe("Gateway API status: the writer and sextant-config-status", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let store: ConfigStore;
  before(async () => {
    env = await startNatsWithClient();
    store = new ConfigStore(() => env.bus);
  });
  after(() => env?.close());

  const route = storedResource(
    { kind: "HTTPRoute", apiVersion: "gateway.networking.k8s.io/v1", name: "web", namespace: "shop" },
    { parentRefs: [{ name: "a" }] },
  );
  const virtualService = storedResource(
    { kind: "VirtualService", apiVersion: "networking.istio.io/v1", name: "vs", namespace: "shop" },
    { hosts: ["vs"] },
  );
  /** A writer (a replica) whose conversion gives the route the status `resolved` says, at time `now`. */
  const writer = (status: () => GatewayApiStatus | undefined, now: string) =>
    new GatewayStatusWriter({
      store,
      logger: createLogger({ service: "test", level: "silent" }),
      domainSuffix: "cluster.local",
      now: () => now,
      convert: (): GatewayApiOutput => {
        const computed = status();
        return {
          gateways: [],
          virtualServices: [],
          destinationRules: [],
          statuses: new Map(computed ? [[configKey(route), computed]] : []),
        };
      },
    });
  /** A writer (a replica) that records the conversion's input and computes no status. */
  const recordingWriter = () => {
    let input: GatewayApiInput | undefined;
    const recording = new GatewayStatusWriter({
      store,
      logger: createLogger({ service: "test", level: "silent" }),
      domainSuffix: "cluster.local",
      convert: (given) => {
        input = given;
        return { gateways: [], virtualServices: [], destinationRules: [], statuses: new Map() };
      },
    });
    return { recording, input: () => input };
  };
  const routeStatus = (resolved: Truth): GatewayApiStatus => ({
    kind: "HTTPRoute",
    status: {
      // An optional field left undefined, as the conversion may: not stored.
      parents: [
        {
          ...parent("a", resolved),
          parentRef: { ...parent("a", resolved).parentRef, sectionName: undefined },
        },
      ],
    },
  });
  const statuses = async () => (await env.bus.bucket(Buckets.configStatus)).get(configKey(route));

  it("stores the status with transition times, writes nothing when a replica computes the same, and moves only the changed condition's time", async () => {
    await store.apply(route, "http");
    await store.apply(virtualService, "http");
    let resolved: Truth = "True";
    const snapshot = { resources: [route, virtualService], services: new Map() };
    await writer(() => routeStatus(resolved), T0).write(snapshot);
    const first = await statuses();
    const stored = first?.value.gatewayStatus as { parents: Array<Record<string, unknown>> };
    assert.deepEqual(stored.parents[0]!.parentRef, parent("a", "True").parentRef);
    assert.deepEqual(
      stored.parents[0]!.conditions,
      parent("a", "True").conditions.map((c) => ({ ...c, lastTransitionTime: T0 })),
    );
    // Not a Gateway API kind: no gatewayStatus.
    assert.equal((await store.getStatus(virtualService))?.gatewayStatus, undefined);

    // Another replica, later, with the same result: nothing written.
    await writer(() => routeStatus(resolved), T1).write(snapshot);
    assert.equal((await statuses())?.revision, first?.revision);

    resolved = "False";
    await writer(() => routeStatus(resolved), T1).write(snapshot);
    const changed = (await store.getStatus(route))?.gatewayStatus as typeof stored;
    const times = changed.parents[0]!.conditions as Array<{ type: string; lastTransitionTime: string }>;
    assert.deepEqual(
      times.map((c) => `${c.type} ${c.lastTransitionTime}`),
      [`Accepted ${T0}`, `ResolvedRefs ${T1}`],
    );
  });

  it("writes the status again for a resource deleted and stored again between two snapshots", async () => {
    const replica = writer(() => routeStatus("True"), T0);
    await replica.write({ resources: [route], services: new Map() });
    assert.ok((await store.getStatus(route))?.gatewayStatus);
    await store.delete(route);
    await store.apply(route, "http");
    assert.equal((await store.getStatus(route))?.gatewayStatus, undefined);
    // The mirror decodes a new object for the stored value.
    await replica.write({ resources: [{ ...route }], services: new Map() });
    assert.ok((await store.getStatus(route))?.gatewayStatus, "written again");
  });

  it("gives the conversion what push gives it: resources in key order, a hostname's service from the last key", async () => {
    const { recording, input: inputOf } = recordingWriter();
    const service = (namespace: string) =>
      Service.fromPartial({ hostname: "web.example.com", namespace, name: "web" });
    await recording.write({
      resources: [virtualService, route],
      services: new Map([
        ["b.web.example.com", service("b")],
        ["a.web.example.com", service("a")],
      ]),
    });
    assert.deepEqual(
      inputOf()?.resources.map((resource) => resource.kind),
      ["HTTPRoute", "VirtualService"],
    );
    assert.equal(inputOf()?.services.get("web.example.com")?.namespace, "b");
  });

  it("gives the conversion the credential index's Secrets, and why a pair cannot serve", async () => {
    const { recording, input: inputOf } = recordingWriter();
    const presence = (name: string, fields: Partial<CredentialPresence>) =>
      CredentialPresence.fromPartial({ namespace: "shop", name, ...fields });
    await recording.write({
      resources: [route],
      services: new Map(),
      credentials: new Map([
        ["shop.good", presence("good", { hasCertificate: true })],
        ["shop.malformed", presence("malformed", { hasCertificate: true, certificateProblem: "not PEM" })],
        ["shop.ca-only", presence("ca-only", { hasCaCertificate: true })],
      ]),
    });
    assert.deepEqual([...(inputOf()?.secrets ?? [])].sort(), ["shop/ca-only", "shop/good", "shop/malformed"]);
    assert.deepEqual(Object.fromEntries(inputOf()?.secretProblems ?? []), {
      "shop/ca-only": "the Secret holds no certificate and key (tls.crt and tls.key, or cert and key)",
      "shop/malformed": "not PEM",
    });
  });

  it("leaves the statuses as they were when the conversion fails", async () => {
    await writer(() => routeStatus("True"), T0).write({ resources: [route], services: new Map() });
    const before = await statuses();
    await writer(() => {
      throw new Error("conversion bug");
    }, T1).write({ resources: [route], services: new Map() });
    assert.equal((await statuses())?.revision, before?.revision);
  });

  it("keeps an empty parents list for a route that no longer has a parent of Sextant's", async () => {
    await writer(() => undefined, T1).write({ resources: [route], services: new Map() });
    const status = await store.getStatus(route);
    assert.deepEqual(status?.gatewayStatus, { parents: [] });
    assert.equal(status?.source, "http");
  });

  it("removes the status of a Gateway once the conversion computes none (its class went to another controller)", async () => {
    const gateway = storedResource(
      {
        kind: "KubernetesGateway",
        apiVersion: "gateway.networking.k8s.io/v1",
        name: "gw",
        namespace: "shop",
      },
      { gatewayClassName: "istio", listeners: [] },
    );
    await store.apply(gateway, "http");
    let status: GatewayApiStatus | undefined = {
      kind: "KubernetesGateway",
      status: gatewayStatus("True", "True"),
    };
    const writeGateway = () =>
      new GatewayStatusWriter({
        store,
        logger: createLogger({ service: "test", level: "silent" }),
        domainSuffix: "cluster.local",
        convert: () => ({
          gateways: [],
          virtualServices: [],
          destinationRules: [],
          statuses: new Map(status ? [[configKey(gateway), status]] : []),
        }),
      }).write({ resources: [gateway], services: new Map() });
    await writeGateway();
    assert.ok((await store.getStatus(gateway))?.gatewayStatus);
    status = undefined;
    await writeGateway();
    const stored = await store.getStatus(gateway);
    assert.equal(stored?.gatewayStatus, undefined);
    assert.equal(stored?.source, "http");
  });
});
