import { KINDS } from "@sextant/validation";

/** The verbs of the config API, named as Kubernetes RBAC names them, and `debug` for debug endpoints. */
export const VERBS = ["get", "list", "create", "update", "delete", "debug"] as const;

/** One of {@link VERBS}. */
export type Verb = (typeof VERBS)[number];

/**
 * What a caller asks to do: a verb on a kind of config in a namespace (name
 * unset for `list`). A `debug` request names no kind or namespace.
 */
export interface AccessRequest {
  readonly verb: Verb;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name?: string;
}

/** An authorizer's answer; reason says why when it has one. */
export interface Decision {
  readonly allowed: boolean;
  readonly reason?: string;
}

/** How a request is shown in messages and logs: `create VirtualService in namespace "a"`. */
export function describeAccess(request: AccessRequest): string {
  if (request.verb === "debug") return "debug (read the debug endpoints)";
  const name = request.name ? ` "${request.name}"` : "";
  return `${request.verb} ${request.kind}${name} in namespace "${request.namespace}"`;
}

/**
 * The Kubernetes resource a kind of config is served as: its CRD's group,
 * newest version and plural, from @sextant/validation's KINDS.
 */
export function kindResource(kind: string): { group: string; version: string; resource: string } | undefined {
  const info = KINDS.get(kind);
  if (!info) return undefined;
  return { group: info.group, version: info.versions[0] as string, resource: info.plural };
}
