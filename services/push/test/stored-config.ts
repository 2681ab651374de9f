// Config as ingest stores it, for the tests that build a PushContext by
// hand (the golden harnesses, the sidecar LDS/RDS fixtures, virtualInbound's
// tests): each spec decoded and validated, then re-encoded canonically.
import assert from "node:assert/strict";
import { configKey } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import { decodeSpec, findKind } from "@sextant/validation";

/** A config resource as a test writes it; namespace defaults to default, apiVersion to the kind's newest. */
export interface ConfigItem {
  kind: string;
  name: string;
  namespace?: string;
  apiVersion?: string;
  annotations?: Record<string, string>;
  spec: unknown;
}

/** The items keyed as push's snapshot keys config; an invalid spec fails the test that wrote it. */
export function storedConfig(items: Iterable<ConfigItem>): Map<string, ConfigResource> {
  const config = new Map<string, ConfigResource>();
  for (const item of items) {
    const decoded = decodeSpec(item.kind, item.spec);
    assert.deepEqual(decoded.errors, [], `${item.kind} ${item.name} is invalid`);
    const kind = findKind(item.kind)!;
    const resource: ConfigResource = {
      kind: item.kind,
      apiVersion: item.apiVersion ?? `${kind.group}/${kind.versions[0]}`,
      namespace: item.namespace ?? "default",
      name: item.name,
      labels: {},
      annotations: item.annotations ?? {},
      generation: 1,
      revision: 0,
      spec: kind.codec.toJSON(decoded.value) as Record<string, unknown>,
    };
    config.set(configKey(resource), resource);
  }
  return config;
}
