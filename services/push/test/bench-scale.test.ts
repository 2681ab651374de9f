// The scale benchmark's harness at tiny size (bench/scale.ts runs it at
// 2,000 sidecars): simulated sidecars converge on every type against a real
// push fed by ingest and discovery, a VirtualService change and an endpoint
// change reach exactly the sidecars they affect, and the replay floor serves
// the recorded bytes so that the same sidecars converge and see the same
// changes, and the sidecars do the same over delta xDS. No timing is asserted.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { TypeUrl } from "@sextant/proto/envoy";
import { type Mesh, startMesh } from "../bench/scale/mesh.js";
import {
  measureRun,
  type Recorded,
  type RunResult,
  SidecarLoad,
  startReplayFloor,
} from "../bench/scale/run.js";
import type { SidecarSpec } from "../bench/scale/sidecars.js";

const SIDECARS = 10;

describe("scale benchmark harness (5 services, 10 sidecars, a Sidecar per namespace)", () => {
  let mesh: Mesh;
  let load: SidecarLoad;
  before(async () => {
    mesh = await startMesh({ services: 5, scoped: true });
    load = new SidecarLoad(2);
  });
  after(async () => {
    await load?.dispose();
    await mesh?.close();
  });

  const recorded: { initial?: Recorded; virtualService: string[][]; endpoints: string[][] } = {
    virtualService: [],
    endpoints: [],
  };
  let sidecars: SidecarSpec[];
  let pushRun: RunResult;

  it("sidecars converge against push and see each change where it applies", async () => {
    const push = await mesh.startPush();
    sidecars = mesh.sidecars(SIDECARS).map((spec) => ({ ...spec, address: push.address }));
    pushRun = await measureRun({
      load,
      sidecars,
      delta: false,
      pids: [push.process.child.pid as number],
      affected: mesh.affected,
      changes: 1,
      timeoutMs: 120_000,
      firstChange: 1,
      changeVirtualService: mesh.changeVirtualService,
      changeEndpoints: mesh.changeEndpoints,
      recorder: 0,
      onRecorded: (what, _change, record) => {
        if (what === "initial") recorded.initial = record;
        else recorded[what].push(record.change);
      },
    });
    await push.process.stop();
    const affected = sidecars.filter(mesh.affected).length;
    assert.equal(affected, 2, "5 services in 5 namespaces: sidecars 0 and 5 share the changed namespace");
    assert.equal(pushRun.convergence.length, SIDECARS);
    assert.equal(pushRun.virtualService[0]?.latencies.length, affected);
    assert.equal(pushRun.endpoints[0]?.latencies.length, affected);
    assert.ok((pushRun.virtualService[0]?.bytes ?? 0) > 0);
    assert.ok(pushRun.connectCpuSeconds > 0);
    // The recorder (sidecar 0) holds all four types, and the changes it saw.
    for (const typeUrl of [
      TypeUrl.Cluster,
      TypeUrl.ClusterLoadAssignment,
      TypeUrl.Listener,
      TypeUrl.RouteConfiguration,
    ])
      assert.ok((recorded.initial?.state[typeUrl]?.length ?? 0) > 0, `recorded ${typeUrl}`);
    assert.ok((recorded.virtualService[0]?.length ?? 0) > 0);
    assert.ok((recorded.endpoints[0]?.length ?? 0) > 0);
  });

  it("the replay floor serves the recorded bytes: the same sidecars converge and see the same changes", async () => {
    assert.ok(recorded.initial);
    const floor = await startReplayFloor(recorded.initial.state);
    try {
      const floorRun = await measureRun({
        load,
        sidecars: sidecars.map((spec) => ({ ...spec, address: floor.address })),
        delta: false,
        pids: [floor.pid],
        affected: mesh.affected,
        changes: 1,
        timeoutMs: 120_000,
        firstChange: 1,
        changeVirtualService: () =>
          floor.change(TypeUrl.RouteConfiguration, recorded.virtualService[0] ?? [], mesh.changedNamespace),
        changeEndpoints: () =>
          floor.change(TypeUrl.ClusterLoadAssignment, recorded.endpoints[0] ?? [], mesh.changedNamespace),
      });
      assert.equal(floorRun.convergence.length, SIDECARS);
      assert.equal(floorRun.virtualService[0]?.latencies.length, 2);
      assert.equal(floorRun.endpoints[0]?.latencies.length, 2);
      assert.ok((floorRun.virtualService[0]?.bytes ?? 0) > 0);
    } finally {
      await floor.close();
    }
  });

  it("over delta xDS the same sidecars converge and see each change", async () => {
    const push = await mesh.startPush();
    try {
      const deltaRun = await measureRun({
        load,
        sidecars: sidecars.map((spec) => ({ ...spec, address: push.address })),
        delta: true,
        pids: [push.process.child.pid as number],
        affected: mesh.affected,
        changes: 1,
        timeoutMs: 120_000,
        firstChange: 2,
        changeVirtualService: mesh.changeVirtualService,
        changeEndpoints: mesh.changeEndpoints,
      });
      assert.equal(deltaRun.convergence.length, SIDECARS);
      assert.equal(deltaRun.virtualService[0]?.latencies.length, 2);
      assert.equal(deltaRun.endpoints[0]?.latencies.length, 2);
    } finally {
      await push.process.stop();
    }
  });
});
