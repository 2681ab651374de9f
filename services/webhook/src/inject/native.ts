/**
 * Native sidecars (the proxy as an init container with restartPolicy Always)
 * by Istio's ENABLE_NATIVE_SIDECARS: `true` always, `false` never, `auto`
 * (Istio's default) when the kubelets support them — Kubernetes 1.33, where
 * the feature is stable: the pod's node when it is already scheduled,
 * otherwise every node, so that a pod never lands on a node that cannot run
 * it. Without a view of the nodes, `auto` is off, as in Istio.
 */

/** ENABLE_NATIVE_SIDECARS's values. */
export type NativeSidecarMode = "true" | "false" | "auto";

/** A node's name and its kubelet's version (status.nodeInfo.kubeletVersion, e.g. v1.33.1). */
export interface NodeVersion {
  name: string;
  kubeletVersion: string;
}

/** The first Kubernetes minor version where native sidecars are stable (Istio's threshold). */
const NATIVE_SIDECAR_MINOR = 33;

/** Whether a pod gets a native sidecar when it does not say (sidecar.istio.io/nativeSidecar). */
export function nativeSidecarDefault(
  mode: NativeSidecarMode,
  nodes: readonly NodeVersion[] | undefined,
  nodeName: string | undefined,
): boolean {
  if (mode !== "auto") return mode === "true";
  if (nodes === undefined) return false;
  const node = nodeName ? nodes.find((n) => n.name === nodeName) : undefined;
  if (node) return supportsNativeSidecars(node.kubeletVersion);
  return nodes.every((n) => supportsNativeSidecars(n.kubeletVersion));
}

function supportsNativeSidecars(kubeletVersion: string): boolean {
  const match = /^v?(\d+)\.(\d+)/.exec(kubeletVersion);
  if (!match) return false;
  return Number(match[1]) > 1 || Number(match[2]) >= NATIVE_SIDECAR_MINOR;
}
