import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  mergedRouteParents,
  statusFieldsUpToDate,
  statusForGeneration,
  withTransitionTimes,
} from "../src/gateway-status/status-object.js";

const T0 = "2026-01-01T00:00:00Z";
const T1 = "2026-01-01T00:05:00Z";

const condition = (type: string, status: string, reason = type, observedGeneration = 1) => ({
  type,
  status,
  reason,
  message: `${type} is ${status}`,
  observedGeneration,
});

const gatewayStatus = (programmed: string, listenerResolved: string) => ({
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

const parent = (name: string, resolved: string, controllerName = "istio.io/gateway-controller") => ({
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
