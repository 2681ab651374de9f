// References between Gateway API resources: parentRefs, backendRefs,
// certificateRefs, and the ReferenceGrants that allow one across namespaces.
import type { ConfigResource } from "@sextant/proto";

/** The core API group, as the Gateway API writes it: "" (a Service, a Secret). */
export const CORE_GROUP = "";
export const GATEWAY_GROUP = "gateway.networking.k8s.io";

/** A parentRef as written; group defaults to the Gateway API's, kind to Gateway. */
export interface ParentRef {
  group?: string;
  kind?: string;
  namespace?: string;
  name: string;
  sectionName?: string;
  port?: number;
}

/** A backendRef, mirror backendRef or certificateRef as written; group defaults to core, kind to Service (Secret for certificates). */
export interface ObjectRef {
  group?: string;
  kind?: string;
  namespace?: string;
  name: string;
  port?: number;
}

interface ReferenceGrantSpec {
  from?: Array<{ group?: string; kind?: string; namespace?: string }>;
  to?: Array<{ group?: string; kind?: string; name?: string }>;
}

/** One reference from a resource in one namespace to an object in another. */
export interface CrossNamespaceReference {
  readonly from: { readonly group: string; readonly kind: string; readonly namespace: string };
  readonly to: {
    readonly group: string;
    readonly kind: string;
    readonly namespace: string;
    readonly name: string;
  };
}

/**
 * The ReferenceGrants of a snapshot. A reference within one namespace needs
 * none; one across namespaces is allowed only by a grant in the target's
 * namespace whose `from` names the referrer's group, kind and namespace and
 * whose `to` names the target's group and kind (and its name, if the grant
 * gives one). Kinds as the API writes them: `Gateway`, not KubernetesGateway.
 */
export class ReferenceGrants {
  readonly #grants: ReadonlyArray<{ namespace: string; spec: ReferenceGrantSpec }>;

  constructor(resources: readonly ConfigResource[]) {
    this.#grants = resources
      .filter((resource) => resource.kind === "ReferenceGrant")
      .map((resource) => ({
        namespace: resource.namespace,
        spec: (resource.spec ?? {}) as ReferenceGrantSpec,
      }));
  }

  allows(reference: CrossNamespaceReference): boolean {
    const { from, to } = reference;
    if (from.namespace === to.namespace) return true;
    return this.#grants.some(
      ({ namespace, spec }) =>
        namespace === to.namespace &&
        (spec.from ?? []).some(
          (f) => (f.group ?? "") === from.group && f.kind === from.kind && f.namespace === from.namespace,
        ) &&
        (spec.to ?? []).some(
          (t) =>
            (t.group ?? "") === to.group &&
            t.kind === to.kind &&
            (t.name === undefined || t.name === to.name),
        ),
    );
  }
}
