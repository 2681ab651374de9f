import type { ConfigResource } from "@sextant/proto";
import {
  EnvoyFilter_ApplyTo as ApplyTo,
  type EnvoyFilter,
  EnvoyFilter_Patch_Operation as Operation,
  EnvoyFilter_PatchContext as PatchContext,
} from "@sextant/proto/gen/istio/networking/v1alpha3/envoy_filter";
import type { DecodedConfig } from "@sextant/validation";

/** Codes of the EnvoyFilter findings (Sextant's own: Istio has no such analyzers). */
export const EnvoyFilterCodes = {
  /** A patch Sextant stores but never applies. */
  PatchIgnored: "SXT0020",
  /** A patch whose result Envoy always rejects: push sends the unpatched resource instead. */
  PatchRefused: "SXT0021",
} as const;

/** What an EnvoyFilter analysis reports: where, and what it says. */
export interface EnvoyFilterFinding {
  readonly resource: ConfigResource;
  readonly code: string;
  readonly field: string;
  readonly message: string;
}

const ROUTER = "envoy.filters.http.router";

/**
 * What can be told of EnvoyFilter patches without a proxy: those Sextant
 * accepts but ignores (ECDS, the bootstrap, waypoints), and HTTP filter
 * patches that always land after the router, which Envoy refuses ("terminal
 * filter must be the last"), so push never sends them.
 */
export function analyzeEnvoyFilters(filters: readonly DecodedConfig<EnvoyFilter>[]): EnvoyFilterFinding[] {
  const findings: EnvoyFilterFinding[] = [];
  for (const { resource, spec } of filters) {
    spec.configPatches.forEach((cp, i) => {
      const field = `spec.configPatches[${i}]`;
      const ignored = (message: string) =>
        findings.push({ resource, code: EnvoyFilterCodes.PatchIgnored, field, message });
      if (cp.match?.context === PatchContext.WAYPOINT || cp.match?.waypoint) {
        ignored("Sextant has no waypoint proxies: this patch is stored but never applied");
        return;
      }
      if (cp.applyTo === ApplyTo.EXTENSION_CONFIG) {
        ignored(
          "Sextant does not patch extension configs (its ECDS serves WasmPlugins only): this patch is stored but never applied",
        );
        return;
      }
      if (cp.applyTo === ApplyTo.BOOTSTRAP) {
        ignored(
          "the agent builds the Envoy bootstrap and push cannot patch it: this patch is stored but never applied",
        );
        return;
      }
      if (cp.applyTo === ApplyTo.HTTP_FILTER && appendsAfterRouter(cp)) {
        findings.push({
          resource,
          code: EnvoyFilterCodes.PatchRefused,
          field: `${field}.patch.operation`,
          message:
            "this puts the filter after the router, which Envoy rejects (the router must be the last HTTP filter): " +
            "push sends the listener unpatched. Use INSERT_BEFORE with subFilter envoy.filters.http.router",
        });
      }
    });
  }
  return findings;
}

function appendsAfterRouter(cp: EnvoyFilter["configPatches"][number]): boolean {
  const operation = cp.patch?.operation;
  const subFilter = cp.match?.listener?.filterChain?.filter?.subFilter?.name;
  if (operation === Operation.ADD) return true;
  return operation === Operation.INSERT_AFTER && (subFilter === undefined || subFilter === ROUTER);
}
