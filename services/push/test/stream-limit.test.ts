import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { Listener, TypeUrl } from "@sextant/proto/envoy";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { DEBUG_HEADERS, eventually, metricValue } from "@sextant/testing";
import { pushSettings } from "../src/settings.js";
import { DeltaTestClient } from "./delta-client.js";
import { type AdsTestClient, grpcNode, pushForSuite, registerService } from "./harness.js";

const HOST = "reviews.default.svc.cluster.local";
const LISTENER = `${HOST}:9080`;
const MAX_STREAMS = 2;

describe("PUSH_MAX_STREAMS", () => {
  const push = pushForSuite({
    seed: (bus) =>
      registerService(bus, HOST, { name: "grpc", number: 9080 }, [
        { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
      ]),
    env: { PUSH_MAX_STREAMS: String(MAX_STREAMS) },
  });
  const subscribe = (client: AdsTestClient, pod: string) => {
    client.send({ node: grpcNode(pod), typeUrl: TypeUrl.Listener, resourceNames: [LISTENER] });
    return client.next();
  };
  const refusals = async () =>
    metricValue(
      await (await fetch(`${push.httpUrl}/metrics`, { headers: DEBUG_HEADERS })).text(),
      "sextant_xds_stream_limit_refusals",
    );

  it("ends new streams beyond the limit with RESOURCE_EXHAUSTED and leaves the open ones served", async () => {
    const first = push.adsClient();
    await subscribe(first, "first");
    const delta = push.closeAfter(new DeltaTestClient(push.xdsAddress));
    delta.send({ node: grpcNode("delta"), typeUrl: TypeUrl.Listener, resourceNamesSubscribe: [LISTENER] });
    await delta.next();

    // Refused before the first request is read: the client need not send anything.
    const sotwRefused = push.adsClient();
    const deltaRefused = push.closeAfter(new DeltaTestClient(push.xdsAddress));
    await eventually(() => sotwRefused.error && deltaRefused.error);
    for (const refused of [sotwRefused, deltaRefused]) {
      assert.equal(refused.error?.code, GrpcStatus.RESOURCE_EXHAUSTED);
      assert.match(refused.error?.message ?? "", /at most 2 xDS streams \(PUSH_MAX_STREAMS\)/);
    }
    assert.equal(await refusals(), 2);

    // The open streams are still served: a new subscription is answered.
    first.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: [LISTENER] });
    assert.equal((await first.next()).typeUrl, TypeUrl.RouteConfiguration);
    assert.equal(first.error, undefined);
    assert.equal(delta.error, undefined);

    // A closed stream frees its place.
    first.close();
    await eventually(async () => {
      const next = push.adsClient();
      const response = await subscribe(next, "next").catch(() => undefined);
      if (!response) return false;
      assert.deepEqual(
        response.resources.map((r) => Listener.decode(r.value).name),
        [LISTENER],
      );
      return true;
    });
  });
});

describe("PUSH_MAX_STREAMS setting", () => {
  it("is 0 (no limit) by default and must be a whole number", () => {
    assert.equal(parseSettings(pushSettings, {}).PUSH_MAX_STREAMS, 0);
    assert.equal(parseSettings(pushSettings, { PUSH_MAX_STREAMS: "5000" }).PUSH_MAX_STREAMS, 5000);
    for (const value of ["-1", "1.5", "lots"])
      assert.throws(
        () => parseSettings(pushSettings, { PUSH_MAX_STREAMS: value }),
        (error) => error instanceof SettingsError && /PUSH_MAX_STREAMS/.test(error.message),
      );
  });
});
