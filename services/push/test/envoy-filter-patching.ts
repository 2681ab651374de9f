// The golden tests' view of EnvoyFilter patching: what GeneratedResources
// does after the generators run (server/generated-resources.ts), per golden
// type, and the refused patches as a golden output of their own.
import { TypeUrl } from "@sextant/proto/envoy";
import { stringify } from "yaml";
import type { MeshProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
import { applyEnvoyFilters, type PatchFailure } from "../src/translate/envoyfilter/apply.js";
import type { GoldenType } from "./golden-inputs.js";

const TYPE_URLS: Record<GoldenType, string> = {
  listeners: TypeUrl.Listener,
  routes: TypeUrl.RouteConfiguration,
  clusters: TypeUrl.Cluster,
  endpoints: TypeUrl.ClusterLoadAssignment,
};

/** Applies the proxy's EnvoyFilters to a golden type's resources, collecting refused patches. */
export function envoyFilterPatcher(push: PushContext, proxy: MeshProxy) {
  const failures: PatchFailure[] = [];
  const patch = (type: GoldenType, resources: GeneratedResource[], names: WatchedNames) => {
    const outcome = applyEnvoyFilters(push, proxy, TYPE_URLS[type], resources, names === "*");
    failures.push(...outcome.failures);
    return outcome.resources;
  };
  return { patch, failures };
}

/** The `<case>.envoyfilter.out.yaml` golden of refused patches; undefined when none was refused. */
export function failuresGolden(failures: readonly PatchFailure[]): string | undefined {
  if (failures.length === 0) return undefined;
  return stringify(
    failures.map(({ filters, typeUrl, resource, reason }) => ({ filters, typeUrl, resource, reason })),
    { aliasDuplicateObjects: false },
  );
}
