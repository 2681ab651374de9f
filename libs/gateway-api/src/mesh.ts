// GAMMA: a route whose parentRef is a Service (or an Istio ServiceEntry)
// routes the mesh's traffic to that Service, for sidecars and proxyless
// clients alike: Istio makes a VirtualService bound to the `mesh` gateway
// whose host is the Service's FQDN.
import type { ConfigResource } from "@sextant/proto";
import type { VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { ParentRef } from "./references.js";
import type { RuleContext } from "./rules/index.js";
import type { ConvertedConfig, GatewayApiCondition } from "./types.js";

/** Whether a parentRef names a mesh parent (a core Service or a networking.istio.io ServiceEntry), not a Gateway. */
export function isMeshParent(parentRef: ParentRef): boolean {
  void parentRef;
  throw new Error("not yet");
}

/** A route bound to one mesh parent. */
export interface MeshParentResult {
  /**
   * The VirtualServices for the parent, one per host (a Service has one, a
   * ServiceEntry one per host); empty when the parent does not exist or the
   * rules failed. Istio merges the VirtualServices of every route of one
   * namespace for one host (and port): `key` is that merge key
   * (`namespace[/port]/host`), and the name is the key with `/` as `~`.
   */
  readonly virtualServices: ReadonlyArray<{
    readonly key: string;
    readonly config: ConvertedConfig<VirtualService>;
  }>;
  /** The parent's status conditions: Accepted and ResolvedRefs. */
  readonly conditions: readonly GatewayApiCondition[];
}

/** Converts `route` (an HTTPRoute, GRPCRoute, TLSRoute or TCPRoute) for one of its mesh parents. */
export function convertMeshParent(
  route: ConfigResource,
  parentRef: ParentRef,
  ctx: RuleContext,
): MeshParentResult {
  void route;
  void parentRef;
  void ctx;
  throw new Error("not yet");
}
